package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/test/sandbox/nodes"
)

// The bench's node. With the real kube-controller-manager and kube-scheduler running, the Job
// controller owns a Job's status and the scheduler binds its pod; what is left is the kubelet.
// benchNode plays a minimal one: it registers one Node (Ready, with room for every pod of the
// package), keeps its heartbeat Lease fresh, and writes the status of the pods bound to it the
// way a kubelet does, through pods/status: a bound pod starts running at once and stays so
// until the bench says how its Job ends (end); then its containers terminate with that exit
// code and termination message, and the Job controller completes or fails the Job. A pod being
// deleted is stopped (Failed unless it had ended) and removed, as a kubelet confirms a deletion.
// Nothing runs: no container, no terraform.
const (
	benchNodeName = "bench-node"
	// nodeHeartbeat is a kubelet's Lease renewal interval (the Lease itself is package
	// nodes').
	nodeHeartbeat = 10 * time.Second
	// nodeWorkers is how many pods the node writes at once.
	nodeWorkers = 4
	// nodeRetriesBeforeLog is how often a pod's write fails before the node logs the error.
	nodeRetriesBeforeLog = 5
)

// podEnd is how the pods of a Job end: their containers' exit code and termination message.
type podEnd struct {
	exitCode int32
	message  string
}

// benchNode is the bench's kubelet (see above).
type benchNode struct {
	name  string
	c     client.Client
	pods  cache.Cache
	queue workqueue.TypedRateLimitingInterface[types.NamespacedName]

	mu sync.Mutex
	// ends says, per Job, how its pods end; a Job without one runs until it is deleted.
	ends map[types.NamespacedName]podEnd

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startNode registers the bench's Node and starts its heartbeat and its pod workers; stop it
// with stop.
func startNode(parent context.Context, cfg *rest.Config, scheme *k8sruntime.Scheme) (*benchNode, error) {
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("node client: %w", err)
	}
	pods, err := cache.New(cfg, cache.Options{Scheme: scheme,
		ByObject:         map[client.Object]cache.ByObject{&corev1.Pod{}: {Field: fields.OneTermEqualSelector("spec.nodeName", benchNodeName)}},
		DefaultTransform: trimPod,
	})
	if err != nil {
		return nil, fmt.Errorf("node pod cache: %w", err)
	}
	n := &benchNode{name: benchNodeName, c: c, pods: pods, ends: map[types.NamespacedName]podEnd{},
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName]())}
	ctx, cancel := context.WithCancel(parent)
	n.cancel = cancel
	if err := n.register(ctx); err != nil {
		cancel()
		return nil, err
	}
	inf, err := pods.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("node pod informer: %w", err)
	}
	enqueue := func(obj any) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			n.queue.Add(client.ObjectKeyFromObject(p))
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue}); err != nil {
		cancel()
		return nil, fmt.Errorf("node pod handler: %w", err)
	}
	n.goRun(func() {
		if err := pods.Start(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "bench node: pod cache: %v\n", err)
		}
	})
	if !pods.WaitForCacheSync(ctx) {
		n.stop()
		return nil, errors.New("bench node: pod cache did not sync")
	}
	n.goRun(func() { n.heartbeat(ctx) })
	for i := 0; i < nodeWorkers; i++ {
		n.goRun(func() {
			for n.work(ctx) {
			}
		})
	}
	return n, nil
}

// goRun runs fn in a goroutine stop waits for.
func (n *benchNode) goRun(fn func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		fn()
	}()
}

// stop ends the heartbeat, the workers and the pod cache, and waits for them.
func (n *benchNode) stop() {
	n.cancel()
	n.queue.ShutDown()
	n.wg.Wait()
}

// trimPod keeps of a cached pod only what the node decides on (its key, labels, node, phase
// and deletion), so the node's cache stays small beside the manager's heap the bench measures.
func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, DeletionTimestamp: p.DeletionTimestamp},
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}, nil
}

// nodeResources is what the node offers the scheduler: room for every pod the package starts.
func nodeResources() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("1000"),
		corev1.ResourceMemory:           resource.MustParse("4Ti"),
		corev1.ResourceEphemeralStorage: resource.MustParse("10Ti"),
		corev1.ResourcePods:             resource.MustParse("10000"),
	}
}

// register creates the Node and writes a ready status, as a kubelet registers itself. The API
// server gives a new Node the not-ready taint; the node lifecycle controller removes it once it
// sees the Ready condition, and the scheduler binds pods to the node from then on.
func (n *benchNode) register(ctx context.Context) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{
		corev1.LabelHostname: n.name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: runtime.GOARCH,
	}}}
	if err := n.c.Create(ctx, node); err != nil {
		return fmt.Errorf("register node %s: %w", n.name, err)
	}
	now := metav1.Now()
	node.Status = corev1.NodeStatus{
		Capacity: nodeResources(), Allocatable: nodeResources(),
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: n.name}},
		NodeInfo:  corev1.NodeSystemInfo{OperatingSystem: "linux", Architecture: runtime.GOARCH},
	}
	node.Status.Conditions = nodes.ReadyConditions(nil, now, "the bench's node")
	if err := n.c.Status().Update(ctx, node); err != nil {
		return fmt.Errorf("write status of node %s: %w", n.name, err)
	}
	return n.renewLease(ctx)
}

// renewLease creates or renews the node's heartbeat Lease, which the node lifecycle controller
// reads as the node's heartbeat.
func (n *benchNode) renewLease(ctx context.Context) error {
	return nodes.RenewLease(ctx, n.c, n.c, n.name)
}

// heartbeat renews the node's Lease every nodeHeartbeat until ctx ends.
func (n *benchNode) heartbeat(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(nodeHeartbeat):
		}
		if err := n.renewLease(ctx); err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "bench node: heartbeat: %v\n", err)
		}
	}
}

// end says how the pods of the Job ns/job end (exit code 0 when succeeded, else 1, with
// message as the termination message) and has the node end the ones it runs already; a pod
// bound later ends as soon as it has started.
func (n *benchNode) end(ns, job string, succeeded bool, message string) error {
	e := podEnd{message: message}
	if !succeeded {
		e.exitCode = 1
	}
	n.mu.Lock()
	n.ends[types.NamespacedName{Namespace: ns, Name: job}] = e
	n.mu.Unlock()
	pods := &corev1.PodList{}
	if err := n.pods.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{batchv1.JobNameLabel: job}); err != nil {
		return fmt.Errorf("list pods of job %s/%s: %w", ns, job, err)
	}
	for i := range pods.Items {
		n.queue.Add(client.ObjectKeyFromObject(&pods.Items[i]))
	}
	return nil
}

// endOf returns how the pod's Job ends, if the bench said so.
func (n *benchNode) endOf(p *corev1.Pod) (podEnd, bool) {
	job := p.Labels[batchv1.JobNameLabel]
	if job == "" {
		return podEnd{}, false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	e, ok := n.ends[types.NamespacedName{Namespace: p.Namespace, Name: job}]
	return e, ok
}

// work handles one pod from the queue; false once the queue shut down.
func (n *benchNode) work(ctx context.Context) bool {
	key, quit := n.queue.Get()
	if quit {
		return false
	}
	defer n.queue.Done(key)
	if err := n.sync(ctx, key); err != nil {
		if ctx.Err() == nil {
			// Retried with a backoff; said once it failed a few times, so a pod that never
			// starts or ends shows why next to the test that waits for it.
			if n.queue.NumRequeues(key) == nodeRetriesBeforeLog {
				fmt.Fprintf(os.Stderr, "bench node: %v (retrying)\n", err)
			}
			n.queue.AddRateLimited(key)
		}
		return true
	}
	n.queue.Forget(key)
	return true
}

// sync brings one pod bound to the node where a kubelet would: a deleted pod stopped and
// removed, a pending one running, a running one ended once its Job's end is known.
func (n *benchNode) sync(ctx context.Context, key types.NamespacedName) error {
	cached := &corev1.Pod{}
	if err := n.pods.Get(ctx, key, cached); err != nil {
		return client.IgnoreNotFound(err)
	}
	terminal := cached.Status.Phase == corev1.PodSucceeded || cached.Status.Phase == corev1.PodFailed
	if terminal && cached.DeletionTimestamp == nil {
		return nil // ended: nothing more a kubelet does until it is deleted
	}
	p := &corev1.Pod{}
	if err := n.c.Get(ctx, key, p); err != nil {
		return client.IgnoreNotFound(err)
	}
	if p.Spec.NodeName != n.name {
		return nil
	}
	terminal = p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	if p.DeletionTimestamp != nil {
		if !terminal {
			// Stopped by the deletion: the containers exit on SIGTERM.
			terminate(p, corev1.PodFailed, podEnd{exitCode: 128 + 15})
			if err := n.c.Status().Update(ctx, p); err != nil {
				return fmt.Errorf("stop pod %s: %w", key, err)
			}
		}
		del := &client.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &p.UID}}
		if err := n.c.Delete(ctx, p, del); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("remove pod %s: %w", key, err)
		}
		return nil
	}
	if terminal {
		return nil
	}
	if p.Status.Phase != corev1.PodRunning {
		run(p)
		if err := n.c.Status().Update(ctx, p); err != nil {
			return fmt.Errorf("start pod %s: %w", key, err)
		}
	}
	e, ok := n.endOf(p)
	if !ok {
		return nil
	}
	phase := corev1.PodSucceeded
	if e.exitCode != 0 {
		phase = corev1.PodFailed
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := n.c.Get(ctx, key, p); err != nil {
			return client.IgnoreNotFound(err)
		}
		if p.Status.Phase != corev1.PodRunning {
			return nil
		}
		terminate(p, phase, e)
		if err := n.c.Status().Update(ctx, p); err != nil {
			return fmt.Errorf("end pod %s: %w", key, err)
		}
		return nil
	})
}

// setCondition sets the pod condition t to status, keeping its transition time while it holds.
func setCondition(p *corev1.Pod, t corev1.PodConditionType, status corev1.ConditionStatus, reason string, now metav1.Time) {
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == t {
			if c.Status != status {
				c.Status, c.LastTransitionTime = status, now
			}
			c.Reason, c.LastProbeTime = reason, metav1.Time{}
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: status, Reason: reason, LastTransitionTime: now})
}

// isSidecar reports whether an init container keeps running beside the main ones.
func isSidecar(c corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// run writes a started pod's status: its init containers done (its sidecars running), its
// containers running, all ready.
func run(p *corev1.Pod) {
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.HostIP, p.Status.HostIPs = "127.0.0.1", []corev1.HostIP{{IP: "127.0.0.1"}}
	if p.Status.StartTime == nil {
		p.Status.StartTime = &now
	}
	for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		setCondition(p, t, corev1.ConditionTrue, "", now)
	}
	running := func(c corev1.Container) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}
	}
	p.Status.InitContainerStatuses = nil
	for _, c := range p.Spec.InitContainers {
		s := running(c)
		if !isSidecar(c) {
			s.Ready, s.Started = true, ptr.To(false)
			s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}}
		}
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, s)
	}
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, running(c))
	}
}

// terminate writes an ended pod's status: phase, its containers terminated with e's exit code
// and termination message, its sidecars stopped, not ready.
func terminate(p *corev1.Pod, phase corev1.PodPhase, e podEnd) {
	now := metav1.Now()
	started := now
	if p.Status.StartTime != nil {
		started = *p.Status.StartTime
	}
	reason := "Completed"
	if e.exitCode != 0 {
		reason = "Error"
	}
	p.Status.Phase = phase
	for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.ContainersReady, corev1.PodReady} {
		setCondition(p, t, corev1.ConditionFalse, "PodCompleted", now)
	}
	p.Status.InitContainerStatuses = nil
	for _, c := range p.Spec.InitContainers {
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Started: ptr.To(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: started, FinishedAt: now}}})
	}
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Started: ptr.To(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: e.exitCode, Reason: reason, Message: e.message,
				StartedAt: started, FinishedAt: now}}})
	}
}
