package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/cachelag"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/inputs"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// gather reads the evidence in a fixed order: the cache first (the object, its Cluster, its
// Jobs), then live reads only where the pure predicates say their answer can change the
// decision (NeedsPods, NeedsLagCheck, NeedsDecisionInputs).
func (p *pass) gather(ctx context.Context) error {
	if err := p.gatherCache(ctx); err != nil {
		return err
	}
	if decide.NeedsPods(p.ev) {
		pods, err := jobstatus.ListPods(ctx, p.r.APIReader, p.obj.GetNamespace(), p.ev.Jobs.Current.Name)
		if err != nil {
			return err
		}
		p.pods = pods
		p.ev.Jobs.CurrentPods = decide.PodsTerminal
		if len(jobstatus.NonTerminal(pods)) > 0 {
			p.ev.Jobs.CurrentPods = decide.PodsRunning
		}
	}
	if err := p.gatherPendingPods(ctx); err != nil {
		return err
	}
	if decide.NeedsLagCheck(p.ev) {
		verdict, err := cachelag.Check(ctx, cachelag.Input{
			APIReader: p.r.APIReader, Leases: p.r.Leases, Owner: p.owner,
			ActiveJob: p.ev.Object.ActiveJob, Cached: p.judged,
		})
		if err != nil {
			return fmt.Errorf("cache lag check: %w", err)
		}
		p.ev.Lag = decide.LagView{Checked: true, Found: verdict.Lag, Pending: verdict.Pending, Job: verdict.Job, Reason: verdict.Reason}
		if verdict.Pending {
			log.FromContext(ctx).Info("the run lease names a Job that may still be created; nothing it needs is cleared", "job", verdict.Job)
		} else if verdict.Lag {
			log.FromContext(ctx).Info("cache lag: a Job exists on the API server but not in the cache; waiting", "job", verdict.Job, "why", verdict.Reason)
		}
	}
	if decide.NeedsDecisionInputs(p.ev) {
		if err := p.gatherDecisionInputs(ctx); err != nil {
			return err
		}
		p.ev.Inputs.Gathered = true
	}
	if decide.NeedsLiveState(p.ev) {
		if err := p.gatherState(ctx); err != nil {
			return err
		}
		if err := p.gatherOwnRun(ctx); err != nil {
			return err
		}
	}
	return nil
}

// gatherOwnRun keeps a state that seems never written by the object (RetainedState) from being
// judged while a Job of this incarnation's current run exists that the cache does not show:
// that Job may have written the state and not be counted yet (its count lost a conflict, or
// another manager started it). The Job is read live, only in that case; when it is the
// object's own, the pass does not judge whose state it is (the state counts as not read), so
// it goes on as before the state was read: the start of that run finds the Job, never takes a
// finished one over, and looks again until the cache shows it and it is counted.
func (p *pass) gatherOwnRun(ctx context.Context) error {
	if !decide.RetainedState(p.ev) {
		return nil
	}
	job := &batchv1.Job{}
	err := p.r.APIReader.Get(ctx, types.NamespacedName{Namespace: p.obj.GetNamespace(), Name: naming.JobName(p.suffix, p.ev.Jobs.RunSeq)}, job)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("read the current run's job live: %w", err)
	}
	if jobstatus.SameIncarnation(job, p.obj.GetUID()) {
		p.ev.State.Read, p.ev.State.Lineage, p.ev.State.Empty, p.ev.State.Serial = decide.StateNotRead, "", false, 0
		p.state = nil
	}
	return nil
}

// gatherDriftSchedule computes when the next drift check is due, from the spec, the manager's
// default and the durable last-check annotation (no read).
func (p *pass) gatherDriftSchedule() {
	drift := p.obj.GetTerraformSpec().Drift
	p.ev.Drift.Mode = drift.Mode
	p.ev.Drift.Remediate = p.obj.GetAnnotations()[infrav1.RemediateAnnotation]
	p.ev.Drift.RefreshRequest = p.obj.GetAnnotations()[infrav1.RefreshAnnotation]
	p.ev.Drift.CheckRequest = p.obj.GetAnnotations()[infrav1.DriftCheckAnnotation]
	p.ev.Drift.Last = infrav1.ParseDriftRecord(p.obj.GetAnnotations()[infrav1.DriftFindingAnnotation])
	interval := p.r.DriftInterval
	if drift.Interval != nil {
		interval = drift.Interval.Duration
	}
	last, _ := time.Parse(time.RFC3339, p.obj.GetAnnotations()[infrav1.LastDriftCheckAnnotation])
	p.ev.Drift.DueAt = decide.DriftDueAt(last, p.obj.GetCreationTimestamp().Time, p.r.started(p.ev.Now), interval, p.obj.GetUID())
	if hr, ok := p.obj.(infrav1.HealthReporter); ok {
		p.ev.Health.Threshold = hr.HealthThreshold()
		p.ev.Health.Last = infrav1.ParseHealthRecord(p.obj.GetAnnotations()[infrav1.HealthRecordAnnotation])
	}
}

// gatherState reads the state Secret live: absent, present (with its lineage and whether it
// still tracks resources) or unreadable (with why).
func (p *pass) gatherState(ctx context.Context) error {
	st, err := state.Read(ctx, p.r.APIReader, p.obj.GetNamespace(), p.suffix)
	switch {
	case err == nil:
		p.ev.State.Read, p.ev.State.Lineage, p.ev.State.Empty = decide.StatePresent, st.Lineage, state.StateEmpty(st)
		p.ev.State.Serial = int64(st.Serial)
		p.state = st
	case errors.Is(err, state.ErrNoState):
		p.ev.State.Read = decide.StateAbsent
	default:
		se, ok := state.AsStateError(err)
		if !ok {
			return fmt.Errorf("read state: %w", err)
		}
		p.ev.State.Read = decide.StateUnreadable
		p.ev.State.Problem = &decide.Problem{ConditionType: infrav1.StateReadableCondition, Reason: se.Reason, Message: se.Error()}
	}
	return nil
}

// gatherSecrets reads, from the metadata cache of CAPTF's Secrets, whether the state Secret is
// there and which backups this incarnation has (newest first).
func (p *pass) gatherSecrets(ctx context.Context) error {
	if p.r.SecretMeta == nil {
		return nil
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := p.r.SecretMeta.List(ctx, list, client.InNamespace(p.obj.GetNamespace()), client.MatchingLabels{
		infrav1.ManagedLabel: "true", infrav1.OwnerKindLabel: p.r.Kind.Name(), infrav1.OwnerNameLabel: naming.LabelValue(p.obj.GetName()),
	}); err != nil {
		return fmt.Errorf("list secrets' metadata: %w", err)
	}
	stateName := naming.StateSecretName(p.suffix)
	for i := range list.Items {
		s := &list.Items[i]
		switch {
		case s.Name == stateName:
			p.ev.State.SecretCached = true
		case s.Labels[infrav1.SecretRoleLabel] == infrav1.SecretRoleStateBackup && jobstatus.SameIncarnation(s, p.obj.GetUID()):
			if b, ok := backupView(s); ok {
				p.ev.State.Backups = append(p.ev.State.Backups, b)
			}
		}
	}
	sort.Slice(p.ev.State.Backups, func(i, j int) bool { return p.ev.State.Backups[i].Serial > p.ev.State.Backups[j].Serial })
	return nil
}

// backupView reads a backup Secret's annotations.
func backupView(s metav1.Object) (decide.BackupView, bool) {
	a := s.GetAnnotations()
	serial, err := strconv.ParseInt(a[infrav1.BackupSerialAnnotation], 10, 64)
	if err != nil {
		return decide.BackupView{}, false
	}
	b := decide.BackupView{Name: s.GetName(), Serial: serial, Lineage: a[infrav1.BackupLineageAnnotation]}
	b.Bytes, _ = strconv.ParseInt(a[infrav1.BackupBytesAnnotation], 10, 64)
	b.Time, _ = time.Parse(time.RFC3339, a[infrav1.BackupTimeAnnotation])
	return b, true
}

// gatherCache reads what every pass needs, all from the cache.
func (p *pass) gatherCache(ctx context.Context) error {
	obj := p.obj
	ann := obj.GetAnnotations()
	p.ev = decide.Evidence{
		Now:    p.r.Clock.Now(),
		Object: decide.ObjectEvidence{Deleting: !obj.GetDeletionTimestamp().IsZero(), HasFinalizer: controllerutil.ContainsFinalizer(obj, infrav1.Finalizer), MoveDeletion: hasKey(ann, infrav1.DeleteForMoveAnnotation), BlockMove: hasKey(ann, infrav1.BlockMoveAnnotation), Provisioned: obj.GetTerraformStatus().IsProvisioned(), Destroyed: ann[infrav1.DestroyedAnnotation] == "true"},
		Jobs:   decide.JobsEvidence{RunSeq: runSeq(obj)},
		Inputs: decide.InputsEvidence{AppliedHash: ann[infrav1.AppliedHashAnnotation]},
	}
	if st := obj.GetTerraformStatus(); st.ActiveJob != nil {
		p.ev.Object.ActiveJob = st.ActiveJob.Name
	}
	p.ev.Object.DeletionPolicy = obj.GetTerraformSpec().DeletionPolicy
	p.ev.Object.Abandon = obj.GetUID() != "" && ann[infrav1.AbandonInfrastructureAnnotation] == string(obj.GetUID())
	p.ev.Object.DestroyWithoutPlan = obj.GetUID() != "" && ann[infrav1.DestroyWithoutPlanAnnotation] == string(obj.GetUID())
	if p.ev.Object.Deleting && p.ev.Object.Abandon {
		if err := p.gatherAbandonOrder(ctx); err != nil {
			return err
		}
	}
	p.ev.State.RestoreSerial = ann[infrav1.RestoreStateAnnotation]
	p.ev.State.RestoreFailed = ann[infrav1.RestoreFailedAnnotation]
	spec := obj.GetTerraformSpec()
	p.ev.Plan.ApplyPolicy, p.ev.Plan.DestructiveChanges = spec.ApplyPolicy, spec.DestructiveChanges
	p.ev.Plan.Pending = infrav1.ParsePlanRecord(ann[infrav1.PendingPlanAnnotation])
	p.ev.Plan.Approved, p.ev.Plan.Applied = ann[infrav1.ApprovePlanAnnotation], ann[infrav1.AppliedPlanAnnotation]
	if err := p.gatherPlanPolicies(ctx); err != nil {
		return err
	}
	if err := p.gatherSecrets(ctx); err != nil {
		return err
	}
	p.gatherIdentity()
	p.ev.State.AppliedBefore = p.ev.Inputs.AppliedHash != "" || p.ev.Object.Provisioned || len(p.ev.State.Backups) > 0 || p.ev.State.OwnLineage != ""
	p.gatherDriftSchedule()
	if t, err := time.Parse(time.RFC3339, ann[infrav1.RetryAtAnnotation]); err == nil {
		p.ev.Retry.At = t
		p.ev.Retry.LastError = ann[infrav1.LastErrorAnnotation]
	}

	if name := p.owner.Cluster; name != "" {
		c := &clusterv1.Cluster{}
		err := p.r.Client.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}, c)
		switch {
		case err == nil:
			p.cluster = c
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("get cluster %s: %w", name, err)
		}
	}
	p.ev.Object.Paused = hasKey(ann, infrav1.PausedAnnotation) || (p.cluster != nil && p.cluster.Spec.Paused != nil && *p.cluster.Spec.Paused)

	list := &batchv1.JobList{}
	if err := p.r.Client.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{
		infrav1.ManagedLabel: "true", infrav1.OwnerKindLabel: p.r.Kind.Name(), infrav1.OwnerNameLabel: naming.LabelValue(obj.GetName()),
	}); err != nil {
		return fmt.Errorf("list jobs: %w", err)
	}
	p.jobs, p.judged = list.Items, nil
	sort.Slice(p.jobs, func(i, j int) bool { return p.jobs[i].Name < p.jobs[j].Name })
	for i := range p.jobs {
		v, ok := p.viewOf(&p.jobs[i])
		if !ok {
			continue
		}
		p.judged = append(p.judged, p.jobs[i])
		if v.Seq == p.ev.Jobs.RunSeq {
			vc := v
			p.ev.Jobs.Current = &vc
		}
		if v.Phase == decide.JobRunning {
			p.ev.Jobs.Running = append(p.ev.Jobs.Running, v)
		}
	}
	return nil
}

// viewOf is what the decision sees of one of the object's cached Jobs; ok is false for a Job
// that is not the object's (a colliding label value).
func (p *pass) viewOf(j *batchv1.Job) (decide.JobView, bool) {
	if !jobstatus.LabelledForObject(j, p.r.Kind.Name(), p.obj.GetName()) {
		return decide.JobView{}, false
	}
	seq, err := naming.ParseJobSeq(p.suffix, j.Name)
	if err != nil {
		return decide.JobView{}, false
	}
	v := decide.JobView{Name: j.Name, Seq: seq, Operation: infrav1.Operation(j.Labels[infrav1.OperationLabel]),
		InputsHash: j.Annotations[infrav1.InputsHashAnnotation], Phase: decide.JobRunning, Foreign: !jobstatus.SameIncarnation(j, p.obj.GetUID()),
		RefreshOnly: j.Annotations[infrav1.RefreshOnlyAnnotation] == "true", DestroyPlan: j.Annotations[infrav1.DestroyPlanAnnotation] == "true"}
	if jobstatus.Finished(j) {
		v.Phase = decide.JobFinished
	} else {
		v.Unready = j.Status.Ready != nil && *j.Status.Ready == 0
	}
	return v, true
}

// gatherDecisionInputs reads what Decide needs to choose an operation: dependencies and the
// inputs hash for a live object, children and state for a deleting one.
func (p *pass) gatherDecisionInputs(ctx context.Context) error {
	env := Env{Cache: p.r.Client, Live: p.r.APIReader, SecretMeta: p.r.SecretMeta, BootstrapMeta: p.r.bootstrapMeta(), ClusterName: p.owner.Cluster}
	if p.ev.Object.Deleting {
		children, err := p.r.Kind.Children(ctx, env, p.obj)
		if err != nil {
			return fmt.Errorf("list children: %w", err)
		}
		p.ev.Inputs.Children = children
		return nil
	}
	if p.owner.Cluster == "" || p.cluster == nil {
		p.ev.Inputs.DependencyWait = &decide.Wait{ConditionType: infrav1.DependenciesReadyCondition, Reason: infrav1.WaitingForClusterReason,
			Message: "waiting for the owning Cluster: set the cluster.x-k8s.io/cluster-name label to an existing Cluster", RequeueAfter: time.Minute}
		return nil
	}
	fp, err := p.r.Kind.Fingerprint(ctx, env, p.obj)
	if err != nil {
		return fmt.Errorf("fingerprint inputs: %w", err)
	}
	key := memoKey{uid: p.obj.GetUID(), generation: p.obj.GetGeneration(), fingerprint: p.owner.Cluster + "|" + fp.Key}
	// The record in status.inputs stands for the memo across restarts, where the fingerprint
	// covers every source. A record lost to a conflicting status patch is written again from
	// the memo.
	sources := inputsSources(p.obj, p.owner.Cluster, fp)
	if hash, ok := p.r.memo.get(key, p.ev.Now); ok {
		p.ev.Inputs.DesiredHash = hash
		p.recordInputs(sources, hash)
		return nil
	}
	if rec := p.obj.GetTerraformStatus().Inputs; sources != "" && rec != nil && rec.Sources == sources && rec.Hash != "" {
		p.ev.Inputs.DesiredHash = rec.Hash
		p.r.memo.put(key, rec.Hash, p.ev.Now.Add(p.r.inputsTTL()))
		return nil
	}
	contract, wait, err := p.r.Kind.Contract(ctx, env, p.obj)
	if err != nil {
		return fmt.Errorf("gather contract inputs: %w", err)
	}
	if wait != nil {
		p.ev.Inputs.DependencyWait = wait
		return nil
	}
	in, problem, err := p.assembleInputs(ctx, contract)
	if err != nil {
		return err
	}
	if problem != nil {
		p.ev.Inputs.Problem = problem
		return nil
	}
	// A ServiceAccount named for the Jobs must have opted in; read with the inputs, so an idle
	// pass (memoised) reads nothing. The start of each Job checks it again.
	if problem, err = p.runnerAccountProblem(ctx); err != nil || problem != nil {
		p.ev.Inputs.Problem = problem
		return err
	}
	p.ev.Inputs.DesiredHash = in.Hash
	p.r.memo.put(key, in.Hash, p.ev.Now.Add(p.r.inputsTTL()))
	p.recordInputs(sources, in.Hash)
	return nil
}

// recordInputs sets status.inputs to the record of hash and its sources, or removes it when
// the sources cannot be recorded (empty).
func (p *pass) recordInputs(sources, hash string) {
	st := p.obj.GetTerraformStatus()
	if sources == "" {
		st.Inputs = nil
		return
	}
	want := infrav1.InputsRecord{Sources: sources, Hash: hash, Generation: p.obj.GetGeneration()}
	if st.Inputs == nil || *st.Inputs != want {
		st.Inputs = &want
	}
}

// inputsSources digests what an inputs hash is computed from, as the caches see it: the
// object's generation (its spec), its Cluster's name and the fingerprint of its contract
// inputs, with the version of the hash (a manager that hashes differently trusts no record of
// an older one; a new field of the contract inputs changes the fingerprint). It is empty when a source is out of the caches' sight: an incomplete fingerprint,
// or variables read from Secrets and ConfigMaps (spec.variablesFrom), which no cache holds.
func inputsSources(obj Object, cluster string, fp Fingerprint) string {
	if !fp.Complete || len(obj.GetTerraformSpec().VariablesFrom) > 0 {
		return ""
	}
	h := sha256.New()
	fmt.Fprintf(h, "captf-inputs-sources/v1\x00%s\x00%d\x00%s\x00%s", inputs.HashVersion, obj.GetGeneration(), cluster, fp.Key)
	return "v1-" + hex.EncodeToString(h.Sum(nil))
}

func runSeq(obj Object) int64 {
	if v, err := strconv.ParseInt(obj.GetAnnotations()[infrav1.RunSeqAnnotation], 10, 64); err == nil && v > 0 {
		return v
	}
	return 1
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// jobNamed returns the cached Job of that name, or nil.
func (p *pass) jobNamed(name string) *batchv1.Job {
	for i := range p.jobs {
		if p.jobs[i].Name == name {
			return &p.jobs[i]
		}
	}
	return nil
}
