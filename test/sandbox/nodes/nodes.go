package nodes

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LeaseNamespace holds every node's heartbeat Lease, as in a cluster.
const LeaseNamespace = "kube-node-lease"

// LeaseDurationSeconds is a kubelet's node Lease duration.
const LeaseDurationSeconds = 40

// ReadyConditions are a healthy kubelet's conditions, each with heartbeat now, its transition
// time kept from old while its status stays, and message on the Ready condition.
func ReadyConditions(old []corev1.NodeCondition, now metav1.Time, message string) []corev1.NodeCondition {
	want := []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "no memory pressure"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "no PID pressure"},
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: message},
	}
	for i := range want {
		want[i].LastHeartbeatTime, want[i].LastTransitionTime = now, now
		for _, o := range old {
			if o.Type == want[i].Type && o.Status == want[i].Status {
				want[i].LastTransitionTime = o.LastTransitionTime
			}
		}
	}
	return want
}

// RenewLease creates or renews the heartbeat Lease of node name, reading through r and writing
// through c.
func RenewLease(ctx context.Context, c client.Client, r client.Reader, name string) error {
	now := metav1.NowMicro()
	l := &coordinationv1.Lease{}
	err := r.Get(ctx, types.NamespacedName{Namespace: LeaseNamespace, Name: name}, l)
	if apierrors.IsNotFound(err) {
		n := &corev1.Node{}
		if err := r.Get(ctx, types.NamespacedName{Name: name}, n); err != nil {
			return fmt.Errorf("get node %s: %w", name, err)
		}
		l = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: LeaseNamespace, Name: name, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID,
			}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](LeaseDurationSeconds), RenewTime: &now},
		}
		if err := c.Create(ctx, l); err != nil {
			return fmt.Errorf("create the lease of node %s: %w", name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get the lease of node %s: %w", name, err)
	}
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = ptr.To(name), ptr.To[int32](LeaseDurationSeconds), &now
	if err := c.Update(ctx, l); err != nil {
		return fmt.Errorf("renew the lease of node %s: %w", name, err)
	}
	return nil
}
