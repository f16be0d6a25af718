package executor

import (
	"context"
	"fmt"
	"runtime"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/captf/cluster-api-provider-terraform/test/sandbox/nodes"
)

// NodeLeaseNamespace holds every node's heartbeat Lease, as in a cluster.
const NodeLeaseNamespace = nodes.LeaseNamespace

// The node Lease lasts nodes.LeaseDurationSeconds (40 s), as a kubelet's; the node's status
// (its Ready condition's heartbeat) is written at least every minute. The Lease is renewed every
// HeartbeatInterval.
const statusInterval = time.Minute

// nodeCapacity is what the node offers the scheduler: room for every Pod a soak starts at once.
func nodeCapacity() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("64"),
		corev1.ResourceMemory:           resource.MustParse("256Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
		corev1.ResourcePods:             resource.MustParse("1000"),
	}
}

// registerNode creates the Node (or takes over one of its name left by an earlier executor) and
// writes a ready status, as a kubelet registers itself.
func (e *Executor) registerNode(ctx context.Context) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.opts.NodeName, Labels: map[string]string{
		corev1.LabelHostname: e.opts.NodeName, corev1.LabelOSStable: "linux", corev1.LabelArchStable: runtime.GOARCH,
	}}}
	if err := e.client.Create(ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register node %s: %w", e.opts.NodeName, err)
	}
	return e.writeNodeStatus(ctx)
}

// writeNodeStatus writes the node's capacity, addresses and conditions with a fresh heartbeat.
func (e *Executor) writeNodeStatus(ctx context.Context) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Node{}
		if err := e.apiReader.Get(ctx, types.NamespacedName{Name: e.opts.NodeName}, n); err != nil {
			return err
		}
		now := metav1.Now()
		n.Status.Capacity, n.Status.Allocatable = nodeCapacity(), nodeCapacity()
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: e.opts.NodeName}}
		if e.logs != nil {
			// Where the API server finds the node's kubelet endpoint.
			n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(e.logs.port()) //nolint:gosec // a TCP port
		}
		n.Status.NodeInfo = corev1.NodeSystemInfo{OperatingSystem: "linux", Architecture: runtime.GOARCH,
			KubeletVersion: e.kubeletVersion, ContainerRuntimeVersion: "captf-sandbox://local-processes"}
		n.Status.Conditions = nodes.ReadyConditions(n.Status.Conditions, now, "the sandbox node is posting ready status; it runs its pods as local processes")
		return e.client.Status().Update(ctx, n)
	})
	if err != nil {
		return fmt.Errorf("write status of node %s: %w", e.opts.NodeName, err)
	}
	return nil
}

// renewLease creates or renews the node's heartbeat Lease.
func (e *Executor) renewLease(ctx context.Context) error {
	return nodes.RenewLease(ctx, e.client, e.apiReader, e.opts.NodeName)
}

// heartbeat registers the node, then keeps its Lease and status fresh until ctx ends or the
// heartbeat is paused (PauseHeartbeat): the node lifecycle controller then sees a node that
// stopped answering.
func (e *Executor) heartbeat(ctx context.Context) error {
	logger := log.FromContext(ctx).WithValues("node", e.opts.NodeName)
	if err := retry.OnError(retry.DefaultBackoff, func(error) bool { return ctx.Err() == nil }, func() error {
		return e.registerNode(ctx)
	}); err != nil {
		return err
	}
	lastStatus := time.Now()
	for {
		if !e.heartbeatPaused() {
			if err := e.renewLease(ctx); err != nil && ctx.Err() == nil {
				logger.Error(err, "node heartbeat")
			}
			if time.Since(lastStatus) >= statusInterval || e.resumed() {
				if err := e.writeNodeStatus(ctx); err != nil && ctx.Err() == nil {
					logger.Error(err, "node status")
				} else {
					lastStatus = time.Now()
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(e.opts.HeartbeatInterval):
		}
	}
}

// PauseHeartbeat stops (true) or resumes (false) the node's Lease renewals and status writes;
// the node still watches its Pods and writes their status.
func (e *Executor) PauseHeartbeat(paused bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.paused = paused
	if paused {
		e.wasPaused = true
	}
}

// Partition cuts the node off the API server (true), as a node whose network is gone: no
// heartbeat, no Pod status written, no deletion seen, no new Pod started, while the containers
// already running go on. Partition(false) heals it: the node beats again, writes what its Pods
// did meanwhile, and acts on what happened to them (a Pod deleted meanwhile is stopped then).
func (e *Executor) Partition(cut bool) {
	e.mu.Lock()
	e.partitioned = cut
	e.mu.Unlock()
	e.PauseHeartbeat(cut)
}

func (e *Executor) isPartitioned() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.partitioned
}

// waitConnected returns once the node is not partitioned, or ctx ended.
func (e *Executor) waitConnected(ctx context.Context) error {
	for e.isPartitioned() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

func (e *Executor) heartbeatPaused() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.paused
}

// resumed reports, once, that the heartbeat was resumed: the node then writes its status at
// once, as a kubelet that got its network back does.
func (e *Executor) resumed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.wasPaused && !e.paused
	if r {
		e.wasPaused = false
	}
	return r
}

// NodeName is the node this executor plays.
func (e *Executor) NodeName() string { return e.opts.NodeName }
