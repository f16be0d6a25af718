package workload

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	testenv "github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/nodes"
)

// kubeconfigFor is a kubeconfig whose current context names server.
func kubeconfigFor(t *testing.T, server string) []byte {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: server}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	kc.CurrentContext = "c"
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func cluster(ns, name string) *clusterv1.Cluster {
	return &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TerraformCluster", Name: name}}}
}

func machine(ns, name, cluster, providerID string) *clusterv1.Machine {
	return &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.MachineSpec{ClusterName: cluster, ProviderID: providerID, Version: "v1.36.0",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("b")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TerraformMachine", Name: name}}}
}

func req(o client.Object) reconcile.Request {
	return reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)}
}

// TestWorkloadClusters runs the controller's passes against a real API server: the
// kubeconfig Secret of each Cluster, a Ready Node with a live Lease per providerID, and nothing
// for a paused Cluster or for a Cluster whose kubeconfig names another API server.
func TestWorkloadClusters(t *testing.T) {
	g := NewWithT(t)
	kubeadm, err := testenv.ClusterAPIKubeadmCRDs()
	g.Expect(err).NotTo(HaveOccurred())
	env, k8s, err := testenv.StartWithClusterAPI(testenv.Options{ExtraCRDPaths: kubeadm})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "w"}})).To(Succeed())
	const server = "https://sandbox.example:6443"
	c := &Controller{Kubeconfig: kubeconfigFor(t, server), HeartbeatInterval: 200 * time.Millisecond,
		client: k8s, reader: k8s, server: server}

	t.Run("a Cluster gets its kubeconfig Secret, owned by it", func(t *testing.T) {
		g := NewWithT(t)
		cl := cluster("w", "a")
		g.Expect(k8s.Create(ctx, cl)).To(Succeed())
		_, err := c.reconcileCluster(ctx, req(cl))
		g.Expect(err).NotTo(HaveOccurred())
		s := &corev1.Secret{}
		g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: "w", Name: "a-kubeconfig"}, s)).To(Succeed())
		g.Expect(s.Data["value"]).To(Equal(c.Kubeconfig))
		g.Expect(s.Type).To(Equal(corev1.SecretTypeOpaque), "a user-provided kubeconfig: the kubeadm control plane provider leaves it alone")
		g.Expect(s.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, "a"))
		g.Expect(s.OwnerReferences).To(ConsistOf(HaveField("UID", cl.UID)))
	})

	t.Run("a paused Cluster gets none", func(t *testing.T) {
		g := NewWithT(t)
		cl := cluster("w", "paused")
		cl.Spec.Paused = ptr.To(true)
		g.Expect(k8s.Create(ctx, cl)).To(Succeed())
		_, err := c.reconcileCluster(ctx, req(cl))
		g.Expect(err).NotTo(HaveOccurred())
		err = k8s.Get(ctx, types.NamespacedName{Namespace: "w", Name: "paused-kubeconfig"}, &corev1.Secret{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	})

	t.Run("a Machine's providerID gets a Ready Node, tainted against runner pods, with a Lease the heartbeat renews", func(t *testing.T) {
		g := NewWithT(t)
		m := machine("w", "m0", "a", "captf://w/m0/1234")
		g.Expect(k8s.Create(ctx, m)).To(Succeed())
		_, err := c.reconcileMachine(ctx, req(m))
		g.Expect(err).NotTo(HaveOccurred())
		n := &corev1.Node{}
		g.Expect(k8s.Get(ctx, types.NamespacedName{Name: NodeName(m.Spec.ProviderID)}, n)).To(Succeed())
		g.Expect(n.Name).To(Equal("captf-w-m0-1234"))
		g.Expect(n.Spec.ProviderID).To(Equal(m.Spec.ProviderID))
		g.Expect(n.Labels).To(HaveKeyWithValue(NodeLabel, "w.m0"))
		g.Expect(n.Spec.Taints).To(ContainElement(corev1.Taint{Key: NodeTaint, Effect: corev1.TaintEffectNoSchedule}))
		g.Expect(n.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionTrue))))
		err = k8s.Get(ctx, types.NamespacedName{Namespace: metav1.NamespaceSystem, Name: KubeadmConfigMap}, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a worker's node does not run kubeadm init: %v", err)
		g.Expect(n.Labels).NotTo(HaveKey(ControlPlaneNodeRole))
		err = k8s.Get(ctx, types.NamespacedName{Namespace: metav1.NamespaceSystem, Name: "kube-apiserver-" + n.Name}, &corev1.Pod{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a worker's node runs no control plane pod: %v", err)

		lease := &coordinationv1.Lease{}
		key := types.NamespacedName{Namespace: nodes.LeaseNamespace, Name: n.Name}
		g.Expect(k8s.Get(ctx, key, lease)).To(Succeed())
		first := lease.Spec.RenewTime.Time
		hb, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- c.heartbeat(hb) }()
		g.Eventually(func() time.Time {
			g.Expect(k8s.Get(ctx, key, lease)).To(Succeed())
			return lease.Spec.RenewTime.Time
		}, 10*time.Second, 50*time.Millisecond).Should(BeTemporally(">", first), "the heartbeat renews the node's Lease")
		stop()
		g.Expect(<-done).To(Succeed())
	})

	t.Run("a control plane Machine's node makes kube-system/kubeadm-config, as kubeadm init does", func(t *testing.T) {
		g := NewWithT(t)
		m := machine("w", "cp0", "a", "captf://w/cp0/1")
		m.Labels = map[string]string{clusterv1.MachineControlPlaneLabel: ""}
		g.Expect(k8s.Create(ctx, m)).To(Succeed())
		_, err := c.reconcileMachine(ctx, req(m))
		g.Expect(err).NotTo(HaveOccurred())
		cm := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: metav1.NamespaceSystem, Name: KubeadmConfigMap}, cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKey("ClusterConfiguration"))

		n := &corev1.Node{}
		g.Expect(k8s.Get(ctx, types.NamespacedName{Name: NodeName(m.Spec.ProviderID)}, n)).To(Succeed())
		g.Expect(n.Labels).To(HaveKey(ControlPlaneNodeRole), "kubeadm's control plane provider finds its nodes by the role's label")
		g.Expect(n.Spec.Taints).To(ContainElement(corev1.Taint{Key: ControlPlaneNodeRole, Effect: corev1.TaintEffectNoSchedule}))
		for _, component := range ControlPlaneComponents {
			p := &corev1.Pod{}
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: metav1.NamespaceSystem, Name: component + "-" + n.Name}, p)).To(Succeed(), component)
			g.Expect(p.Spec.NodeName).To(Equal(n.Name))
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(p.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))), component)
		}
	})

	t.Run("a kubeadm control plane with an external etcd gets its etcd CA and client certificate Secrets; one with stacked etcd none", func(t *testing.T) {
		g := NewWithT(t)
		kcp := func(name, cluster string, endpoints []any) *unstructured.Unstructured {
			u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
				"version": "v1.36.0",
				"machineTemplate": map[string]any{"spec": map[string]any{"infrastructureRef": map[string]any{
					"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformMachineTemplate", "name": "t"}}},
			}}}
			if endpoints != nil {
				g.Expect(unstructured.SetNestedField(u.Object, map[string]any{"endpoints": endpoints, "caFile": "/ca", "certFile": "/crt", "keyFile": "/key"},
					"spec", "kubeadmConfigSpec", "clusterConfiguration", "etcd", "external")).To(Succeed())
			}
			u.SetGroupVersionKind(KubeadmControlPlaneGVK)
			u.SetNamespace("w")
			u.SetName(name)
			u.SetLabels(map[string]string{clusterv1.ClusterNameLabel: cluster})
			g.Expect(k8s.Create(ctx, u)).To(Succeed())
			return u
		}
		ext := kcp("ext", "a", []any{"https://etcd.example:2379"})
		_, err := c.reconcileControlPlane(ctx, req(ext))
		g.Expect(err).NotTo(HaveOccurred())
		for _, name := range []string{"a-etcd", "a-apiserver-etcd-client"} {
			sec := &corev1.Secret{}
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: "w", Name: name}, sec)).To(Succeed(), name)
			g.Expect(sec.Data).To(HaveKey(corev1.TLSCertKey))
			g.Expect(sec.Data).To(HaveKey(corev1.TLSPrivateKeyKey))
			g.Expect(sec.OwnerReferences).To(ConsistOf(HaveField("Name", "a")), "owned by the Cluster, so move takes it and deletion removes it")
		}
		cl := cluster("w", "stacked")
		g.Expect(k8s.Create(ctx, cl)).To(Succeed())
		_, err = c.reconcileCluster(ctx, req(cl))
		g.Expect(err).NotTo(HaveOccurred())
		stacked := kcp("stacked", "stacked", nil)
		_, err = c.reconcileControlPlane(ctx, req(stacked))
		g.Expect(err).NotTo(HaveOccurred())
		err = k8s.Get(ctx, types.NamespacedName{Namespace: "w", Name: "stacked-etcd"}, &corev1.Secret{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "kubeadm generates a stacked etcd's CA itself: %v", err)
	})

	t.Run("a MachinePool gets a Node per providerID", func(t *testing.T) {
		g := NewWithT(t)
		p := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: "w", Name: "pool"},
			Spec: clusterv1.MachinePoolSpec{ClusterName: "a", ProviderIDList: []string{"captf://w/pool-0/x", "captf://w/pool-1/y"},
				Template: clusterv1.MachineTemplateSpec{Spec: machine("w", "pool", "a", "").Spec}}}
		g.Expect(k8s.Create(ctx, p)).To(Succeed())
		_, err := c.reconcileMachinePool(ctx, req(p))
		g.Expect(err).NotTo(HaveOccurred())
		for _, id := range p.Spec.ProviderIDList {
			n := &corev1.Node{}
			g.Expect(k8s.Get(ctx, types.NamespacedName{Name: NodeName(id)}, n)).To(Succeed(), id)
			g.Expect(n.Spec.ProviderID).To(Equal(id))
			g.Expect(n.Status.NodeInfo.KubeletVersion).To(Equal(p.Spec.Template.Spec.Version), "Cluster API compares a pool's version with its nodes' kubelets")
		}
	})

	t.Run("a Cluster whose kubeconfig names another API server (moved in) gets no Node here", func(t *testing.T) {
		g := NewWithT(t)
		cl := cluster("w", "moved")
		g.Expect(k8s.Create(ctx, cl)).To(Succeed())
		g.Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "w", Name: "moved-kubeconfig"},
			Data: map[string][]byte{"value": kubeconfigFor(t, "https://elsewhere.example:6443")}})).To(Succeed())
		_, err := c.reconcileCluster(ctx, req(cl))
		g.Expect(err).NotTo(HaveOccurred())
		s := &corev1.Secret{}
		g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: "w", Name: "moved-kubeconfig"}, s)).To(Succeed())
		g.Expect(s.Data["value"]).To(Equal(kubeconfigFor(t, "https://elsewhere.example:6443")), "an existing kubeconfig Secret is left alone")
		m := machine("w", "mm", "moved", "captf://w/mm/5678")
		g.Expect(k8s.Create(ctx, m)).To(Succeed())
		_, err = c.reconcileMachine(ctx, req(m))
		g.Expect(err).NotTo(HaveOccurred())
		err = k8s.Get(ctx, types.NamespacedName{Name: NodeName(m.Spec.ProviderID)}, &corev1.Node{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	})
}

// TestNodeName keeps node names valid DNS subdomains of at most 63 characters, unique per
// providerID.
func TestNodeName(t *testing.T) {
	g := NewWithT(t)
	g.Expect(NodeName("captf://default/sample-machine-0/AB_cd")).To(Equal("captf-default-sample-machine-0-ab-cd"))
	long1 := NodeName("captf://a-very-long-namespace-name/a-very-long-machine-name-0/0123456789abcdef")
	long2 := NodeName("captf://a-very-long-namespace-name/a-very-long-machine-name-0/0123456789abcdeg")
	g.Expect(len(long1)).To(BeNumerically("<=", 63))
	g.Expect(long1).NotTo(Equal(long2))
}
