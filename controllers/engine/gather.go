package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	if decide.NeedsPendingPods(p.ev) {
		if err := gatherPendingPods(ctx, p.r.APIReader, p.obj.GetNamespace(), p.jobs, &p.ev.Jobs); err != nil {
			return err
		}
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
		st, err := gatherState(ctx, p.r.stateKeeper(), p.subject, &p.ev.State)
		if err != nil {
			return err
		}
		p.state = st
		if st != nil && st.MarkedForDeletion {
			p.out.add(corev1.EventTypeWarning, infrav1.StateSecretMarkedForDeletionReason, markedForDeletionNote(p.subject))
		}
		p.gatherReplica(ctx)
		if decide.RetainedState(p.ev) {
			ours, err := currentRunIsOurs(ctx, p.r.APIReader, p.subject, p.ev.Jobs.RunSeq)
			if err != nil {
				return err
			}
			if ours {
				p.ev.State.Read, p.ev.State.Lineage, p.ev.State.Empty, p.ev.State.Serial = decide.StateNotRead, "", false, 0
				p.state = nil
			}
		}
	}
	return nil
}

// gatherReplica reads what the replica store holds when the decision can use it: a new object's
// state of its name (NeedsReplicaLookup) and the version a restore asks for that no backup has
// (NeedsReplicaVersion). Nothing without a replica store; a store that cannot be read is
// reported in the lookup, and a new object's first apply is told so with a Warning event.
func (p *pass) gatherReplica(ctx context.Context) {
	k := p.r.stateKeeper()
	if k.Replica == nil {
		return
	}
	if decide.NeedsReplicaVersion(p.ev) {
		serial, _ := strconv.ParseInt(p.ev.State.RestoreSerial, 10, 64) // NeedsReplicaVersion parsed it
		lookup := &decide.ReplicaLookup{}
		k.LookupReplicaVersion(ctx, p.subject, decide.RestoreLineage(p.ev), serial, lookup)
		p.ev.State.Replica = lookup
	}
	if !decide.NeedsReplicaLookup(p.ev) {
		return
	}
	requested := p.ev.State.Replica
	p.ev.State.Replica = k.LookupReplica(ctx, p.subject)
	if requested != nil {
		p.ev.State.Replica.Requested = requested.Requested
	}
	if p.ev.State.Replica.Problem == "" {
		p.rep.ReplicaListed = p.ev.State.Replica.Listed
	}
	if why := p.ev.State.Replica.Problem; why != "" {
		if strictReplication(p.obj) {
			// The start holds on it (checkReplica, ReplicaRequired): nothing goes on unchecked.
			log.FromContext(ctx).Info("the replica store could not be read for a state of this object's name", "why", why)
			return
		}
		log.FromContext(ctx).Info("the replica store could not be read for a state of this object's name; the first apply goes on", "why", why)
		p.out.add(corev1.EventTypeWarning, infrav1.ReplicaUncheckedReason, "the replica store could not be read for a state of this "+
			"object's name, so the first apply goes on without knowing whether a rebuilt management cluster is about to create "+
			"infrastructure a second time: "+why)
	}
}

// currentRunIsOurs keeps a state that seems never written by the object (RetainedState) from being
// judged while a Job of this incarnation's current run exists that the cache does not show:
// that Job may have written the state and not be counted yet (its count lost a conflict, or
// another manager started it). The Job is read live, only in that case; when it is the
// object's own, the pass does not judge whose state it is (the state counts as not read), so
// it goes on as before the state was read: the start of that run finds the Job, never takes a
// finished one over, and looks again until the cache shows it and it is counted.
func currentRunIsOurs(ctx context.Context, live client.Reader, s state.Subject, seq int64) (bool, error) {
	job := &batchv1.Job{}
	err := live.Get(ctx, types.NamespacedName{Namespace: s.Object.GetNamespace(), Name: naming.JobName(s.Suffix, seq)}, job)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read the current run's job live: %w", err)
	}
	return jobstatus.SameIncarnation(job, s.Object.GetUID()), nil
}

// markedForDeletionNote tells the person who deleted the state Secret what came of it: the
// protection finalizer keeps it, the object goes on using it, and how to lose it on purpose.
func markedForDeletionNote(s state.Subject) string {
	return fmt.Sprintf("the state Secret %s/%s is marked for deletion; the finalizer %s keeps it and the object goes on "+
		"using it, so nothing is lost. To lose the state on purpose remove that finalizer: the object is then held with "+
		"StateLost until a restore or an abandon (docs/state.md)",
		s.Object.GetNamespace(), naming.StateSecretName(s.Suffix), infrav1.StateProtectionFinalizer)
}

// gatherState reads the state Secret live: absent, present (with its lineage and whether it
// still tracks resources) or unreadable (with why).
func gatherState(ctx context.Context, k *state.Keeper, s state.Subject, ev *decide.StateEvidence) (*state.State, error) {
	st, err := k.Read(ctx, s)
	switch {
	case err == nil:
		ev.Read, ev.Lineage, ev.Empty = decide.StatePresent, st.Lineage, state.StateEmpty(st)
		ev.Serial = int64(st.Serial)
		return st, nil
	case errors.Is(err, state.ErrNoState):
		ev.Read = decide.StateAbsent
		return nil, nil
	}
	se, ok := state.AsStateError(err)
	if !ok {
		return nil, fmt.Errorf("read state: %w", err)
	}
	ev.Read = decide.StateUnreadable
	ev.Problem = &decide.Problem{ConditionType: infrav1.StateReadableCondition, Reason: se.Reason, Message: se.Error()}
	return nil, nil
}

// gatherCache reads what every pass needs, all from the cache.
func (p *pass) gatherCache(ctx context.Context) error {
	obj := p.obj
	ann := obj.GetAnnotations()
	now := p.r.Clock.Now()
	p.ev = decide.ObjectEvidenceOf(obj, now, p.r.DriftInterval, p.r.started(now))
	if decide.NeedsAbandonOrder(p.ev) {
		predates, err := gatherAbandonOrder(ctx, p.r.APIReader, p.obj, p.r.Kind.New())
		if err != nil {
			return err
		}
		p.ev.Object.AbandonPredates = predates
	}
	var err error
	if p.policies, err = gatherPlanPolicies(ctx, p.r.Client, obj.GetNamespace()); err != nil {
		return err
	}
	p.ev.Plan.PolicySelected = len(p.policies.policies) > 0
	secrets, err := p.r.stateKeeper().Secrets(ctx, p.subject)
	if err != nil {
		return err
	}
	p.ev.State.SecretCached, p.ev.State.Backups = secrets.StateCached, secrets.Backups
	decide.IdentityOf(&p.ev, ann, obj.GetUID())

	if p.cluster, err = cachedCluster(ctx, p.r.Client, obj.GetNamespace(), p.owner.Cluster); err != nil {
		return err
	}
	var clusterPaused *bool
	if p.cluster != nil {
		clusterPaused = p.cluster.Spec.Paused
	}
	p.ev.Object.Paused = decide.Paused(ann, clusterPaused)
	if p.jobs, err = cachedJobs(ctx, p.r.Client, p.subject); err != nil {
		return err
	}
	p.judged = nil
	for i := range p.jobs {
		v, ok := viewOf(p.subject, &p.jobs[i])
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

// cachedCluster reads the object's Cluster from the cache: nil when it names none or the
// Cluster does not exist.
func cachedCluster(ctx context.Context, cache client.Reader, namespace, name string) (*clusterv1.Cluster, error) {
	if name == "" {
		return nil, nil
	}
	c := &clusterv1.Cluster{}
	err := cache.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, c)
	switch {
	case err == nil:
		return c, nil
	case apierrors.IsNotFound(err):
		return nil, nil
	}
	return nil, fmt.Errorf("get cluster %s: %w", name, err)
}

// cachedJobs lists the Jobs labelled for the subject from the cache, by name.
func cachedJobs(ctx context.Context, cache client.Reader, s state.Subject) ([]batchv1.Job, error) {
	list := &batchv1.JobList{}
	if err := cache.List(ctx, list, client.InNamespace(s.Object.GetNamespace()), client.MatchingLabels{
		infrav1.ManagedLabel: "true", infrav1.OwnerKindLabel: s.Kind, infrav1.OwnerNameLabel: naming.LabelValue(s.Object.GetName()),
	}); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

// viewOf is what the decision sees of one of the object's cached Jobs; ok is false for a Job
// that is not the object's (a colliding label value).
func viewOf(s state.Subject, j *batchv1.Job) (decide.JobView, bool) {
	if !jobstatus.LabelledForObject(j, s.Kind, s.Object.GetName()) {
		return decide.JobView{}, false
	}
	seq, err := naming.ParseJobSeq(s.Suffix, j.Name)
	if err != nil {
		return decide.JobView{}, false
	}
	v := decide.JobView{Name: j.Name, Seq: seq, Operation: infrav1.Operation(j.Labels[infrav1.OperationLabel]),
		InputsHash: j.Annotations[infrav1.InputsHashAnnotation], Phase: decide.JobRunning, Foreign: !jobstatus.SameIncarnation(j, s.Object.GetUID()),
		RefreshOnly: j.Annotations[infrav1.RefreshOnlyAnnotation] == "true", DestroyPlan: j.Annotations[infrav1.DestroyPlanAnnotation] == "true",
		Target: j.Annotations[infrav1.TargetOperationAnnotation]}
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
	if wait := decide.ClusterWait(p.owner.Cluster, p.cluster != nil); wait != nil {
		p.ev.Inputs.DependencyWait = wait
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
	// An applied hash of the earlier scheme is compared with the variables themselves (below):
	// neither the memo nor the record holds them.
	legacy := inputs.IsLegacyHash(p.ev.Inputs.AppliedHash)
	if hash, ok := p.r.memo.get(key, p.ev.Now); ok && !legacy {
		p.ev.Inputs.DesiredHash = hash
		recordInputs(p.obj, sources, hash)
		return nil
	}
	if rec := p.obj.GetTerraformStatus().Inputs; !legacy && sources != "" && rec != nil && rec.Sources == sources && rec.Hash != "" {
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
	in, problem, err := p.prep.assembleInputs(ctx, contract)
	if err != nil {
		return err
	}
	if problem != nil {
		p.ev.Inputs.Problem = problem
		return nil
	}
	// A ServiceAccount named for the Jobs must have opted in; read with the inputs, so an idle
	// pass (memoised) reads nothing. The start of each Job checks it again.
	if problem, err = p.prep.runnerAccountProblem(ctx); err != nil || problem != nil {
		p.ev.Inputs.Problem = problem
		return err
	}
	p.ev.Inputs.DesiredHash = in.Hash
	p.r.memo.put(key, in.Hash, p.ev.Now.Add(p.r.inputsTTL()))
	recordInputs(p.obj, sources, in.Hash)
	if legacy && p.ev.Inputs.AppliedHash == inputs.LegacyHash(in.Variables) {
		return p.takeOverAppliedHash(ctx, in.Hash)
	}
	return nil
}

// takeOverAppliedHash rewrites an applied hash of the earlier scheme (the variables alone) that
// the current variables give as the current scheme's hash of the current inputs, so an upgrade
// applies no object again whose variables did not change. The earlier scheme did not hash the
// module: a change of spec.module alone made under the earlier manager, never applied, is taken
// for applied here, as that manager took it (docs/state.md says so). A conflict leaves the
// annotation for the next pass, which takes it over again; this pass judges with the hash it
// would have written.
func (p *pass) takeOverAppliedHash(ctx context.Context, hash string) error {
	was := p.ev.Inputs.AppliedHash
	p.ev.Inputs.AppliedHash = hash
	err := p.patchMeta(ctx, func(o Object) { decide.SetAnnotation(o, infrav1.AppliedHashAnnotation, hash) })
	switch {
	case err == nil:
		log.FromContext(ctx).Info("took over the applied hash of the earlier inputs scheme: the variables did not change", "was", was, "now", hash)
		return nil
	case apierrors.IsConflict(err):
		log.FromContext(ctx).V(1).Info("conflict while taking over the applied hash; the next pass takes it over", "was", was)
		return nil
	}
	return fmt.Errorf("take over the applied hash %s: %w", was, err)
}

// recordInputs sets status.inputs to the record of hash and its sources, or removes it when
// the sources cannot be recorded (empty).
func recordInputs(obj Object, sources, hash string) {
	st := obj.GetTerraformStatus()
	if sources == "" {
		st.Inputs = nil
		return
	}
	want := infrav1.InputsRecord{Sources: sources, Hash: hash, Generation: obj.GetGeneration()}
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

// jobNamed returns the cached Job of that name, or nil.
func jobNamed(jobs []batchv1.Job, name string) *batchv1.Job {
	for i := range jobs {
		if jobs[i].Name == name {
			return &jobs[i]
		}
	}
	return nil
}
