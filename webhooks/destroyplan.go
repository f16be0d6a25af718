package webhooks

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// A destroy judged like an apply (docs/deletion.md): a deleting object that asks for its plans
// to be judged destroys only through a saved destroy plan that passed its policies or that an
// approver approved. captf.io/destroy-without-plan is the override groups' break-glass path
// past that plan: it destroys as an object that asks for nothing does, so only they may set it.

// DestroyWithoutPlanSet reports a request that sets captf.io/destroy-without-plan or changes
// its value. It is pure.
func DestroyWithoutPlanSet(oldM, newM *Marks) bool {
	v := newM.Annotations[infrav1.DestroyWithoutPlanAnnotation]
	return v != "" && v != oldM.Annotations[infrav1.DestroyWithoutPlanAnnotation]
}

// JudgeDestroyWithoutPlan is the rule of the break-glass destroy: only a member of the override
// groups may set it, and only to the object's UID (a copied annotation names another object).
// It returns the denial message, or "" when the request may go on. It is pure.
func JudgeDestroyWithoutPlan(member bool, who string, m *Marks, ref ObjectRef) string {
	if !member {
		return fmt.Sprintf("CAPTF guard: this request sets %s on %s, which destroys its infrastructure without the destroy plan "+
			"its policies or approvers judge; only members of the override groups may (%s). To let the destroy go ahead, "+
			"an approver approves the pending destroy plan: kubectl captf approve <kind>/<name> (see docs/deletion.md).",
			infrav1.DestroyWithoutPlanAnnotation, ref, who)
	}
	if m.Annotations[infrav1.DestroyWithoutPlanAnnotation] != string(m.UID) {
		return fmt.Sprintf("CAPTF guard: %s must be set to the object's UID (%s) on %s; this guards against a copied annotation",
			infrav1.DestroyWithoutPlanAnnotation, m.UID, ref)
	}
	return ""
}

// judgeDestroyWithoutPlan applies JudgeDestroyWithoutPlan to one update. It reports a denial,
// or false when the request may go on (the guard then judges the rest as usual).
func (g *Guard) judgeDestroyWithoutPlan(ctx context.Context, req admission.Request, oldM, newM *Marks) (admission.Response, bool) {
	if !DestroyWithoutPlanSet(oldM, newM) {
		return admission.Response{}, false
	}
	ref := ObjectRef{Kind: req.Kind.Kind, Namespace: req.Namespace, Name: req.Name}
	logger := log.FromContext(ctx).WithValues("object", ref.String(), "user", req.UserInfo.Username)
	if msg := JudgeDestroyWithoutPlan(g.Override.Member(req.UserInfo), g.Override.Who(), newM, ref); msg != "" {
		logger.Info("denied a destroy without its plan")
		return admission.Denied(msg), true
	}
	logger.Info("DESTROY WITHOUT PLAN allowed", "groups", req.UserInfo.Groups)
	return admission.Response{}, false
}
