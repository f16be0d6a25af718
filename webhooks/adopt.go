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
// is the controller's record, judged with the manager's other records (records.go).

// IdentityChange is what one UPDATE does to the adopt opt-in.
type IdentityChange struct {
	// AdoptSet: the request sets captf.io/adopt-state or changes its value.
	AdoptSet bool
}

// DiffIdentity compares the adopt opt-in of the old and the new object. It is pure.
func DiffIdentity(oldM, newM *Marks) IdentityChange {
	adopt := newM.Annotations[infrav1.AdoptStateAnnotation]
	return IdentityChange{AdoptSet: adopt != "" && adopt != oldM.Annotations[infrav1.AdoptStateAnnotation]}
}

// judgeIdentity refuses an adopt opt-in from anyone outside the override groups. It reports a
// denial, or false when the request may go on (the guard then judges the rest as usual).
func (g *Guard) judgeIdentity(ctx context.Context, req admission.Request, ch IdentityChange, m *Marks) (admission.Response, bool) {
	ref := ObjectRef{Kind: req.Kind.Kind, Namespace: req.Namespace, Name: req.Name}
	logger := log.FromContext(ctx).WithValues("object", ref.String(), "user", req.UserInfo.Username)
	if !ch.AdoptSet {
		return admission.Response{}, false
	}
	if !g.Override.Member(req.UserInfo) {
		logger.Info("denied a state adoption by a user outside the override groups")
		return admission.Denied(fmt.Sprintf("CAPTF guard: this request sets %s on %s, which lets it take over a Terraform state it never wrote "+
			"(and the infrastructure that state tracks); only members of the override groups may adopt a state (%s). "+
			"Ask one of them, or delete this object and remove the retained state first (see docs/state.md).",
			infrav1.AdoptStateAnnotation, ref, g.Override.Who())), true
	}
	logger.Info("STATE ADOPTION allowed", "groups", req.UserInfo.Groups, "lineage", m.Annotations[infrav1.AdoptStateAnnotation])
	return admission.Response{}, false
}
