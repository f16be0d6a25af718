package executor

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// logFileName, in a Pod's folder, holds its containers' output.
const logFileName = "containers.log"

// stopPoll is how often a stopping Pod is looked at until its containers ended.
const stopPoll = time.Second

// node plays the kubelet for Pods bound to the executor's node.
type node struct{ e *Executor }

func controllerOptions(skipNameValidation *bool) controller.Options {
	return controller.Options{MaxConcurrentReconciles: 4, SkipNameValidation: skipNameValidation}
}

func (e *Executor) setupNode(mgr manager.Manager) error {
	skip := true
	err := ctrl.NewControllerManagedBy(mgr).
		Named("sandbox-node").
		For(&corev1.Pod{}).
		WithOptions(controllerOptions(&skip)).
		Complete(&node{e: e})
	if err != nil {
		return fmt.Errorf("set up sandbox node: %w", err)
	}
	return nil
}

// Reconcile starts a new Pod's containers, stops them when the Pod is deleted, and removes a
// deleted Pod once its containers stopped (the kubelet's final delete).
func (n *node) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	e := n.e
	if e.isPartitioned() {
		// Cut off: the node learns nothing now; it looks again once healed.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	pod := &corev1.Pod{}
	err := e.client.Get(ctx, req.NamespacedName, pod)
	if apierrors.IsNotFound(err) {
		e.mu.Lock()
		defer e.mu.Unlock()
		if w := e.workers[podKey(req.NamespacedName)]; w != nil {
			if w.finished() {
				delete(e.workers, podKey(req.NamespacedName))
				return ctrl.Result{}, nil
			}
			// Removed without a grace period (a forced delete): stop at once, and look again
			// to forget the worker once it ended.
			w.terminate(0, "pod removed")
			return ctrl.Result{RequeueAfter: stopPoll}, nil
		}
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("get pod: %w", err)
	}
	if pod.Spec.NodeName != e.opts.NodeName {
		return ctrl.Result{}, nil
	}
	e.mu.Lock()
	w := e.workers[podKey(req.NamespacedName)]
	if w != nil && w.uid != pod.UID {
		if w.finished() {
			delete(e.workers, podKey(req.NamespacedName))
			w = nil
		} else {
			e.mu.Unlock()
			return ctrl.Result{RequeueAfter: time.Second}, nil // an older Pod of this name still stops
		}
	}
	if pod.DeletionTimestamp != nil {
		if w != nil && !w.finished() {
			// The worker's last status write may come before it counts as finished, so no
			// event is sure to follow its end: look again until it ended.
			w.terminate(gracePeriod(pod), "pod deleted")
			e.mu.Unlock()
			return ctrl.Result{RequeueAfter: stopPoll}, nil
		}
		e.mu.Unlock()
		return ctrl.Result{}, e.removePod(ctx, pod)
	}
	if terminal(pod) || w != nil {
		e.mu.Unlock()
		return ctrl.Result{}, nil
	}
	if pod.Status.Phase == corev1.PodRunning {
		// Running, but not here: an earlier executor ran it and is gone.
		e.mu.Unlock()
		return ctrl.Result{}, e.updatePodStatus(ctx, pod, func(s *corev1.PodStatus) {
			endStatus(s, pod, -1, "ContainerLost", "the executor that ran this container is gone", nil)
		})
	}
	w = newWorker(e, pod)
	e.workers[podKey(req.NamespacedName)] = w
	e.wg.Add(1)
	e.mu.Unlock()
	log.FromContext(ctx).Info("starting containers", "job", pod.Labels["job-name"])
	go w.run(log.IntoContext(e.workCtx, log.FromContext(ctx)))
	return ctrl.Result{}, nil
}

// removePod is the kubelet's last word on a deleted Pod: terminal status, then a delete with
// no grace period.
func (e *Executor) removePod(ctx context.Context, pod *corev1.Pod) error {
	if !terminal(pod) {
		if err := e.updatePodStatus(ctx, pod, func(s *corev1.PodStatus) {
			endStatus(s, pod, -1, "Deleted", "the pod was deleted before its containers ran", nil)
		}); err != nil {
			return err
		}
	}
	err := e.client.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID})
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove pod %s: %w", pod.Name, err)
	}
	return nil
}

// updatePodStatus applies mutate to a fresh copy of the Pod's status and writes it. A Pod that
// is already terminal is never changed again.
func (e *Executor) updatePodStatus(ctx context.Context, pod *corev1.Pod, mutate func(*corev1.PodStatus)) error {
	if err := e.waitConnected(ctx); err != nil {
		return fmt.Errorf("update status of pod %s: %w", pod.Name, err)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh := &corev1.Pod{}
		if err := e.apiReader.Get(ctx, client.ObjectKeyFromObject(pod), fresh); err != nil {
			return err
		}
		if fresh.UID != pod.UID || terminal(fresh) {
			return nil
		}
		mutate(&fresh.Status)
		return e.client.Status().Update(ctx, fresh)
	})
	if err != nil {
		return client.IgnoreNotFound(fmt.Errorf("update status of pod %s: %w", pod.Name, err))
	}
	return nil
}

func podKey(n types.NamespacedName) string { return n.String() }

// gracePeriod is how long a deleted Pod's containers get after SIGTERM.
func gracePeriod(pod *corev1.Pod) time.Duration {
	if g := pod.DeletionGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return 30 * time.Second
}

// runningStatus is the status of a Pod whose init containers succeeded and whose main
// container runs.
func runningStatus(s *corev1.PodStatus, pod *corev1.Pod, started metav1.Time, inits []corev1.ContainerStatus) {
	s.Phase = corev1.PodRunning
	s.StartTime = &started
	s.HostIP, s.PodIP = "127.0.0.1", "127.0.0.1"
	s.HostIPs, s.PodIPs = []corev1.HostIP{{IP: "127.0.0.1"}}, []corev1.PodIP{{IP: "127.0.0.1"}}
	s.Conditions = podConditions(started, corev1.ConditionTrue, "")
	s.InitContainerStatuses = inits
	s.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		s.ContainerStatuses = append(s.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: ptrTo(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		})
	}
}

// endStatus is the status of a Pod whose main container ended with exit (-1: never ran).
func endStatus(s *corev1.PodStatus, pod *corev1.Pod, exit int32, reason, message string, started *metav1.Time) {
	now := metav1.Now()
	if started == nil {
		started = &now
	}
	s.Phase = corev1.PodFailed
	if exit == 0 {
		s.Phase = corev1.PodSucceeded
	}
	if s.StartTime == nil {
		s.StartTime = started
	}
	s.Conditions = podConditions(*s.StartTime, corev1.ConditionFalse, "PodCompleted")
	code := exit
	if code < 0 {
		code = 128 + 9 // what a runtime reports for a container it could not run or had to kill
	}
	s.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		s.ContainerStatuses = append(s.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Started: ptrTo(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: code, Reason: reason, Message: message, StartedAt: *started, FinishedAt: now,
			}},
		})
	}
}

func podConditions(t metav1.Time, ready corev1.ConditionStatus, reason string) []corev1.PodCondition {
	return []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: t},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: t},
		{Type: corev1.ContainersReady, Status: ready, Reason: reason, LastTransitionTime: t},
		{Type: corev1.PodReady, Status: ready, Reason: reason, LastTransitionTime: t},
	}
}

func ptrTo[T any](v T) *T { return &v }

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// randomString is n characters of the alphabet the API server uses for generated names.
func randomString(n int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
