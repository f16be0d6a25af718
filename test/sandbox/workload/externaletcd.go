package workload

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The Secrets Cluster API reads for a control plane whose etcd is external: the etcd CA and the
// API server's client certificate, which the platform that runs the etcd provides
// (<cluster>-etcd and <cluster>-apiserver-etcd-client).
// KubeadmControlPlaneGVK is read as unstructured: the sandbox needs one field of it.
var KubeadmControlPlaneGVK = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlane"}

const (
	etcdCASecretSuffix     = "-etcd"
	etcdClientSecretSuffix = "-apiserver-etcd-client"
)

// reconcileControlPlane plays the platform of an external etcd: for a KubeadmControlPlane whose
// etcd is external, it writes the etcd CA and client certificate Secrets of its Cluster, owned
// by the Cluster, unless they exist. No etcd answers at those endpoints: nothing here dials
// one, and kubeadm's control plane provider checks no members of an external etcd.
func (c *Controller) reconcileControlPlane(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(KubeadmControlPlaneGVK)
	if err := c.client.Get(ctx, req.NamespacedName, kcp); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	endpoints, _, _ := unstructured.NestedStringSlice(kcp.Object, "spec", "kubeadmConfigSpec", "clusterConfiguration", "etcd", "external", "endpoints")
	if len(endpoints) == 0 || kcp.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, nil
	}
	name := kcp.GetLabels()[clusterv1.ClusterNameLabel]
	if name == "" {
		return reconcile.Result{}, nil // Cluster API labels it once it owns it
	}
	cl := &clusterv1.Cluster{}
	if err := c.client.Get(ctx, types.NamespacedName{Namespace: kcp.GetNamespace(), Name: name}, cl); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if paused(cl) {
		return reconcile.Result{}, nil
	}
	if _, owned, err := c.workloadOf(ctx, cl.Namespace, cl.Name); err != nil || !owned {
		return reconcile.Result{}, err
	}
	caSecret := &corev1.Secret{}
	err := c.reader.Get(ctx, types.NamespacedName{Namespace: cl.Namespace, Name: cl.Name + etcdCASecretSuffix}, caSecret)
	if err == nil || !apierrors.IsNotFound(err) {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	ca, pair, err := etcdCertificates(cl.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: cl.Name + etcdCASecretSuffix}, Data: ca},
		{ObjectMeta: metav1.ObjectMeta{Name: cl.Name + etcdClientSecretSuffix}, Data: pair},
	} {
		s.Namespace, s.Labels, s.Type = cl.Namespace, map[string]string{clusterv1.ClusterNameLabel: cl.Name}, clusterv1.ClusterSecretType
		if err := controllerutil.SetOwnerReference(cl, s, c.client.Scheme()); err != nil {
			return reconcile.Result{}, fmt.Errorf("own secret %s by its cluster: %w", s.Name, err)
		}
		if err := c.client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, fmt.Errorf("create the external etcd secret %s: %w", s.Name, err)
		}
	}
	log.FromContext(ctx).Info("the sandbox plays the cluster's external etcd platform: its CA and client certificate written", "cluster", cl.Name)
	return reconcile.Result{}, nil
}

// etcdCertificates makes an etcd CA (tls.crt, tls.key) and a client certificate it signs.
func etcdCertificates(cluster string) (ca, clientPair map[string][]byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("etcd ca key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cluster + "-etcd-ca"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(365 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("etcd ca: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("etcd client key: %w", err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver-etcd-client"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("etcd client certificate: %w", err)
	}
	encode := func(k *ecdsa.PrivateKey) ([]byte, error) {
		b, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, fmt.Errorf("encode key: %w", err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: b}), nil
	}
	caKeyPEM, err := encode(caKey)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := encode(key)
	if err != nil {
		return nil, nil, err
	}
	return map[string][]byte{corev1.TLSCertKey: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), corev1.TLSPrivateKeyKey: caKeyPEM},
		map[string][]byte{corev1.TLSCertKey: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), corev1.TLSPrivateKeyKey: keyPEM}, nil
}
