package webhooks

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
)

// Guard is the validating webhook that refuses unbacked removals of block-move, the provider
// finalizer and status.activeJob. It serves all three kinds and their /status subresource: it
// decodes only the marks they share.
type Guard struct {
	// Reader reads Jobs and Pods through the API server: mgr.GetAPIReader(), never a cache.
	Reader client.Reader
	// Leases judges the run lease; it must read through the API server too.
	Leases *runlease.Manager
	// Override decides the break-glass path and records its uses.
	Override *Override
	// Identities recognises the manager, who writes its records (with the override groups).
	Identities Identities
	// Approvals says who may approve a plan and records the approvals; nil: nobody may.
	Approvals *PlanApprovals
}

var _ admission.Handler = &Guard{}

// Handle implements admission.Handler. A CREATE is judged as an update from nothing: the
// records rule (JudgeRecords) on the diff from an empty old object. Nothing else applies to a
// create: it removes nothing, and a guarded request it carries is allowed only to the manager
// and the override groups, whose clusterctl move brings requests judged where they were given.
func (g *Guard) Handle(ctx context.Context, req admission.Request) admission.Response {
	create := req.Operation == admissionv1.Create
	if !create && req.Operation != admissionv1.Update {
		return admission.Allowed("the guard judges creates and updates only")
	}
	switch req.Kind.Kind {
	case infrav1.TerraformClusterKind, infrav1.TerraformMachineKind, infrav1.TerraformMachinePoolKind:
	default:
		return admission.Allowed("not a kind the guard protects")
	}
	oldM := &Marks{}
	if !create {
		var err error
		if oldM, err = DecodeMarks(req.OldObject.Raw); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("old object: %w", err))
		}
	}
	newM, err := DecodeMarks(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("new object: %w", err))
	}
	ref := ObjectRef{Kind: req.Kind.Kind, Namespace: req.Namespace, Name: req.Name}
	if create && ref.Name == "" {
		ref.Name = newM.Name
	}
	rch := DiffRecords(oldM, newM)
	writer := g.writer(req.UserInfo)
	if rv := JudgeRecords(rch, create, writer, g.Override.Who(), ref); !rv.Allowed {
		log.FromContext(ctx).Info("denied a write of the manager's records", "object", ref.String(), "user", req.UserInfo.Username,
			"create", create, "records", rch.Records, "requests", rch.Requests)
		return admission.Denied(rv.Message)
	}
	if create {
		if len(rch.Records)+len(rch.Requests) > 0 {
			log.FromContext(ctx).Info("created with the manager's records", "object", ref.String(), "user", req.UserInfo.Username,
				"groups", req.UserInfo.Groups, "records", rch.Records, "requests", rch.Requests)
		}
		return admission.Allowed("")
	}
	var approved *infrav1.PlanRecord
	if pch := DiffPlan(oldM, newM); pch.Judged() {
		var approvers Approvers
		if g.Approvals != nil {
			approvers = g.Approvals.Approvers
		}
		pending := infrav1.ParsePlanRecord(oldM.Annotations[infrav1.PendingPlanAnnotation])
		pv := JudgePlan(pch, req.UserInfo, approvers, pending, ref)
		if !pv.Allowed {
			log.FromContext(ctx).Info("denied a plan approval", "object", ref.String(),
				"user", req.UserInfo.Username, "approval", pch.Approval)
			return admission.Denied(pv.Message)
		}
		approved = pv.Approved
	}
	resp := g.judgeMarks(ctx, req, oldM, newM)
	if resp.Allowed && approved != nil {
		g.Approvals.Record(ctx, req, eventTarget(req, oldM, newM), approved)
	}
	return resp
}

// writer reports a user who may write what only the manager writes: the manager's own identity
// and the members of the override groups (the records rule, the finalizer rule).
func (g *Guard) writer(user authenticationv1.UserInfo) bool {
	return g.Identities.IsManager(user) || g.Override.Member(user)
}

// eventTarget is the object of a request as an event's regarding object.
func eventTarget(req admission.Request, oldM, newM *Marks) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: req.Kind.Group + "/" + req.Kind.Version, Kind: req.Kind.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name, UID: newM.UID, ResourceVersion: oldM.ResourceVersion},
	}
}

// judgeMarks judges the guarded removals (and the abandon, the adopt opt-in, judgeIdentity,
// and the break-glass destroy, judgeDestroyWithoutPlan) of one update.
func (g *Guard) judgeMarks(ctx context.Context, req admission.Request, oldM, newM *Marks) admission.Response {
	ch := Diff(oldM, newM)
	if ich := DiffIdentity(oldM, newM); ich.AdoptSet {
		if resp, denied := g.judgeIdentity(ctx, req, ich, newM); denied {
			return resp
		}
	}
	if ch.AbandonSet {
		if resp, denied := g.judgeAbandon(ctx, req, oldM, newM); denied {
			return resp
		}
	}
	if resp, denied := g.judgeDestroyWithoutPlan(ctx, req, oldM, newM); denied {
		return resp
	}
	if !ch.Guarded() {
		return admission.Allowed("")
	}
	ref := ObjectRef{Kind: req.Kind.Kind, Namespace: req.Namespace, Name: req.Name}
	logger := log.FromContext(ctx).WithValues("object", ref.String(), "subresource", req.SubResource,
		"user", req.UserInfo.Username, "change", ch.Describe())

	ev, err := g.gather(ctx, runlease.Owner{Namespace: req.Namespace, Kind: req.Kind.Kind, Name: req.Name}, ch)
	if err != nil {
		// Fail closed: without evidence nothing backs the removal.
		logger.Error(err, "guard could not read the evidence; denying")
		return admission.Errored(http.StatusServiceUnavailable,
			fmt.Errorf("CAPTF guard: this request %s on %s, and the guard could not confirm that no Job of the object runs: %w; retry", ch.Describe(), ref, err))
	}
	v := Decide(ch, ev)
	if v.Allowed {
		// Nothing runs; the finalizer of an object that may own infrastructure still goes only
		// by the manager's or an override member's hand (a Job that runs is reported first:
		// its message says what to wait for).
		if msg := JudgeFinalizerRemoval(ch, g.writer(req.UserInfo), oldM, g.Override.Who(), ref); msg != "" {
			logger.Info("denied the removal of the finalizer of an object that may own infrastructure")
			return admission.Denied(msg)
		}
		logger.V(1).Info("guarded removal backed by the evidence", "lease", ev.Lease.LeaseName, "leaseVerdict", ev.Lease.Verdict.Reason)
		return admission.Allowed("")
	}
	msg := v.Message(ref, ch)
	// On the object the reason counts only when this request sets it, so an override is always
	// a deliberate act. A /status request cannot write metadata (the API server keeps the old
	// metadata), so there the reason already on the object counts.
	reason := ""
	if req.SubResource == "status" || oldM.OverrideReason() != newM.OverrideReason() {
		reason = newM.OverrideReason()
	}
	if resp, ok := g.Override.Try(ctx, req, eventTarget(req, oldM, newM), reason, ch.Describe(), v); ok {
		return resp
	}
	if reason == "" && newM.OverrideReason() != "" {
		msg += " (The captf.io/guard-override-reason annotation was already set before this request: an override must set a new reason in the request itself.)"
	} else if reason != "" {
		msg += " (" + g.Override.Refusal(req.UserInfo) + ")"
	}
	logger.Info("denied an unbacked removal", "blockers", v.Blockers)
	return admission.Denied(msg)
}

// judgeAbandon lets only members of the override groups set captf.io/abandon-infrastructure:
// an abandon lets a deleting object go without a destroy, so it is an audited act. The value
// must be the object's UID, and the abandon must apply now (AbandonApplies: the old object is
// being deleted, or holds because of its state); a dormant abandon on a healthy object is
// refused (DormantAbandonRefusal). It reports a denial, or false when the abandon may go ahead
// (the guard then judges the rest of the request as usual).
func (g *Guard) judgeAbandon(ctx context.Context, req admission.Request, oldM, m *Marks) (admission.Response, bool) {
	ref := ObjectRef{Kind: req.Kind.Kind, Namespace: req.Namespace, Name: req.Name}
	logger := log.FromContext(ctx).WithValues("object", ref.String(), "user", req.UserInfo.Username)
	if !g.Override.Member(req.UserInfo) {
		logger.Info("denied an abandon by a user outside the override groups")
		return admission.Denied(fmt.Sprintf("CAPTF guard: this request sets %s on %s, which lets it go without destroying its infrastructure; "+
			"only members of the override groups may abandon infrastructure (%s). Ask one of them, or restore the state instead (see docs/state.md).",
			infrav1.AbandonInfrastructureAnnotation, ref, g.Override.Who())), true
	}
	if m.Abandon() != string(m.UID) {
		return admission.Denied(fmt.Sprintf("CAPTF guard: %s must be set to the object's UID (%s) to abandon %s; this guards against a copied annotation",
			infrav1.AbandonInfrastructureAnnotation, m.UID, ref)), true
	}
	applies, grounds := AbandonApplies(oldM)
	if !applies {
		logger.Info("denied a dormant abandon: the object is neither deleting nor held by its state")
		return admission.Denied(DormantAbandonRefusal(ref)), true
	}
	logger.Info("INFRASTRUCTURE ABANDON allowed", "groups", req.UserInfo.Groups, "grounds", grounds)
	return admission.Response{}, false
}

// gather reads the evidence live: the run lease through runlease, and the Job named by the old
// status.activeJob (reusing the lease's holder Job when it is the same one).
func (g *Guard) gather(ctx context.Context, owner runlease.Owner, ch Change) (Evidence, error) {
	opts := g.Leases.Options()
	le, err := g.Leases.RunEvidence(ctx, owner)
	if err != nil {
		return Evidence{}, err
	}
	ev := Evidence{Lease: le, Now: opts.Clock.Now(), Grace: opts.Grace}
	if ch.OldActiveJob != "" {
		var st JobState
		if le.Job != nil && le.Job.Name == ch.OldActiveJob && (le.PodsListed || !jobstatus.Finished(le.Job)) {
			// The lease's holder is that Job, and what decides about it was just read: reuse it.
			st = jobStateFrom(ch.OldActiveJob, jobstatus.Live{Name: ch.OldActiveJob, Job: le.Job, Pods: le.Pods, PodsListed: le.PodsListed})
		} else {
			var known *batchv1.Job
			if le.Job != nil && le.Job.Name == ch.OldActiveJob {
				known = le.Job
			}
			var err error
			if st, err = JobStateOf(ctx, g.Reader, owner.Namespace, ch.OldActiveJob, known); err != nil {
				return Evidence{}, err
			}
		}
		ev.ActiveJob = &st
	}
	return ev, nil
}

// JobStateOf reads a Job and, when it is gone or finished, its pods, through reader (the API
// server), by jobstatus's rules (a finished Job's pods with jobstatus.ListPodsOf). known, when
// not nil, is the Job as just read live by the caller.
func JobStateOf(ctx context.Context, reader client.Reader, namespace, name string, known *batchv1.Job) (JobState, error) {
	live := jobstatus.Live{Name: name, Job: known}
	if known == nil {
		j, err := jobstatus.GetJob(ctx, reader, namespace, name)
		if err != nil {
			return JobState{Name: name}, err
		}
		live.Job = j
	}
	if live.Job == nil || jobstatus.Finished(live.Job) {
		pods, err := jobstatus.ListPodsOf(ctx, reader, namespace, name, live.Job)
		if err != nil {
			return JobState{Name: name}, err
		}
		live.Pods, live.PodsListed = pods, true
	}
	return jobStateFrom(name, live), nil
}

// jobStateFrom summarises what was read about one Job.
func jobStateFrom(name string, live jobstatus.Live) JobState {
	st := JobState{Name: name, Summary: jobstatus.Summarize(live.Job, live.Pods)}
	if job := live.Job; job != nil {
		st.Operation = job.Labels[infrav1.OperationLabel]
		st.Since = job.CreationTimestamp.Time
		if job.Status.StartTime != nil {
			st.Since = job.Status.StartTime.Time
		}
	}
	return st
}

// Override is the break-glass path: a member of one of Groups may force a removal the guard
// would deny by setting captf.io/guard-override-reason in the same request.
type Override struct {
	// Groups whose members may override; empty disables the path.
	Groups []string
	// Recorder emits the Warning event of each override.
	Recorder events.EventRecorder
}

// Allows reports whether user may override with reason: reason is not empty and user is in
// one of the groups. It is pure.
func (o *Override) Allows(user authenticationv1.UserInfo, reason string) bool {
	return strings.TrimSpace(reason) != "" && o.Member(user)
}

// Member reports whether user is in one of the override groups.
func (o *Override) Member(user authenticationv1.UserInfo) bool {
	if o == nil {
		return false
	}
	for _, g := range user.Groups {
		if g != "" && slices.Contains(o.Groups, g) {
			return true
		}
	}
	return false
}

// Who names the override groups for a denial.
func (o *Override) Who() string {
	if o == nil || len(o.Groups) == 0 {
		return "no override group is configured: manager flag --guard-override-groups"
	}
	return "groups " + strings.Join(o.Groups, ", ")
}

// Refusal explains why an override was not honoured.
func (o *Override) Refusal(user authenticationv1.UserInfo) string {
	if o == nil || len(o.Groups) == 0 {
		return "the override reason was ignored: no override group is configured (manager flag --guard-override-groups)"
	}
	return fmt.Sprintf("the override reason was ignored: user %q is in none of the override groups %s", user.Username, strings.Join(o.Groups, ", "))
}

// Try allows a denied request when the override applies, after logging it and emitting a
// Warning event on target (skipped for dry-run requests, which must have no side effects).
func (o *Override) Try(ctx context.Context, req admission.Request, target runtime.Object, reason, what string, v Verdict) (admission.Response, bool) {
	if !o.Allows(req.UserInfo, reason) {
		return admission.Response{}, false
	}
	note := fmt.Sprintf("guard overridden by %s (groups %s): the request %s although %s; reason: %q",
		req.UserInfo.Username, strings.Join(req.UserInfo.Groups, ", "), what, strings.Join(v.Blockers, "; and "), reason)
	if len(note) > 1024 {
		note = note[:1021] + "..."
	}
	logger := log.FromContext(ctx)
	if req.DryRun != nil && *req.DryRun {
		logger.Info("guard override (dry run: no event)", "user", req.UserInfo.Username, "reason", reason)
		return overridden(admission.Allowed("dry run: guard override").WithWarnings("CAPTF guard overridden (dry run): "+note), note), true
	}
	logger.Info("GUARD OVERRIDE", "user", req.UserInfo.Username, "groups", req.UserInfo.Groups, "reason", reason, "blockers", v.Blockers)
	if o.Recorder != nil {
		o.Recorder.Eventf(target, nil, corev1.EventTypeWarning, "GuardOverridden", "Override", "%s", note)
	}
	return overridden(admission.Allowed("guard overridden").WithWarnings("CAPTF guard overridden: "+note), note), true
}

// overridden marks resp as a verdict the break-glass path overturned: an audit annotation the
// API server records with the request, and what Outcome counts.
func overridden(resp admission.Response, note string) admission.Response {
	resp.AuditAnnotations = map[string]string{OverrideAuditKey: note}
	return resp
}
