package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// JobLabels are the labels of a managed Job that the Job guard protects: they tie the Job to
// its object (the lease rules, the cache's label scope and the engine read them).
var JobLabels = []string{
	infrav1.ManagedLabel, infrav1.OwnerKindLabel, infrav1.OwnerNameLabel, infrav1.OperationLabel, infrav1.ClusterNameLabel,
}

// JobGuard is the validating webhook on UPDATE of the Jobs CAPTF runs (labelled
// captf.io/managed=true in the old or the new object). It refuses a request that changes,
// adds or removes one of JobLabels, or changes or removes the Job's controller owner
// reference, unless it comes from the manager itself or, with a reason, from an override
// group; Kubernetes' garbage collector (GarbageCollectorUsers) may drop owner references and
// nothing else. It reads nothing: the rule does not depend on whether the Job runs. Deleting a
// Job is not intercepted: it is the documented way to stop one.
type JobGuard struct {
	// Identities names the manager.
	Identities Identities
	// Override decides the break-glass path.
	Override *Override
}

var _ admission.Handler = &JobGuard{}

// jobMeta is the part of a Job the Job guard looks at.
type jobMeta struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

// JobChange is what one UPDATE does to what the Job guard protects.
type JobChange struct {
	// Labels names the protected labels the request changes, adds or removes, as
	// "key (old -> new)".
	Labels []string
	// OwnerChanged: the controller owner reference changed or went; OwnerRemovedOnly: the
	// request only removes owner references (the garbage collector's orphaning).
	OwnerChanged     bool
	OwnerRemovedOnly bool
}

// Any reports whether the change touches anything the Job guard protects.
func (c JobChange) Any() bool { return len(c.Labels) > 0 || c.OwnerChanged }

// Describe names the change for messages.
func (c JobChange) Describe() string {
	var parts []string
	for _, l := range c.Labels {
		parts = append(parts, "label "+l)
	}
	if c.OwnerChanged {
		parts = append(parts, "the controller owner reference")
	}
	return "changes " + joinAnd(parts)
}

// DiffJob compares the protected parts of an old and a new Job. It is pure.
func DiffJob(oldJob, newJob metav1.Object) JobChange {
	var c JobChange
	ol, nl := oldJob.GetLabels(), newJob.GetLabels()
	for _, k := range JobLabels {
		ov, oldHas := ol[k]
		nv, newHas := nl[k]
		if oldHas != newHas || ov != nv {
			c.Labels = append(c.Labels, fmt.Sprintf("%s (%s -> %s)", k, labelText(ov, oldHas), labelText(nv, newHas)))
		}
	}
	oc, nc := metav1.GetControllerOfNoCopy(oldJob), metav1.GetControllerOfNoCopy(newJob)
	switch {
	case oc == nil && nc == nil:
	case oc == nil || nc == nil:
		c.OwnerChanged = true
	default:
		c.OwnerChanged = oc.UID != nc.UID || oc.Kind != nc.Kind || oc.Name != nc.Name || oc.APIVersion != nc.APIVersion
	}
	if c.OwnerChanged && len(c.Labels) == 0 {
		c.OwnerRemovedOnly = subsetRefs(newJob.GetOwnerReferences(), oldJob.GetOwnerReferences())
	}
	return c
}

func labelText(v string, ok bool) string {
	if !ok {
		return "<none>"
	}
	return fmt.Sprintf("%q", v)
}

// subsetRefs reports whether every reference of sub is in all (by UID).
func subsetRefs(sub, all []metav1.OwnerReference) bool {
	for _, s := range sub {
		found := false
		for _, a := range all {
			found = found || a.UID == s.UID
		}
		if !found {
			return false
		}
	}
	return true
}

// Handle implements admission.Handler.
func (g *JobGuard) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Update {
		return admission.Allowed("the job guard judges updates only")
	}
	if g.Identities.IsManager(req.UserInfo) {
		return admission.Allowed("the manager's own write")
	}
	oldJob, newJob := &jobMeta{}, &jobMeta{}
	if err := json.Unmarshal(req.OldObject.Raw, oldJob); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode old job: %w", err))
	}
	if err := json.Unmarshal(req.Object.Raw, newJob); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode job: %w", err))
	}
	if oldJob.Labels[infrav1.ManagedLabel] != "true" && newJob.Labels[infrav1.ManagedLabel] != "true" {
		return admission.Allowed("not a Job CAPTF runs")
	}
	ch := DiffJob(oldJob, newJob)
	if !ch.Any() {
		return admission.Allowed("")
	}
	logger := log.FromContext(ctx).WithValues("job", req.Namespace+"/"+req.Name, "user", req.UserInfo.Username, "change", ch.Describe())
	if ch.OwnerRemovedOnly && IsGarbageCollector(req.UserInfo) {
		logger.V(1).Info("the garbage collector drops a managed Job's owner reference")
		return admission.Allowed("the garbage collector orphans the Job")
	}
	ref := fmt.Sprintf("Job %s/%s", req.Namespace, req.Name)
	owner := ""
	if k, n := oldJob.Labels[infrav1.OwnerKindLabel], oldJob.Labels[infrav1.OwnerNameLabel]; k != "" && n != "" {
		owner = fmt.Sprintf(", which CAPTF runs for %s %s/%s", k, req.Namespace, n)
	}
	reason := ""
	if r := newJob.Annotations[infrav1.GuardOverrideReasonAnnotation]; r != oldJob.Annotations[infrav1.GuardOverrideReasonAnnotation] {
		reason = r
	}
	target := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name, UID: oldJob.UID, ResourceVersion: oldJob.ResourceVersion},
	}
	v := Verdict{Blockers: []string{"CAPTF's labels and controller owner reference tie the Job to its object"}}
	if resp, ok := g.Override.Try(ctx, req, target, reason, ch.Describe()+" of "+ref, v); ok {
		return resp
	}
	msg := fmt.Sprintf("CAPTF guard: this request %s of %s%s. CAPTF's labels (%s) and the controller owner reference tie a Job to its object: "+
		"the run lease rules, the operation gate and the controller's cache find the object's Jobs by them, so changing them could hide a running Job "+
		"and let a second one start against the same Terraform state. Only the manager changes them. To stop the Job, delete it "+
		"(kubectl -n %s delete job %s --cascade=foreground); deleting is always allowed. In an incident, a member of an override group may force "+
		"the change by setting the annotation captf.io/guard-override-reason in the same request (see docs/webhooks.md).",
		ch.Describe(), ref, owner, joinAnd(JobLabels), req.Namespace, req.Name)
	if reason != "" {
		msg += " (" + g.Override.Refusal(req.UserInfo) + ")"
	}
	logger.Info("denied a change of a managed Job's labels or owner reference")
	return admission.Denied(msg)
}
