package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
)

// LeaseGuard is the validating webhook on UPDATE and DELETE of CAPTF's run and cluster Leases.
// While a lease is live as the object guard judges it (its holder Job of the lease's object
// runs, a pod of it is not terminated, or the lease is inside its grace and its Job is not on
// the API server yet), nobody but the manager itself and the override groups may change its
// holder, duration, times, labels or annotations, or delete it: without the lease, or with a
// forged one, a second Job could start against the same state. The owner comes from the Lease's
// name and the objects the API server has (runlease.Manager.JudgeLease), never from its labels.
type LeaseGuard struct {
	// Leases judges the lease; it reads through the API server (mgr.GetAPIReader()).
	Leases *runlease.Manager
	// Identities names the manager, whose writes pass before anything is read.
	Identities Identities
	// Override decides the break-glass path.
	Override *Override
}

var _ admission.Handler = &LeaseGuard{}

// Handle implements admission.Handler.
func (g *LeaseGuard) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Update && req.Operation != admissionv1.Delete {
		return admission.Allowed("the lease guard judges updates and deletions only")
	}
	if g.Identities.IsManager(req.UserInfo) {
		return admission.Allowed("the manager's own write")
	}
	old := &coordinationv1.Lease{}
	if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode lease: %w", err))
	}
	if runlease.LeaseKindOf(old.Name) == "" {
		return admission.Allowed("not a CAPTF run or cluster lease")
	}
	what := "deletes"
	reason := old.Annotations[infrav1.GuardOverrideReasonAnnotation]
	if req.Operation == admissionv1.Update {
		lease := &coordinationv1.Lease{}
		if err := json.Unmarshal(req.Object.Raw, lease); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode lease: %w", err))
		}
		changes := LeaseChanges(old, lease)
		if len(changes) == 0 {
			return admission.Allowed("changes nothing the lease guard protects")
		}
		what = "changes the " + joinAnd(changes) + " of"
		// As on the objects, the reason counts only when this request sets or changes it.
		reason = ""
		if r := lease.Annotations[infrav1.GuardOverrideReasonAnnotation]; r != old.Annotations[infrav1.GuardOverrideReasonAnnotation] {
			reason = r
		}
	}
	leaseRef := fmt.Sprintf("%s lease %s/%s", runlease.LeaseKindOf(old.Name), old.Namespace, old.Name)
	logger := log.FromContext(ctx).WithValues("lease", old.Namespace+"/"+old.Name, "user", req.UserInfo.Username, "operation", req.Operation)

	j, _, err := g.Leases.JudgeLease(ctx, old)
	if err != nil {
		logger.Error(err, "lease guard could not read the evidence; denying")
		return admission.Errored(http.StatusServiceUnavailable,
			fmt.Errorf("CAPTF guard: this request %s %s, and the guard could not confirm that its holder has finished: %w; retry", what, leaseRef, err))
	}
	if !j.Blocks() {
		logger.V(1).Info("lease write allowed: the lease is not live", "rule", j.Verdict.Reason)
		return admission.Allowed("")
	}
	holder := ptr.Deref(old.Spec.HolderIdentity, "")
	v := Verdict{Blockers: []string{g.blocker(j, old, holder)}}
	if j.MayStillBeCreated() {
		v.WaitForGrace = true
	} else {
		v.StopJob = holder
	}
	if resp, ok := g.Override.Try(ctx, req, old, reason, what+" "+leaseRef, v); ok {
		return resp
	}
	msg := fmt.Sprintf("CAPTF guard: this request %s %s, but %s. Without the lease, or with a changed one, a second Job could start against the same Terraform state. %s",
		what, leaseRef, v.Blockers[0], g.advice(v, old.Namespace, req.Operation))
	if reason != "" {
		msg += " (" + g.Override.Refusal(req.UserInfo) + ")"
	}
	logger.Info("denied a write of a live lease", "holder", holder, "rule", j.Verdict.Reason)
	return admission.Denied(msg)
}

// blocker says what makes the lease live, naming the Job and the lease's object.
func (g *LeaseGuard) blocker(j runlease.LeaseJudgement, l *coordinationv1.Lease, holder string) string {
	now := g.Leases.Options().Clock.Now()
	of := "of " + j.Owner.Kind + " " + j.Owner.Namespace + "/" + j.Owner.Name
	if !j.OwnerFound {
		of = "(whose object the API server no longer has)"
	}
	op := opSuffix(l.Annotations[infrav1.LeaseOpAnnotation])
	switch j.Verdict.Reason {
	case runlease.LiveHolderRunning:
		b := fmt.Sprintf("its holder Job %s%s %s runs", holder, op, of)
		if j.Job != nil && j.Job.Status.StartTime != nil {
			b += fmt.Sprintf(" (since %s)", since(j.Job.Status.StartTime.Time, now))
		}
		return b
	case runlease.LivePodsRunning:
		return fmt.Sprintf("a pod of its holder Job %s%s %s is not terminated", holder, op, of)
	default: // inside the grace, the Job not created yet
		taken := now.Add(-j.Verdict.Age)
		frees := taken.Add(g.Leases.Options().Grace)
		return fmt.Sprintf("it names Job %s%s %s, taken at %s, and that Job is not on the API server yet: it may still be created until %s",
			holder, op, of, since(taken, now), frees.UTC().Format(time.RFC3339))
	}
}

// advice says what to do about a live lease.
func (g *LeaseGuard) advice(v Verdict, ns string, op admissionv1.Operation) string {
	s := ""
	if v.StopJob != "" {
		s = fmt.Sprintf("CAPTF releases the lease itself once the Job has finished: wait for it (kubectl -n %s get job %s -w), "+
			"or stop it by deleting it (kubectl -n %s delete job %s --cascade=foreground); once its pods are gone the lease is free and may be changed or deleted.",
			ns, v.StopJob, ns, v.StopJob)
	}
	if v.WaitForGrace {
		s = "Wait until that time: if no Job of that name appears, the lease frees and may be changed or deleted."
	}
	how := "setting the annotation captf.io/guard-override-reason in the same request"
	if op == admissionv1.Delete {
		how = "annotating the lease with captf.io/guard-override-reason first, then deleting it"
	}
	return s + " In an incident, a member of an override group may force it by " + how + " (see docs/webhooks.md)."
}

// LeaseChanges names what an update changes among what the lease guard protects: the holder,
// the duration, the acquire and renew times, the labels and the annotations. It is pure.
func LeaseChanges(oldLease, newLease *coordinationv1.Lease) []string {
	var out []string
	if ptr.Deref(oldLease.Spec.HolderIdentity, "") != ptr.Deref(newLease.Spec.HolderIdentity, "") {
		out = append(out, "holder")
	}
	if ptr.Deref(oldLease.Spec.LeaseDurationSeconds, 0) != ptr.Deref(newLease.Spec.LeaseDurationSeconds, 0) {
		out = append(out, "duration")
	}
	if !sameMicroTime(oldLease.Spec.AcquireTime, newLease.Spec.AcquireTime) {
		out = append(out, "acquire time")
	}
	if !sameMicroTime(oldLease.Spec.RenewTime, newLease.Spec.RenewTime) {
		out = append(out, "renew time")
	}
	if !maps.Equal(oldLease.Labels, newLease.Labels) {
		out = append(out, "labels")
	}
	if !maps.Equal(oldLease.Annotations, newLease.Annotations) {
		out = append(out, "annotations")
	}
	return out
}

func sameMicroTime(a, b *metav1.MicroTime) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(b)
}

// joinAnd joins "a", "b" and "c" as "a, b and c".
func joinAnd(parts []string) string {
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
