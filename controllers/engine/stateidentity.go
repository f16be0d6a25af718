package engine

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// The state's identity (docs/state.md, "Whose state it is"): the rules (the holds
// RetainedState and LineageChanged, RecordLineage, ExpectedLineage) are pure and live in
// controllers/decide (identity.go, decide.go). This file reads what they judge: the object's
// own lineage and adopt opt-in, and the lineage of the state a Job left.

// gatherIdentity reads the object's own lineage and its adopt opt-in from the cached object:
// the annotation, or for an object that wrote states before the annotation existed, the
// lineage of its newest backup (backups are gathered first).
func (p *pass) gatherIdentity() {
	ann := p.obj.GetAnnotations()
	p.ev.State.OwnLineage = ann[infrav1.StateLineageAnnotation]
	if p.ev.State.OwnLineage == "" && len(p.ev.State.Backups) > 0 {
		p.ev.State.OwnLineage = p.ev.State.Backups[0].Lineage
	}
	p.ev.State.AdoptLineage = ann[infrav1.AdoptStateAnnotation]
	p.ev.State.FirstRun = p.ev.State.OwnLineage == "" && decide.IsFirstRunMark(ann[infrav1.StateFirstRunAnnotation], p.obj.GetUID())
	seen := ann[infrav1.StateLineageSeenAnnotation]
	p.ev.State.LineageSuspect = seen != "" && seen != p.ev.State.OwnLineage
}

// lineageAfter reads the lineage of the state a Job of op left: "" when the Job cannot have
// written a state (it does not mutate), or left none that reads.
func (p *pass) lineageAfter(ctx context.Context, op infrav1.Operation) (string, error) {
	if !op.Mutating() {
		return "", nil
	}
	st, err := state.Read(ctx, p.r.APIReader, p.obj.GetNamespace(), p.suffix)
	switch {
	case err == nil:
		return st.Lineage, nil
	case errors.Is(err, state.ErrNoState):
		return "", nil
	}
	if _, ok := state.AsStateError(err); ok {
		return "", nil // an unreadable state holds the object on the next pass
	}
	return "", fmt.Errorf("read state lineage: %w", err)
}

// holdEvent queues one Warning event when a state identity hold begins (the StateReadable
// condition does not report it yet); a pass that finds the hold already reported sends none.
func (p *pass) holdEvent() {
	w := p.d.Wait
	if w == nil || (w.Reason != infrav1.RetainedStateFoundReason && w.Reason != infrav1.StateLineageChangedReason) {
		return
	}
	if c := meta.FindStatusCondition(p.obj.GetTerraformStatus().Conditions, infrav1.StateReadableCondition); c != nil && c.Reason == w.Reason {
		return
	}
	p.emit(corev1.EventTypeWarning, w.Reason, w.Message)
}
