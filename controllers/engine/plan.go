package engine

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// Saved plans are bound to their artifacts (docs/plans.md, "Why the plan you approve is the
// plan that applies"): the digests of the plan Secret's artifacts come from the Plan Job's
// runner result, read from the status of a pod the Job controls (the tenant cannot write it),
// never from the Secret (the tenant can). Bookkeeping checks the Secret against them before any
// policy or the destructive-change guard judges the plan and records them in the pending-plan
// annotation (which only the manager may write); the start of the Job that applies the plan
// checks the Secret against the record again. A mismatch holds the plan as corrupt.

// planReader reads the plan a Plan Job left, live, and judges it: the binding of the plan
// Secret to the Job's result (decide.PlanSecretProblem), then the plan policies that select
// the object. It sees the object's subject, its apply policy and its policies, nothing else.
type planReader struct {
	live        client.Reader
	subject     state.Subject
	applyPolicy infrav1.ApplyPolicy
	policies    policyGate
	clock       clock.Clock
}

// read reads the plan a Plan Job's state channel stored in the plan Secret, live, checks every
// artifact against the digests the Job's result reported, and only then judges the plan by the
// plan policies that select the object. A plan whose artifacts do not match, or whose result
// reports no digests, is recorded as corrupt and judged by nothing.
func (pr planReader) read(ctx context.Context, cur decide.JobView, out jobs.Outcome) (*infrav1.PlanRecord, error) {
	s := &corev1.Secret{}
	name := naming.PlanSecretName(pr.subject.Suffix)
	if err := pr.live.Get(ctx, types.NamespacedName{Namespace: pr.subject.Object.GetNamespace(), Name: name}, s); err != nil {
		return nil, fmt.Errorf("read plan secret %s: %w", name, err)
	}
	rec, why := decide.PlanSecretProblem(out.SavedPlan, s.Data, cur)
	if why != "" {
		return pr.corrupt(ctx, cur, out, name, why)
	}
	if rec.Job != cur.Name {
		return nil, fmt.Errorf("plan secret %s holds the plan of Job %s, not of %s", name, rec.Job, cur.Name)
	}
	pl := decide.PlanRecordOf(rec, name, pr.applyPolicy, pr.policies.judgePlan(ctx, pr.subject.Object, s, rec))
	pl.Digests = decide.DigestsOf(*out.SavedPlan.Digests)
	return pl, nil
}

// liveJob reads job through the API server, with its pod template (the manager's cache keeps
// Jobs without it). A Job gone by now is returned as cached, with no template: no pod then runs
// it, so no result of its pods is trusted.
func liveJob(ctx context.Context, reader client.Reader, job *batchv1.Job) (*batchv1.Job, error) {
	live := &batchv1.Job{}
	err := reader.Get(ctx, client.ObjectKeyFromObject(job), live)
	switch {
	case err == nil:
		if live.UID != job.UID {
			return job, nil
		}
		return live, nil
	case apierrors.IsNotFound(err):
		return job, nil
	}
	return nil, fmt.Errorf("read job %s: %w", job.Name, err)
}

// controlledPods are the pods whose controller owner reference names the Job's UID and that run
// exactly the Job's pod template (jobstatus.RunsTemplate): the Job's own runs. A Plan Job's
// result is read only from them, never from a pod that merely carries the Job-name label, nor
// from one that names the Job as its controller but runs something else (anyone who may create
// pods in the namespace can write either).
func controlledPods(job *batchv1.Job, pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for i := range pods {
		if ref := metav1.GetControllerOfNoCopy(&pods[i]); ref != nil && ref.UID == job.UID && jobstatus.RunsTemplate(&pods[i], job) {
			out = append(out, pods[i])
		}
	}
	return out
}

// corrupt is the record of a plan held as corrupt: planned against the state the object has
// now (read live: a plan changes no state).
func (pr planReader) corrupt(ctx context.Context, cur decide.JobView, out jobs.Outcome, secret, why string) (*infrav1.PlanRecord, error) {
	var serial int64
	var lineage string
	st, err := state.Read(ctx, pr.live, pr.subject.Object.GetNamespace(), pr.subject.Suffix)
	switch {
	case err == nil:
		serial, lineage = int64(st.Serial), st.Lineage
	case errors.Is(err, state.ErrNoState):
	default:
		if _, ok := state.AsStateError(err); !ok {
			return nil, fmt.Errorf("read state: %w", err)
		}
	}
	log.FromContext(ctx).Info("the plan Secret does not match the digests the Plan Job reported; holding the plan as corrupt", "job", cur.Name, "why", why)
	return decide.CorruptPlanRecord(out.SavedPlan, out.Summary, cur, secret, serial, lineage, pr.clock.Now(), why), nil
}

// verifySavedPlan checks, before the Job that applies the pending plan starts, that every
// artifact of the plan Secret still matches the digests the record keeps. On a mismatch the
// record is marked corrupt (so no later pass applies it), a Warning event says which artifact,
// and nothing starts. Only a start that applies a saved plan (PlanID) checks.
func (p *pass) verifySavedPlan(ctx context.Context, s *startRun) (ctrl.Result, bool, error) {
	pl := p.ev.Plan.Pending
	if p.d.PlanID == "" {
		return ctrl.Result{}, true, nil
	}
	if pl == nil || pl.ID != p.d.PlanID {
		// Decide applies only the pending plan; anything else is a bug, never an apply.
		return ctrl.Result{}, false, fmt.Errorf("apply plan %s: it is not the pending plan", p.d.PlanID)
	}
	sec := &corev1.Secret{}
	name := naming.PlanSecretName(p.suffix)
	if err := p.r.APIReader.Get(ctx, types.NamespacedName{Namespace: p.obj.GetNamespace(), Name: name}, sec); err != nil {
		return ctrl.Result{}, false, fmt.Errorf("read plan secret %s: %w", name, err)
	}
	why := decide.PendingPlanProblem(pl, sec.Data)
	if why == "" {
		return ctrl.Result{}, true, nil
	}
	corrupt := *pl
	corrupt.Reason, corrupt.Corrupt = infrav1.PlanWaitCorrupt, why
	if err := p.patchMeta(ctx, func(o Object) { decide.SetAnnotation(o, infrav1.PendingPlanAnnotation, corrupt.Annotation()) }); err != nil {
		res, err := p.conflictOr(ctx, err, "hold the corrupt plan")
		return res, false, err
	}
	e := decide.CorruptPlanEvent(&corrupt)
	p.out.add(e.Type, e.Reason, e.Message)
	p.rep.StartProblem = &decide.Problem{ConditionType: decide.FamilyOf(s.op), Reason: infrav1.PlanCorruptReason,
		Message: fmt.Sprintf("plan %s was not applied: %s (docs/runbooks/plan-corrupt.md)", corrupt.ID, why)}
	return ctrl.Result{}, false, nil
}
