package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// patchMeta applies mutate to the object's metadata or spec and writes it with an optimistic
// lock: a pass that read a stale object gets a conflict instead of overwriting a newer one. The
// in-memory status is kept for the pass's single status patch.
func (p *pass) patchMeta(ctx context.Context, mutate func(Object)) error {
	base := p.obj.DeepCopyObject().(Object)
	mutate(p.obj)
	wire := p.obj.DeepCopyObject().(Object)
	if err := p.r.Client.Patch(ctx, wire, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	p.obj.SetResourceVersion(wire.GetResourceVersion())
	return nil
}

// conflictOr turns a conflict into a quiet requeue (a newer object exists; the next pass
// reads it) and wraps anything else.
func (p *pass) conflictOr(ctx context.Context, err error, what string) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		log.FromContext(ctx).V(1).Info("conflict; the next pass reads the newer object", "write", what)
		return ctrl.Result{RequeueAfter: LagRequeue}, nil
	}
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, fmt.Errorf("%s: %w", what, err)
}

// patchStatus writes the status once per pass, when it changed, after summarising Ready.
func (p *pass) patchStatus(ctx context.Context) error {
	p.summarizeReady()
	st := p.obj.GetTerraformStatus()
	st.ObservedGeneration = p.obj.GetGeneration()

	// Diff status only: align the metadata of the base with what this pass already wrote.
	base := p.before.DeepCopyObject().(Object)
	base.SetAnnotations(p.obj.GetAnnotations())
	base.SetFinalizers(p.obj.GetFinalizers())
	base.SetLabels(p.obj.GetLabels())
	// Optimistic lock: a pass that read a stale object must not overwrite the conditions a
	// newer pass wrote (a merge patch replaces the whole list). On conflict the next pass
	// recomputes the status from the newer object.
	base.SetResourceVersion(p.obj.GetResourceVersion())
	patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	data, err := patch.Data(p.obj)
	if err != nil {
		return fmt.Errorf("compute status patch: %w", err)
	}
	if !statusChanged(data) {
		return nil
	}
	wire := p.obj.DeepCopyObject().(Object)
	if err := p.r.Client.Status().Patch(ctx, wire, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		if apierrors.IsConflict(err) {
			log.FromContext(ctx).V(1).Info("status conflict; the next pass recomputes it")
			p.result = ctrl.Result{RequeueAfter: time.Second}
			return nil
		}
		return fmt.Errorf("patch status: %w", err)
	}
	return nil
}

// summarizeReady sets Ready from the other conditions, with Cluster API v1beta2 semantics.
func (p *pass) summarizeReady() {
	st := p.obj.GetTerraformStatus()
	if !p.obj.GetDeletionTimestamp().IsZero() {
		msg := "the object is being deleted"
		if c := meta.FindStatusCondition(st.Conditions, infrav1.DeletingCondition); c != nil && c.Message != "" {
			msg = c.Message
		}
		p.setCondition(infrav1.ReadyCondition, metav1.ConditionFalse, infrav1.DestroyingReason, msg)
		return
	}
	for _, t := range []string{infrav1.DependenciesReadyCondition, infrav1.InputsValidCondition,
		infrav1.ApplyJobSucceededCondition, infrav1.OutputsValidCondition} {
		c := meta.FindStatusCondition(st.Conditions, t)
		if c != nil && c.Status == metav1.ConditionFalse {
			p.setCondition(infrav1.ReadyCondition, metav1.ConditionFalse, c.Reason, c.Message)
			return
		}
	}
	if st.IsProvisioned() {
		p.setCondition(infrav1.ReadyCondition, metav1.ConditionTrue, infrav1.ProvisionedReason, "")
		return
	}
	reason, msg := infrav1.NotProvisionedReason, "the infrastructure is not provisioned yet"
	for _, t := range []string{infrav1.DependenciesReadyCondition, infrav1.ApplyJobSucceededCondition} {
		if c := meta.FindStatusCondition(st.Conditions, t); c != nil && c.Status != metav1.ConditionTrue {
			reason, msg = c.Reason, c.Message
			break
		}
	}
	p.setCondition(infrav1.ReadyCondition, metav1.ConditionFalse, reason, msg)
}

func (p *pass) setPausedCondition() {
	if p.ev.Paused {
		p.setCondition(infrav1.PausedCondition, metav1.ConditionTrue, infrav1.PausedReason,
			"the object or its Cluster is paused: no Job starts, and block-move is cleared once nothing runs")
		return
	}
	p.setCondition(infrav1.PausedCondition, metav1.ConditionFalse, infrav1.NotPausedReason, "")
}

// statusChanged reports whether a merge patch carries more than the resourceVersion the
// optimistic lock adds.
func statusChanged(patch []byte) bool {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(patch, &m); err != nil {
		return true
	}
	delete(m, "metadata")
	return len(m) > 0
}
