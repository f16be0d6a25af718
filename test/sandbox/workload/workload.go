package workload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/captf/cluster-api-provider-terraform/test/sandbox/nodes"
)

const (
	// NodeLabel marks the Nodes registered here, with the providerID's owner as value
	// (<namespace>.<Machine or MachinePool name>).
	NodeLabel = "captf.io/workload-node"
	// NodeTaint keeps runner pods off the workload clusters' Nodes.
	NodeTaint = "captf.io/workload-node"
	// DefaultHeartbeatInterval is how often the Nodes' Leases are renewed.
	DefaultHeartbeatInterval = 10 * time.Second
	// KubeconfigSecretType is the type of the kubeconfig Secrets written here.
	KubeconfigSecretType = corev1.SecretTypeOpaque
	// KubeadmConfigMap is the ConfigMap kubeadm init writes in kube-system. The kubeadm control
	// plane provider counts its control plane initialized once it finds it in the workload
	// cluster.
	KubeadmConfigMap = "kubeadm-config"
	// ControlPlaneNodeRole is the label and the NoSchedule taint kubeadm gives a control plane
	// node; kubeadm's control plane provider finds its nodes by the label.
	ControlPlaneNodeRole = "node-role.kubernetes.io/control-plane"
)

// ControlPlaneComponents are the static pods kubeadm runs on a control plane node, in
// kube-system, named <component>-<node>, which kubeadm's control plane provider checks. etcd's is
// not among them: the sandbox plays no etcd members, so a ClusterClass cluster whose control
// plane should become Available names an external etcd (the ClusterClass's
// externalEtcdEndpoints variable), and the provider then checks these three only.
var ControlPlaneComponents = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// Controller registers the kubeconfig Secrets and the Nodes.
type Controller struct {
	// Kubeconfig is the administrator kubeconfig of the sandbox, written into each Cluster's
	// kubeconfig Secret. Its current context's server is this sandbox's API server.
	Kubeconfig []byte
	// HeartbeatInterval defaults to DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration

	client client.Client
	reader client.Reader
	server string
}

// SetupWithManager registers the controllers of Clusters, Machines and MachinePools and the
// heartbeat of the Nodes.
func (c *Controller) SetupWithManager(mgr manager.Manager) error {
	server, err := serverOf(c.Kubeconfig)
	if err != nil {
		return err
	}
	c.server = server
	c.client, c.reader = mgr.GetClient(), mgr.GetAPIReader()
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	// Several sandboxes run in one test process, each with controllers of these names.
	opts := controller.Options{SkipNameValidation: ptr.To(true)}
	if err := builder.ControllerManagedBy(mgr).Named("workload-kubeconfig").For(&clusterv1.Cluster{}).WithOptions(opts).
		Complete(reconcile.Func(c.reconcileCluster)); err != nil {
		return fmt.Errorf("workload: cluster controller: %w", err)
	}
	providerIDs := predicate.NewPredicateFuncs(func(o client.Object) bool {
		switch o := o.(type) {
		case *clusterv1.Machine:
			return o.Spec.ProviderID != ""
		case *clusterv1.MachinePool:
			return len(o.Spec.ProviderIDList) > 0
		}
		return false
	})
	if err := builder.ControllerManagedBy(mgr).Named("workload-machine-nodes").For(&clusterv1.Machine{}, builder.WithPredicates(providerIDs)).WithOptions(opts).
		Complete(reconcile.Func(c.reconcileMachine)); err != nil {
		return fmt.Errorf("workload: machine controller: %w", err)
	}
	if err := builder.ControllerManagedBy(mgr).Named("workload-machinepool-nodes").For(&clusterv1.MachinePool{}, builder.WithPredicates(providerIDs)).WithOptions(opts).
		Complete(reconcile.Func(c.reconcileMachinePool)); err != nil {
		return fmt.Errorf("workload: machine pool controller: %w", err)
	}
	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(KubeadmControlPlaneGVK)
	if err := builder.ControllerManagedBy(mgr).Named("workload-external-etcd").For(kcp).WithOptions(opts).
		Complete(reconcile.Func(c.reconcileControlPlane)); err != nil {
		return fmt.Errorf("workload: control plane controller: %w", err)
	}
	return mgr.Add(manager.RunnableFunc(c.heartbeat))
}

// serverOf is the server of a kubeconfig's current context.
func serverOf(raw []byte) (string, error) {
	kc, err := clientcmd.Load(raw)
	if err != nil {
		return "", fmt.Errorf("workload: read a kubeconfig: %w", err)
	}
	ctx, ok := kc.Contexts[kc.CurrentContext]
	if !ok {
		return "", fmt.Errorf("workload: the kubeconfig has no current context %q", kc.CurrentContext)
	}
	cl, ok := kc.Clusters[ctx.Cluster]
	if !ok {
		return "", fmt.Errorf("workload: the kubeconfig has no cluster %q", ctx.Cluster)
	}
	return cl.Server, nil
}

// paused reports whether Cluster API treats the Cluster as paused.
func paused(c *clusterv1.Cluster) bool {
	_, annotated := c.Annotations[clusterv1.PausedAnnotation]
	return annotated || (c.Spec.Paused != nil && *c.Spec.Paused)
}

// kubeconfigName is Cluster API's name of a Cluster's kubeconfig Secret.
func kubeconfigName(cluster string) string { return cluster + "-kubeconfig" }

// reconcileCluster creates the Cluster's kubeconfig Secret unless it exists.
func (c *Controller) reconcileCluster(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cl := &clusterv1.Cluster{}
	if err := c.client.Get(ctx, req.NamespacedName, cl); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if paused(cl) || !cl.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	s := &corev1.Secret{}
	err := c.reader.Get(ctx, types.NamespacedName{Namespace: cl.Namespace, Name: kubeconfigName(cl.Name)}, s)
	if err == nil || !apierrors.IsNotFound(err) {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	s = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: cl.Namespace, Name: kubeconfigName(cl.Name),
			Labels: map[string]string{clusterv1.ClusterNameLabel: cl.Name}},
		// A user-provided kubeconfig, as Cluster API calls one whose type is not its own: the
		// kubeadm control plane provider adopts a Secret of type cluster.x-k8s.io/secret and
		// rotates its client certificate (the sandbox's expires within a week, under its six
		// month threshold) with a kubeconfig for the cluster's endpoint, which no API server
		// answers here.
		Type: KubeconfigSecretType,
		Data: map[string][]byte{"value": c.Kubeconfig},
	}
	if err := controllerutil.SetControllerReference(cl, s, c.client.Scheme()); err != nil {
		return reconcile.Result{}, fmt.Errorf("own the kubeconfig secret by its cluster: %w", err)
	}
	if err := c.client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return reconcile.Result{}, fmt.Errorf("create the kubeconfig secret of cluster %s: %w", cl.Name, err)
	}
	log.FromContext(ctx).Info("the sandbox is the cluster's workload cluster", "secret", s.Name)
	return reconcile.Result{}, nil
}

// reconcileMachine registers the Node of a Machine's providerID.
func (c *Controller) reconcileMachine(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	m := &clusterv1.Machine{}
	if err := c.client.Get(ctx, req.NamespacedName, m); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if m.Spec.ProviderID == "" {
		return reconcile.Result{}, nil
	}
	res, err := c.registerAll(ctx, m.Namespace, m.Spec.ClusterName, m.Name, m.Spec.Version, []string{m.Spec.ProviderID})
	if err != nil || !res.IsZero() {
		return res, err
	}
	if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; !cp {
		return reconcile.Result{}, nil
	}
	// registerAll registered the Node only if this sandbox owns the workload cluster.
	if _, owned, err := c.workloadOf(ctx, m.Namespace, m.Spec.ClusterName); err != nil || !owned {
		return reconcile.Result{}, err
	}
	if err := c.controlPlaneNode(ctx, NodeName(m.Spec.ProviderID), m.Spec.Version); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, c.kubeadmInit(ctx)
}

// controlPlaneNode makes node what kubeadm makes of a control plane node: the control plane
// role's label and NoSchedule taint, and the Running, Ready static pods of
// ControlPlaneComponents, each written once (a person may then report one unready, as its
// kubelet would).
func (c *Controller) controlPlaneNode(ctx context.Context, node, version string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Node{}
		if err := c.reader.Get(ctx, types.NamespacedName{Name: node}, n); err != nil {
			return err
		}
		if _, ok := n.Labels[ControlPlaneNodeRole]; ok {
			return nil
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[ControlPlaneNodeRole] = ""
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: ControlPlaneNodeRole, Effect: corev1.TaintEffectNoSchedule})
		return c.client.Update(ctx, n)
	})
	if err != nil {
		return fmt.Errorf("give node %s the control plane role: %w", node, err)
	}
	for _, component := range ControlPlaneComponents {
		if err := c.staticPod(ctx, component, node, version); err != nil {
			return err
		}
	}
	return nil
}

// staticPod creates kube-system/<component>-<node> unless it exists, bound to node, as the mirror
// pod a kubelet posts for a static pod, and writes the status the kubelet would report once the
// component runs.
func (c *Controller) staticPod(ctx context.Context, component, node, version string) error {
	key := types.NamespacedName{Namespace: metav1.NamespaceSystem, Name: component + "-" + node}
	if version == "" {
		version = "latest"
	}
	p := &corev1.Pod{}
	err := c.reader.Get(ctx, key, p)
	if err == nil || !apierrors.IsNotFound(err) {
		return client.IgnoreNotFound(err)
	}
	p = &corev1.Pod{
		// A mirror pod, as a kubelet posts for a static pod: a drain leaves it alone (it goes
		// with its node), so a control plane machine's deletion is not held by its own pods.
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Labels:      map[string]string{"component": component, "tier": "control-plane"},
			Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "sandbox-" + component}},
		Spec: corev1.PodSpec{
			NodeName:                     node,
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{{Name: component, Image: "registry.k8s.io/" + component + ":" + version}},
			// As kubeadm's static pods: no taint evicts them.
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
		},
	}
	if err := c.client.Create(ctx, p); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the static pod %s: %w", key.Name, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &corev1.Pod{}
		if err := c.reader.Get(ctx, key, cur); err != nil {
			return err
		}
		now := metav1.Now()
		cur.Status.Phase = corev1.PodRunning
		cur.Status.StartTime = &now
		cur.Status.Conditions = nil
		for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			cur.Status.Conditions = append(cur.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
		}
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: component, Ready: true, Started: ptr.To(true),
			Image: cur.Spec.Containers[0].Image, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
		return c.client.Status().Update(ctx, cur)
	})
	if err != nil {
		return fmt.Errorf("write the status of the static pod %s: %w", key.Name, err)
	}
	return nil
}

// kubeadmInit writes kube-system/kubeadm-config unless it exists, as kubeadm init does on the
// first control plane machine, with the ClusterConfiguration kubeadm would store. One API server
// plays every workload cluster, so the first control plane node of any Cluster writes it.
func (c *Controller) kubeadmInit(ctx context.Context) error {
	cm := &corev1.ConfigMap{}
	err := c.reader.Get(ctx, types.NamespacedName{Namespace: metav1.NamespaceSystem, Name: KubeadmConfigMap}, cm)
	if err == nil || !apierrors.IsNotFound(err) {
		return client.IgnoreNotFound(err)
	}
	cm = &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: KubeadmConfigMap},
		Data:       map[string]string{"ClusterConfiguration": "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n"},
	}
	if err := c.client.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("write kube-system/%s: %w", KubeadmConfigMap, err)
	}
	log.FromContext(ctx).Info("a control plane node registered: kubeadm init done", "configMap", KubeadmConfigMap)
	return nil
}

// reconcileMachinePool registers a Node for each providerID of a MachinePool.
func (c *Controller) reconcileMachinePool(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := &clusterv1.MachinePool{}
	if err := c.client.Get(ctx, req.NamespacedName, p); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	return c.registerAll(ctx, p.Namespace, p.Spec.ClusterName, p.Name, p.Spec.Template.Spec.Version, p.Spec.ProviderIDList)
}

// workloadOf reads the cluster's kubeconfig Secret, the one place that decides whether this
// sandbox plays the cluster's workload cluster: found is false while the Secret does not exist
// yet; owned says whether it names this sandbox's API server (a Cluster moved in from another
// sandbox keeps that one).
func (c *Controller) workloadOf(ctx context.Context, ns, cluster string) (found, owned bool, err error) {
	s := &corev1.Secret{}
	if err := c.reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: kubeconfigName(cluster)}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return false, false, nil
		}
		return false, false, fmt.Errorf("get the kubeconfig secret of cluster %s: %w", cluster, err)
	}
	server, err := serverOf(s.Data["value"])
	if err != nil || server != c.server {
		return true, false, nil
	}
	return true, true, nil
}

// registerAll registers the Nodes of providerIDs, reported by owner of cluster, whose kubelets
// run version, when this sandbox is that cluster's workload cluster.
func (c *Controller) registerAll(ctx context.Context, ns, cluster, owner, version string, providerIDs []string) (reconcile.Result, error) {
	found, owned, err := c.workloadOf(ctx, ns, cluster)
	switch {
	case err != nil:
		return reconcile.Result{}, err
	case !found:
		// The Cluster's controller writes it; the Machine is seen again on its next change.
		return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
	case !owned:
		// Another sandbox's workload cluster (moved here), or not a kubeconfig this sandbox reads.
		return reconcile.Result{}, nil
	}
	for _, id := range providerIDs {
		if err := c.register(ctx, NodeName(id), id, ns+"."+owner, version); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, nil
}

var notName = regexp.MustCompile(`[^a-z0-9.-]+`)

// NodeName is the Node name of a providerID: the providerID made a DNS subdomain, with a hash
// of it when the name had to be shortened.
func NodeName(providerID string) string {
	n := strings.Trim(notName.ReplaceAllString(strings.ToLower(providerID), "-"), "-.")
	if len(n) <= 63 {
		return n
	}
	sum := sha256.Sum256([]byte(providerID))
	return strings.Trim(n[:50], "-.") + "-" + hex.EncodeToString(sum[:])[:12]
}

// register creates the Node unless it exists and writes a ready status, its kubelet's version
// among it (Cluster API compares a MachinePool's version with its nodes' kubelets).
func (c *Controller) register(ctx context.Context, name, providerID, owner, version string) error {
	n := &corev1.Node{}
	err := c.reader.Get(ctx, types.NamespacedName{Name: name}, n)
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get node %s: %w", name, err)
	}
	n = &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{NodeLabel: owner, corev1.LabelHostname: name}},
		Spec: corev1.NodeSpec{ProviderID: providerID,
			Taints: []corev1.Taint{{Key: NodeTaint, Effect: corev1.TaintEffectNoSchedule}}},
	}
	if err := c.client.Create(ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register node %s: %w", name, err)
	}
	// The node lifecycle controller may taint a new Node that reports no Ready condition yet:
	// read it again on a conflict.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &corev1.Node{}
		if err := c.reader.Get(ctx, types.NamespacedName{Name: name}, cur); err != nil {
			return err
		}
		cur.Status.Conditions = nodes.ReadyConditions(cur.Status.Conditions, metav1.Now(), "a node of a workload cluster the sandbox plays")
		cur.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}}
		cur.Status.NodeInfo.KubeletVersion = version
		return c.client.Status().Update(ctx, cur)
	})
	if err != nil {
		return fmt.Errorf("write the status of node %s: %w", name, err)
	}
	if err := nodes.RenewLease(ctx, c.client, c.reader, name); err != nil {
		return err
	}
	log.FromContext(ctx).Info("registered the node of a providerID", "node", name, "providerID", providerID)
	return nil
}

// heartbeat renews the Lease of every Node registered here until ctx ends.
func (c *Controller) heartbeat(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("workload-heartbeat")
	t := time.NewTicker(c.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		var list corev1.NodeList
		if err := c.reader.List(ctx, &list, client.HasLabels{NodeLabel}); err != nil {
			if ctx.Err() == nil {
				logger.Error(err, "list the workload nodes")
			}
			continue
		}
		for i := range list.Items {
			if err := nodes.RenewLease(ctx, c.client, c.reader, list.Items[i].Name); err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) {
				logger.Error(err, "renew a workload node's lease", "node", list.Items[i].Name)
			}
		}
	}
}
