package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
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
// reads it), a vanished object into nothing to do, and wraps anything else.
func (p *pass) conflictOr(ctx context.Context, err error, what string) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		log.FromContext(ctx).V(1).Info("conflict; the next pass reads the newer object", "write", what)
		p.out.drop() // nothing this pass queued was written
		return ctrl.Result{RequeueAfter: decide.LagRequeue}, nil
	}
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, fmt.Errorf("%s: %w", what, err)
}

// StatusConflictRequeue is how soon a pass whose status patch met a newer object looks again.
const StatusConflictRequeue = time.Second

// patchStatus writes the status once per pass, when it changed, then sends the events still
// queued (they report what this status says). observedGeneration moves only when the pass
// succeeded.
func (p *pass) patchStatus(ctx context.Context, succeeded bool) (ctrl.Result, error) {
	st := p.obj.GetTerraformStatus()
	if succeeded {
		st.ObservedGeneration = p.obj.GetGeneration()
	}

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
		return ctrl.Result{}, fmt.Errorf("compute status patch: %w", err)
	}
	if statusChanged(data) {
		wire := p.obj.DeepCopyObject().(Object)
		if err := p.r.Client.Status().Patch(ctx, wire, patch); err != nil {
			switch {
			case apierrors.IsNotFound(err):
				return ctrl.Result{}, nil
			case apierrors.IsConflict(err):
				log.FromContext(ctx).V(1).Info("status conflict; the next pass recomputes it")
				p.out.drop()
				return ctrl.Result{RequeueAfter: StatusConflictRequeue}, nil
			}
			return ctrl.Result{}, fmt.Errorf("patch status: %w", err)
		}
	}
	p.out.flush()
	return ctrl.Result{}, nil
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
