package engine_test

// Fast tests of the start sequence, bookkeeping and cleanup against controller-runtime's fake
// client, with interceptors that make one write fail at a time. They check what one pass
// writes, and that an event is sent only after the write it reports. What the API server
// itself decides (optimistic concurrency, status subresources, webhooks) is proven by the
// envtest suite of this package.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/engine"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobslots"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/controllers/terraformcluster"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

const fakeNS = "team-a"

// fakeEnv is one TerraformCluster with its Cluster in a fake API.
type fakeEnv struct {
	t        *testing.T
	c        client.WithWatch
	r        *engine.Reconciler
	rec      *events.FakeRecorder
	tc       *infrav1.TerraformCluster
	clk      *clocktesting.FakeClock
	suffix   string
	failOnce map[string]error // "verb/kind" -> error for the next such call
}

func newFakeEnv(t *testing.T, mutate func(*infrav1.TerraformCluster)) *fakeEnv {
	t.Helper()
	s, err := setup.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeEnv{t: t, clk: clocktesting.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)), failOnce: map[string]error{}}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: fakeNS, Name: "c1"}}
	f.tc = objects.Cluster(fakeNS, "c1").UID("uid-c1").Finalizer().Spec(moduleSpec(`{"size":1}`)).
		With(func(tc *infrav1.TerraformCluster) { tc.Generation = 1 }).Obj()
	if mutate != nil {
		mutate(f.tc)
	}
	f.suffix = naming.StateSuffix(fakeNS, infrav1.TerraformClusterKind, "c1")
	fail := func(verb string, obj client.Object) error {
		key := verb + "/" + kindOf(s, obj)
		if err, ok := f.failOnce[key]; ok {
			delete(f.failOnce, key)
			return err
		}
		return nil
	}
	f.c = fake.NewClientBuilder().WithScheme(s).WithObjects(cluster, f.tc).
		WithStatusSubresource(&infrav1.TerraformCluster{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if err := fail("create", obj); err != nil {
					return err
				}
				if obj.GetUID() == "" {
					obj.SetUID(types.UID("uid-" + obj.GetName())) // the API server assigns one
				}
				return c.Create(ctx, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if err := fail("update", obj); err != nil {
					return err
				}
				return c.Update(ctx, obj, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if err := fail("patch", obj); err != nil {
					return err
				}
				return c.Patch(ctx, obj, patch, opts...)
			},
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				if err := fail("delete", obj); err != nil {
					return err
				}
				return c.Delete(ctx, obj, opts...)
			},
		}).Build()
	f.rec = events.NewFakeRecorder(100)
	opts := runlease.DefaultOptions()
	opts.Clock = f.clk
	f.r = &engine.Reconciler{Client: f.c, APIReader: f.c, Kind: terraformcluster.Kind{}, Leases: runlease.New(f.c, f.c, opts),
		Recorder: f.rec, Clock: f.clk, Jobs: jobs.Defaults{RunnerImage: "captf/manager:test", ServiceAccountName: "captf-runner"}}
	return f
}

// kindOf names obj's kind from the scheme ("Job", "Secret", "TerraformCluster", ...).
func kindOf(s *runtime.Scheme, obj client.Object) string {
	gvks, _, err := s.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		return "unknown"
	}
	return gvks[0].Kind
}

// pass runs one Reconcile of the object.
func (f *fakeEnv) pass() (ctrl.Result, error) {
	f.t.Helper()
	return f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: fakeNS, Name: "c1"}})
}

func (f *fakeEnv) object() *infrav1.TerraformCluster {
	f.t.Helper()
	o := &infrav1.TerraformCluster{}
	if err := f.c.Get(context.Background(), types.NamespacedName{Namespace: fakeNS, Name: "c1"}, o); err != nil {
		f.t.Fatal(err)
	}
	return o
}

func (f *fakeEnv) jobs() []batchv1.Job {
	f.t.Helper()
	l := &batchv1.JobList{}
	if err := f.c.List(context.Background(), l, client.InNamespace(fakeNS)); err != nil {
		f.t.Fatal(err)
	}
	return l.Items
}

func (f *fakeEnv) leases() []coordinationv1.Lease {
	f.t.Helper()
	l := &coordinationv1.LeaseList{}
	if err := f.c.List(context.Background(), l, client.InNamespace(fakeNS), client.HasLabels{infrav1.LeaseLabel}); err != nil {
		f.t.Fatal(err)
	}
	return l.Items
}

// events drains the recorded events' reasons.
func (f *fakeEnv) events() []string {
	var out []string
	for {
		select {
		case e := <-f.rec.Events:
			out = append(out, strings.Fields(e)[1])
		default:
			return out
		}
	}
}

// finish plays terraform and the kubelet for the Job: a pod with the runner's result, the
// state, then the Job's terminal conditions.
func (f *fakeEnv) finish(job *batchv1.Job, ok bool, podPhase corev1.PodPhase, st *statetest.State) {
	f.t.Helper()
	f.finishWith(job, ok, podPhase, st, nil)
}

// finishWith is finish with the runner's result changed by edit (when not nil).
func (f *fakeEnv) finishWith(job *batchv1.Job, ok bool, podPhase corev1.PodPhase, st *statetest.State, edit func(*runnerapi.Result)) {
	f.t.Helper()
	ctx := context.Background()
	if st != nil {
		if err := statetest.Write(ctx, f.c, fakeNS, f.suffix, *st); err != nil {
			f.t.Fatal(err)
		}
	}
	outcome := runnerapi.OutcomeSucceeded
	if !ok {
		outcome = runnerapi.OutcomeFailed
	}
	res := runnerapi.Result{Operation: job.Labels[infrav1.OperationLabel], Outcome: outcome, Steps: []runnerapi.Step{}, Error: "boom"}
	if edit != nil {
		edit(&res)
	}
	msg := string(runnerapi.Encode(res))
	pod := objects.PodOf(job, job.Name+"-pod").JobLabel(batchv1.JobNameLabel).Phase(podPhase).With(func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: jobs.MainContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg}}}}
	}).Obj()
	if err := f.c.Create(ctx, pod); err != nil {
		f.t.Fatal(err)
	}
	cond := batchv1.JobComplete
	if !ok {
		cond = batchv1.JobFailed
	}
	job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: cond, Status: corev1.ConditionTrue})
	if err := f.c.Status().Update(ctx, job); err != nil {
		f.t.Fatal(err)
	}
}

func condOf(o *infrav1.TerraformCluster, t string) *metav1.Condition {
	return meta.FindStatusCondition(o.Status.Conditions, t)
}

func TestStartCreatesTheJobUnderTheLeasesAndMarks(t *testing.T) {
	f := newFakeEnv(t, nil)
	if _, err := f.pass(); err != nil {
		t.Fatal(err)
	}
	jl := f.jobs()
	if len(jl) != 1 {
		t.Fatalf("Jobs = %d, want 1", len(jl))
	}
	o := f.object()
	if _, ok := o.Annotations[infrav1.BlockMoveAnnotation]; !ok {
		t.Error("block-move not set before the Job")
	}
	if o.Status.ActiveJob == nil || o.Status.ActiveJob.Name != jl[0].Name {
		t.Errorf("activeJob = %+v, want %s", o.Status.ActiveJob, jl[0].Name)
	}
	if len(f.leases()) != 2 {
		t.Errorf("leases = %d, want the run and cluster lease", len(f.leases()))
	}
	if err := f.c.Get(context.Background(), types.NamespacedName{Namespace: fakeNS, Name: naming.RunSecretName(jl[0].Name)}, &corev1.Secret{}); err != nil {
		t.Errorf("per-run Secret: %v", err)
	}
	if ev := f.events(); len(ev) != 1 || ev[0] != "JobStarted" {
		t.Errorf("events = %v, want [JobStarted]", ev)
	}
}

func TestStartStopsAtAConflictOnBlockMove(t *testing.T) {
	f := newFakeEnv(t, nil)
	f.failOnce["patch/TerraformCluster"] = apierrors.NewConflict(schema.GroupResource{Resource: "terraformclusters"}, "c1", errors.New("newer"))
	res, err := f.pass()
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != decide.LagRequeue {
		t.Errorf("requeue = %s, want %s", res.RequeueAfter, decide.LagRequeue)
	}
	if n := len(f.jobs()); n != 0 {
		t.Errorf("Jobs = %d after a conflict on block-move, want 0", n)
	}
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("events = %v, want none", ev)
	}
}

func TestStartReleasesTheLeasesWhenTheJobIsRejected(t *testing.T) {
	f := newFakeEnv(t, nil)
	f.failOnce["create/Job"] = apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "x", errors.New("quota"))
	res, err := f.pass()
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != decide.BackoffBase {
		t.Errorf("requeue = %s, want %s", res.RequeueAfter, decide.BackoffBase)
	}
	if n := len(f.leases()); n != 0 {
		t.Errorf("leases = %d after a rejected create, want 0", n)
	}
	c := condOf(f.object(), infrav1.ApplyJobSucceededCondition)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != infrav1.JobFailedReason {
		t.Errorf("ApplyJobSucceeded = %+v, want False/JobFailed", c)
	}
	if ev := f.events(); len(ev) != 1 || ev[0] != "JobRejected" {
		t.Errorf("events = %v, want [JobRejected]", ev)
	}
}

// A create that timed out may have gone through: its Job slot stays taken (until the cache
// shows the Job or the reservation expires), or a second Job could take the slot of one that
// runs. A create the API server refused gives its slot back.
func TestStartKeepsTheJobSlotOfACreateWhoseOutcomeIsUnknown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		slotHeld bool
	}{
		{"timeout", apierrors.NewServerTimeout(schema.GroupResource{Group: "batch", Resource: "jobs"}, "create", 1), true},
		{"refused", apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "x", errors.New("quota")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEnv(t, nil)
			f.r.Slots = &jobslots.Slots{Max: 1, Cache: f.c}
			f.failOnce["create/Job"] = tc.err
			_, _ = f.pass() // a timeout is returned as an error, a refusal is not
			if n := len(f.jobs()); n != 0 {
				t.Fatalf("Jobs = %d, want 0", n)
			}
			free, err := f.r.Slots.Reserve(context.Background(), types.NamespacedName{Namespace: "other", Name: "job"}, infrav1.OperationApply, f.clk.Now())
			if err != nil {
				t.Fatal(err)
			}
			if free == tc.slotHeld {
				t.Errorf("after a %s create another object got a slot: %v, want %v", tc.name, free, !tc.slotHeld)
			}
		})
	}
}

func TestStartAdoptsAJobThatAlreadyExists(t *testing.T) {
	f := newFakeEnv(t, nil)
	name := naming.JobName(f.suffix, 1)
	// The Job an earlier attempt created: the create meets AlreadyExists. It is not in the
	// cache the pass read (its lag hid it), so only the create finds it.
	job := objects.Job(fakeNS, name).Owner(f.tc).Obj()
	if err := f.c.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pass(); err != nil {
		t.Fatal(err)
	}
	if o := f.object(); o.Status.ActiveJob == nil || o.Status.ActiveJob.Name != name {
		t.Errorf("activeJob = %+v, want the adopted %s", o.Status.ActiveJob, name)
	}
	if n := len(f.jobs()); n != 1 {
		t.Errorf("Jobs = %d, want the adopted one", n)
	}
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("events = %v, want none (nothing was started)", ev)
	}
}

func TestStartNeverAdoptsAnotherIncarnationsJob(t *testing.T) {
	f := newFakeEnv(t, nil)
	name := naming.JobName(f.suffix, 1)
	// A Job of an earlier object of the same name, still held by a finalizer.
	old := objects.Job(fakeNS, name).Owner(objects.Cluster(fakeNS, "c1").UID("uid-of-the-deleted-c1").Obj()).Obj()
	if err := f.c.Create(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pass(); err != nil {
		t.Fatal(err)
	}
	o := f.object()
	if o.Status.ActiveJob != nil {
		t.Errorf("activeJob = %+v: another incarnation's Job was adopted", o.Status.ActiveJob)
	}
	if o.Annotations[infrav1.RunSeqAnnotation] != "2" {
		t.Errorf("run-seq = %q, want 2 (moved past the taken name)", o.Annotations[infrav1.RunSeqAnnotation])
	}
	if n := len(f.leases()); n != 0 {
		t.Errorf("leases = %d, want the ones this attempt took given back", n)
	}
	if _, err := f.pass(); err != nil {
		t.Fatal(err)
	}
	if o := f.object(); o.Status.ActiveJob == nil || o.Status.ActiveJob.Name != naming.JobName(f.suffix, 2) {
		t.Errorf("activeJob = %+v, want its own Job %s", o.Status.ActiveJob, naming.JobName(f.suffix, 2))
	}
}

// started runs the first pass and returns the Job it created.
func (f *fakeEnv) started() *batchv1.Job {
	f.t.Helper()
	if _, err := f.pass(); err != nil {
		f.t.Fatal(err)
	}
	jl := f.jobs()
	if len(jl) != 1 {
		f.t.Fatalf("Jobs = %d, want 1", len(jl))
	}
	f.events()
	return &jl[0]
}

func TestBookkeepingWaitsForPodsStillRunning(t *testing.T) {
	f := newFakeEnv(t, nil)
	job := f.started()
	st := statetest.Cluster("10.0.0.1", 6443)
	f.finish(job, true, corev1.PodRunning, &st)
	res, err := f.pass()
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != decide.PodsRequeue {
		t.Errorf("requeue = %s, want %s", res.RequeueAfter, decide.PodsRequeue)
	}
	o := f.object()
	if o.Annotations[infrav1.RunSeqAnnotation] != "1" || o.Status.ActiveJob == nil {
		t.Errorf("the Job was counted while its pod runs: run-seq %q, activeJob %+v", o.Annotations[infrav1.RunSeqAnnotation], o.Status.ActiveJob)
	}
	if _, ok := o.Annotations[infrav1.BlockMoveAnnotation]; !ok {
		t.Error("block-move dropped while a pod runs")
	}
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("events = %v, want none", ev)
	}
}

// Pruning the history deletes a finished Job only when its pods, listed live, have all ended:
// a Job can carry Complete while one of its pods still runs (a kubelet that has not reported).
// The control case shows the same Job is pruned once its pods have ended.
func TestPruneLeavesAFinishedJobWhosePodStillRuns(t *testing.T) {
	for _, tc := range []struct {
		name   string
		phase  corev1.PodPhase
		pruned bool
	}{
		{"its pods ended", corev1.PodSucceeded, true},
		{"a pod still runs", corev1.PodRunning, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFakeEnv(t, nil)
			st := statetest.Cluster("10.0.0.1", 6443)
			first := f.started()
			f.finish(first, true, corev1.PodSucceeded, &st)
			if _, err := f.pass(); err != nil {
				t.Fatal(err)
			}
			if o := f.object(); o.Annotations[infrav1.RunSeqAnnotation] != "2" {
				t.Fatalf("the first Job was not counted: run-seq %q", o.Annotations[infrav1.RunSeqAnnotation])
			}
			late := objects.PodOf(first, first.Name+"-late").JobLabel(batchv1.JobNameLabel).Phase(tc.phase).Obj()
			if err := f.c.Create(ctx, late); err != nil {
				t.Fatal(err)
			}

			o := f.object()
			o.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"size":2}`)}
			o.Generation++ // the API server's part
			if err := f.c.Update(ctx, o); err != nil {
				t.Fatal(err)
			}
			if _, err := f.pass(); err != nil {
				t.Fatal(err)
			}
			var second *batchv1.Job
			for _, j := range f.jobs() {
				if j.Name != first.Name {
					second = &j
				}
			}
			if second == nil {
				t.Fatalf("no second Job after an input change: %d Jobs; conditions %+v", len(f.jobs()), f.object().Status.Conditions)
			}
			st.Serial++
			f.finish(second, true, corev1.PodSucceeded, &st)
			for i := 0; i < 2; i++ {
				if _, err := f.pass(); err != nil {
					t.Fatal(err)
				}
			}
			if o := f.object(); o.Annotations[infrav1.RunSeqAnnotation] != "3" {
				t.Fatalf("the second Job was not counted: run-seq %q", o.Annotations[infrav1.RunSeqAnnotation])
			}
			err := f.c.Get(ctx, client.ObjectKeyFromObject(first), &batchv1.Job{})
			if gone := apierrors.IsNotFound(err); gone != tc.pruned {
				t.Errorf("first Job pruned = %v (%v) when %s, want %v", gone, err, tc.name, tc.pruned)
			}
		})
	}
}

func TestBookkeepingCountsASuccessOnceAndReportsItAfterTheWrite(t *testing.T) {
	f := newFakeEnv(t, nil)
	job := f.started()
	st := statetest.Cluster("10.0.0.1", 6443)
	f.finish(job, true, corev1.PodSucceeded, &st)

	By := func(s string) { t.Log(s) }
	By("a conflict on the counting patch: nothing is counted, no event")
	f.failOnce["patch/TerraformCluster"] = apierrors.NewConflict(schema.GroupResource{Resource: "terraformclusters"}, "c1", errors.New("newer"))
	if _, err := f.pass(); err != nil {
		t.Fatal(err)
	}
	if o := f.object(); o.Annotations[infrav1.RunSeqAnnotation] != "1" {
		t.Fatalf("run-seq = %q after a conflict, want 1", o.Annotations[infrav1.RunSeqAnnotation])
	}
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("events = %v after a conflict, want none", ev)
	}

	By("the next pass counts it")
	if _, err := f.pass(); err != nil {
		t.Fatal(err)
	}
	o := f.object()
	if o.Annotations[infrav1.RunSeqAnnotation] != "2" || o.Annotations[infrav1.AppliedHashAnnotation] == "" {
		t.Fatalf("not counted: annotations %v", o.Annotations)
	}
	if o.Status.ActiveJob != nil || o.Status.LastRun == nil || o.Status.LastRun.Outcome != infrav1.RunSucceeded || !o.Status.IsProvisioned() {
		t.Errorf("status after counting: %+v", o.Status)
	}
	if o.Spec.ControlPlaneEndpoint.Host != "10.0.0.1" {
		t.Errorf("endpoint = %+v", o.Spec.ControlPlaneEndpoint)
	}
	if err := f.c.Get(context.Background(), types.NamespacedName{Namespace: fakeNS, Name: naming.OutputsSecretName(f.suffix)}, &corev1.Secret{}); err != nil {
		t.Errorf("outputs Secret: %v", err)
	}
	if ev := f.events(); len(ev) != 1 || ev[0] != "JobSucceeded" {
		t.Errorf("events = %v, want [JobSucceeded]", ev)
	}
	if n := len(f.leases()); n != 0 {
		t.Errorf("leases = %d after counting, want 0", n)
	}

	By("a later pass counts nothing again")
	if _, err := f.pass(); err != nil {
		t.Fatal(err)
	}
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("events = %v on the next pass, want none", ev)
	}
}

func TestBookkeepingRetriesWhenTheOutputsSecretCannotBeWritten(t *testing.T) {
	f := newFakeEnv(t, nil)
	job := f.started()
	st := statetest.Cluster("10.0.0.1", 6443)
	f.finish(job, true, corev1.PodSucceeded, &st)
	f.failOnce["create/Secret"] = apierrors.NewInternalError(errors.New("etcd unavailable"))
	if _, err := f.pass(); err == nil {
		t.Fatal("the pass hid the outputs Secret error")
	}
	if o := f.object(); o.Annotations[infrav1.RunSeqAnnotation] != "1" {
		t.Fatalf("counted although the outputs Secret was not written: run-seq %q", o.Annotations[infrav1.RunSeqAnnotation])
	}
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("events = %v, want none", ev)
	}
	if _, err := f.pass(); err != nil {
		t.Fatal(err)
	}
	if o := f.object(); o.Annotations[infrav1.RunSeqAnnotation] != "2" {
		t.Fatalf("not counted on the retry: run-seq %q", o.Annotations[infrav1.RunSeqAnnotation])
	}
	if err := f.c.Get(context.Background(), types.NamespacedName{Namespace: fakeNS, Name: naming.OutputsSecretName(f.suffix)}, &corev1.Secret{}); err != nil {
		t.Errorf("outputs Secret after the retry: %v", err)
	}
}

func TestBookkeepingAFailureBacksOff(t *testing.T) {
	f := newFakeEnv(t, nil)
	job := f.started()
	f.finish(job, false, corev1.PodFailed, nil)
	if _, err := f.pass(); err != nil {
		t.Fatal(err)
	}
	o := f.object()
	if o.Annotations[infrav1.FailuresAnnotation] != "1" || o.Annotations[infrav1.RetryAtAnnotation] == "" {
		t.Fatalf("failure not counted: %v", o.Annotations)
	}
	if ev := f.events(); len(ev) != 1 || ev[0] != "JobFailed" {
		t.Errorf("events = %v, want [JobFailed]", ev)
	}
	res, err := f.pass()
	if err != nil {
		t.Fatal(err)
	}
	if len(f.jobs()) != 1 || res.RequeueAfter <= 0 || res.RequeueAfter > decide.BackoffBase {
		t.Errorf("inside the backoff: %d Jobs, requeue %s", len(f.jobs()), res.RequeueAfter)
	}
}

func TestCleanupAfterADestroyDeletesStateThenLetsGo(t *testing.T) {
	f := newFakeEnv(t, func(tc *infrav1.TerraformCluster) {
		tc.Annotations = map[string]string{infrav1.DestroyedAnnotation: "true", infrav1.BlockMoveAnnotation: ""}
		tc.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC)}
	})
	if err := statetest.Write(context.Background(), f.c, fakeNS, f.suffix, statetest.Destroyed()); err != nil {
		t.Fatal(err)
	}
	// A conflict on the finalizer patch: the state may already be gone, the object stays.
	f.failOnce["patch/TerraformCluster"] = apierrors.NewConflict(schema.GroupResource{Resource: "terraformclusters"}, "c1", errors.New("newer"))
	if _, err := f.pass(); err != nil {
		t.Fatal(err)
	}
	if o := f.object(); len(o.Finalizers) != 1 {
		t.Fatalf("finalizers = %v after a conflict", o.Finalizers)
	}
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("events = %v after a conflict, want none", ev)
	}
	if _, err := f.pass(); err != nil {
		t.Fatal(err)
	}
	err := f.c.Get(context.Background(), types.NamespacedName{Namespace: fakeNS, Name: "c1"}, &infrav1.TerraformCluster{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("object still there after cleanup: %v", err)
	}
	if err := f.c.Get(context.Background(), types.NamespacedName{Namespace: fakeNS, Name: naming.StateSecretName(f.suffix)}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("state Secret: %v, want deleted", err)
	}
	if ev := f.events(); len(ev) != 1 || ev[0] != "FinalizerRemoved" {
		t.Errorf("events = %v, want [FinalizerRemoved]", ev)
	}
}

func TestCleanupWaitsForALiveLease(t *testing.T) {
	// The run lease inside its grace stops the pass before the cleanup (cachelag's pending Job,
	// decide.holdForPendingJob); the cluster lease, which the cache-lag checks do not read, is
	// held back by the cleanup's own check of every lease the object owns.
	for _, kind := range []string{infrav1.LeaseKindRun, infrav1.LeaseKindCluster} {
		t.Run(kind, func(t *testing.T) {
			f := newFakeEnv(t, func(tc *infrav1.TerraformCluster) {
				tc.Annotations = map[string]string{infrav1.DestroyedAnnotation: "true"}
				tc.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC)}
			})
			holder := naming.JobName(f.suffix, 7)
			now := metav1.NewMicroTime(f.clk.Now())
			name := naming.RunLeaseName(f.suffix)
			if kind == infrav1.LeaseKindCluster {
				name = naming.ClusterLeaseName(fakeNS, "c1")
			}
			lease := objects.Lease(fakeNS, name).Labels(naming.OwnerLabels(infrav1.TerraformClusterKind, "c1", "c1", "")).
				Label(infrav1.LeaseLabel, kind).Label(infrav1.ManagedLabel, "true").Holder(holder).RenewTime(now).
				With(func(l *coordinationv1.Lease) { l.Spec.AcquireTime = &now }).Obj()
			if err := f.c.Create(context.Background(), lease); err != nil {
				t.Fatal(err)
			}
			if err := statetest.Write(context.Background(), f.c, fakeNS, f.suffix, statetest.Destroyed()); err != nil {
				t.Fatal(err)
			}
			res, err := f.pass()
			if err != nil {
				t.Fatal(err)
			}
			if res.RequeueAfter != decide.LagRequeue {
				t.Errorf("requeue = %s, want %s", res.RequeueAfter, decide.LagRequeue)
			}
			if err := f.c.Get(context.Background(), types.NamespacedName{Namespace: fakeNS, Name: naming.StateSecretName(f.suffix)}, &corev1.Secret{}); err != nil {
				t.Errorf("state Secret deleted while a lease inside its grace is live: %v", err)
			}
			if o := f.object(); len(o.Finalizers) != 1 {
				t.Errorf("finalizer dropped while a lease is live")
			}
		})
	}
}

// An idle object whose drift checks are on is woken when its next check is due: the idle pass
// returns that wait (the replica's catch-up, which shares the idle path, must not drop it).
func TestAnIdlePassWakesWhenTheNextDriftCheckIsDue(t *testing.T) {
	f := newFakeEnv(t, func(tc *infrav1.TerraformCluster) {
		tc.Spec.Drift = infrav1.DriftPolicy{Interval: &metav1.Duration{Duration: 10 * time.Minute}, Mode: infrav1.DriftModeReport}
	})
	st := statetest.Cluster("10.0.0.1", 6443)
	f.finish(f.started(), true, corev1.PodSucceeded, &st)
	var res ctrl.Result
	for i := 0; i < 3; i++ { // count the Job, then idle
		var err error
		if res, err = f.pass(); err != nil {
			t.Fatal(err)
		}
	}
	if o := f.object(); o.Annotations[infrav1.RunSeqAnnotation] != "2" || !o.Status.IsProvisioned() {
		t.Fatalf("the apply was not counted: run-seq %q, conditions %+v", o.Annotations[infrav1.RunSeqAnnotation], o.Status.Conditions)
	}
	// Due one interval after the object's creation (no check yet), plus its jitter, and spread
	// when overdue at a manager's start: within a few intervals, never "not at all".
	if res.RequeueAfter <= 0 || res.RequeueAfter > 3*10*time.Minute {
		t.Fatalf("an idle pass with a drift check due requeues after %s, want a wake-up within (0, 30m]", res.RequeueAfter)
	}
}
