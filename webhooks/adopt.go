package webhooks

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// The state's identity (docs/state.md, "Whose state it is"). An object that finds a state it
// never wrote holds (RetainedStateFound) until captf.io/adopt-state names that state's lineage:
// adopting someone else's infrastructure is an audited act, so only members of the override
// groups may set that annotation. The lineage the object wrote (captf.io/object-state-lineage,
// the note captf.io/state-lineage-seen, and the mark of its first run captf.io/state-first-run)
// is the controller's record: changing it would adopt
// another state as silently, so only the manager itself and the override groups may change it.

// IdentityChange is what one UPDATE does to the state identity annotations.
type IdentityChange struct {
	// AdoptSet: the request sets captf.io/adopt-state or changes its value.
	AdoptSet bool
	// RecordChanged: the request sets, changes or removes the controller's lineage record.
	RecordChanged bool
}

// DiffIdentity compares the state identity annotations of the old and the new object. It is
// pure. clusterctl move marks the source copy it is about to delete with a JSON patch that
// replaces all its annotations by delete-for-move alone; the record lives on in the target copy,
// and removing it can only make the object hold (RetainedStateFound), never take a state over.
// So on an object that carries delete-for-move after the request, removing the record is no
// change of it; setting or changing it still is.
func DiffIdentity(oldM, newM *Marks) IdentityChange {
	adopt := newM.Annotations[infrav1.AdoptStateAnnotation]
	ch := IdentityChange{AdoptSet: adopt != "" && adopt != oldM.Annotations[infrav1.AdoptStateAnnotation]}
	_, moving := newM.Annotations[infrav1.DeleteForMoveAnnotation]
	for _, k := range []string{infrav1.StateLineageAnnotation, infrav1.StateLineageSeenAnnotation, infrav1.StateFirstRunAnnotation} {
		was, had := oldM.Annotations[k]
		is, has := newM.Annotations[k]
		if had == has && was == is {
			continue
		}
		if moving && !has {
			continue
		}
		ch.RecordChanged = true
	}
	return ch
}

// judgeIdentity refuses an adopt opt-in from anyone outside the override groups, and a change
// of the lineage record from anyone but the manager and the override groups. It reports a
// denial, or false when the request may go on (the guard then judges the rest as usual).
func (g *Guard) judgeIdentity(ctx context.Context, req admission.Request, ch IdentityChange, m *Marks) (admission.Response, bool) {
	ref := ObjectRef{Kind: req.Kind.Kind, Namespace: req.Namespace, Name: req.Name}
	logger := log.FromContext(ctx).WithValues("object", ref.String(), "user", req.UserInfo.Username)
	member := g.Override.Member(req.UserInfo)
	if ch.AdoptSet {
		if !member {
			logger.Info("denied a state adoption by a user outside the override groups")
			return admission.Denied(fmt.Sprintf("CAPTF guard: this request sets %s on %s, which lets it take over a Terraform state it never wrote "+
				"(and the infrastructure that state tracks); only members of the override groups may adopt a state (%s). "+
				"Ask one of them, or delete this object and remove the retained state first (see docs/state.md).",
				infrav1.AdoptStateAnnotation, ref, g.Override.Who())), true
		}
		logger.Info("STATE ADOPTION allowed", "groups", req.UserInfo.Groups, "lineage", m.Annotations[infrav1.AdoptStateAnnotation])
	}
	if ch.RecordChanged && !member && !g.Identities.IsManager(req.UserInfo) {
		logger.Info("denied a change of the state lineage record by a user other than the manager")
		return admission.Denied(fmt.Sprintf("CAPTF guard: this request changes %s or %s on %s, the controller's record of the state lineage the object wrote; "+
			"changing it (or captf.io/state-first-run) would let the object run against another state. Only the manager and members of the override groups (%s) may change it; "+
			"to bring the object's own state back, restore a backup with %s (see docs/state.md).",
			infrav1.StateLineageAnnotation, infrav1.StateLineageSeenAnnotation, ref, g.Override.Who(), infrav1.RestoreStateAnnotation)), true
	}
	return admission.Response{}, false
}
