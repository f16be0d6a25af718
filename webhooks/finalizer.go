package webhooks

import (
	"fmt"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// The finalizer of an object that may own infrastructure. The run-lease evidence (Decide) backs
// a removal only against a Job that may run; it says nothing of what the object leaves behind.
// A tenant that paused its object, deleted it and removed the finalizer while nothing ran let it
// go without a destroy (and without the destroy plan its policies judge): the infrastructure
// and its state were left with nothing managing them, the harm only the override groups may
// cause (abandon-infrastructure, T8) and the one clusterctl's move mark was closed for (T22).

// MayOwnInfrastructure reports an object whose Jobs may have made infrastructure that no
// destroy removed: a Job of it was started (the run sequence record), it applied (the applied
// hash or its state lineage record), or it is provisioned; and no destroy of it succeeded (the
// destroyed record). All of these are the manager's records (or status), which only the manager
// and the override groups may write. It is pure.
func MayOwnInfrastructure(m *Marks) bool {
	a := m.Annotations
	if a[infrav1.DestroyedAnnotation] == "true" {
		return false
	}
	for _, k := range []string{infrav1.RunSeqAnnotation, infrav1.AppliedHashAnnotation, infrav1.StateLineageAnnotation, infrav1.StateFirstRunAnnotation} {
		if _, ok := a[k]; ok {
			return true
		}
	}
	return m.Status.Initialization != nil && m.Status.Initialization.Provisioned != nil && *m.Status.Initialization.Provisioned
}

// JudgeFinalizerRemoval is the rule of the finalizer of an object that may own infrastructure:
// only the manager (once the destroy succeeded, or for Retain, an abandon or a move) and the
// override groups (clusterctl move, a break-glass) may remove it. It returns the denial message,
// or "" when the removal goes on to the run-lease evidence (Decide). It is pure.
func JudgeFinalizerRemoval(ch Change, writer bool, old *Marks, who string, ref ObjectRef) string {
	if !ch.FinalizerRemoved || writer || !MayOwnInfrastructure(old) {
		return ""
	}
	return fmt.Sprintf("CAPTF guard: this request removes the finalizer %s from %s, whose Jobs may have made infrastructure that no destroy removed; "+
		"without the finalizer the object goes without a destroy (and without the destroy plan its policies judge), leaving its infrastructure "+
		"and state with nothing managing them. Only the CAPTF manager removes it, once the destroy succeeded, and members of the override "+
		"groups (%s). To destroy the infrastructure, delete the object and let the destroy run (a paused deletion waits: unpause it); "+
		"to keep it, set spec.deletionPolicy: Retain before deleting (docs/deletion.md).", infrav1.Finalizer, ref, who)
}
