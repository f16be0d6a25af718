package runlease_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// TestAssess is the freeness table: every rule, on both sides of its boundary, with a fake
// clock. A lease taken at t0; the clock is moved to t0+age.
func TestAssess(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	owner := runlease.Owner{Namespace: "ns", Kind: infrav1.TerraformMachineKind, Name: "m1", Cluster: "c1"}
	holder := naming.JobName(owner.Suffix(), 7)
	opts := runlease.DefaultOptions()
	backstop := opts.Backstop(0)

	lease := func(h string, durationSeconds *int32) *coordinationv1.Lease {
		l := objects.Lease("ns", owner.RunLeaseName()).RenewTime(metav1.NewMicroTime(t0)).With(func(l *coordinationv1.Lease) {
			l.CreationTimestamp = metav1.NewTime(t0)
			l.Spec.LeaseDurationSeconds = durationSeconds
		})
		if h != "" {
			l.Holder(h)
		}
		return l.Obj()
	}
	job := func(kind, name string, conds ...batchv1.JobConditionType) *batchv1.Job {
		j := objects.Job("ns", holder).Of(kind, name, "c1").Obj()
		for _, c := range conds {
			j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue})
		}
		return j
	}
	own := func(conds ...batchv1.JobConditionType) *batchv1.Job {
		return job(owner.Kind, owner.Name, conds...)
	}
	pod := func(label string, phase corev1.PodPhase) corev1.Pod {
		return *objects.PodOf(objects.Job("ns", holder).Obj(), holder+"-x").JobLabel(label).Phase(phase).Obj()
	}
	pods := func(ps ...corev1.Pod) []corev1.Pod { return ps }
	// labelledFor gives a pod the owner labels of kind/name, as the Job template gives them.
	labelledFor := func(p corev1.Pod, kind, name string) corev1.Pod {
		for k, v := range naming.OwnerLabels(kind, name, "c1", "") {
			p.Labels[k] = v
		}
		return p
	}
	orphan := func(phase corev1.PodPhase) corev1.Pod {
		return labelledFor(pod(runlease.JobNameLabel, phase), owner.Kind, owner.Name)
	}
	withDeadline := func(j *batchv1.Job, secs int64) *batchv1.Job {
		j.Spec.ActiveDeadlineSeconds = ptr.To(secs)
		return j
	}
	floor := opts.Backstop(runlease.MinActiveDeadlineSeconds)
	// createdAt gives a Job its creation time.
	createdAt := func(j *batchv1.Job, t time.Time) *batchv1.Job {
		j.CreationTimestamp = metav1.NewTime(t)
		return j
	}
	day := 24 * time.Hour
	// stripped removes a Job's labels and gives it a controller owner reference to kind/name.
	stripped := func(j *batchv1.Job, kind, name string) *batchv1.Job {
		j.Labels = map[string]string{"team": "infra"}
		j.OwnerReferences = []metav1.OwnerReference{{APIVersion: infrav1.GroupVersion.String(), Kind: kind, Name: name, UID: "u", Controller: ptr.To(true)}}
		return j
	}
	withGroup := func(j *batchv1.Job, apiVersion string) *batchv1.Job {
		j.OwnerReferences[0].APIVersion = apiVersion
		return j
	}
	running := corev1.PodRunning

	cases := []struct {
		name   string
		lease  *coordinationv1.Lease
		job    *batchv1.Job
		pods   []corev1.Pod
		age    time.Duration
		free   bool
		reason runlease.VerdictReason
	}{
		{"no holder", lease("", nil), nil, nil, 0, true, runlease.FreeNoHolder},
		{"holder absent, inside the grace", lease(holder, nil), nil, nil, 59 * time.Second, false, runlease.LiveWithinGrace},
		{"holder absent, at the grace", lease(holder, nil), nil, nil, time.Minute, false, runlease.LiveWithinGrace},
		{"holder absent, past the grace", lease(holder, nil), nil, nil, 61 * time.Second, true, runlease.FreeHolderGone},
		{"forged lease without a Job, inside the grace", lease("captf-forged-1", nil), nil, nil, 10 * time.Second, false, runlease.LiveWithinGrace},
		{"forged lease without a Job, past the grace", lease("captf-forged-1", nil), nil, nil, 2 * time.Minute, true, runlease.FreeHolderGone},
		{"holder absent past the grace, orphaned pod still running", lease(holder, nil), nil, pods(pod(runlease.JobNameLabel, running)), 2 * time.Minute, false, runlease.LivePodsRunning},
		{"holder absent past the grace, orphaned pod finished", lease(holder, nil), nil, pods(pod(runlease.JobNameLabel, corev1.PodFailed)), 2 * time.Minute, true, runlease.FreeHolderGone},
		{"own Job running, inside the grace", lease(holder, nil), own(), nil, time.Second, false, runlease.LiveHolderRunning},
		{"own Job running, past the grace", lease(holder, nil), own(), nil, time.Hour, false, runlease.LiveHolderRunning},
		{"own Job running, just inside the backstop", lease(holder, nil), own(), nil, backstop, false, runlease.LiveHolderRunning},
		{"own Job running, past the backstop", lease(holder, nil), own(), nil, backstop + time.Second, true, runlease.FreePastBackstop},
		{"backstop from leaseDurationSeconds", lease(holder, ptr.To(int32(5000))), own(), nil, 5001 * time.Second, true, runlease.FreePastBackstop},
		{"inside leaseDurationSeconds", lease(holder, ptr.To(int32(5000))), own(), nil, 4999 * time.Second, false, runlease.LiveHolderRunning},
		// The forgery of issue 16: leaseDurationSeconds cut to 1 while the holder runs. The
		// duration is trusted only down to the backstop of the holder's own deadline.
		{"forged duration 1, own Job running", lease(holder, ptr.To(int32(1))), own(), nil, 10 * time.Minute, false, runlease.LiveHolderRunning},
		{"forged duration 1, own Job running, just inside its deadline's backstop", lease(holder, ptr.To(int32(1))), own(), nil, backstop, false, runlease.LiveHolderRunning},
		{"forged duration 1, own Job running, past its deadline's backstop", lease(holder, ptr.To(int32(1))), own(), nil, backstop + time.Second, true, runlease.FreePastBackstop},
		{"forged duration 1, own Job with a 7200 s deadline", lease(holder, ptr.To(int32(1))), withDeadline(own(), 7200), nil, backstop + time.Hour, false, runlease.LiveHolderRunning},
		{"duration below its own Job's deadline", lease(holder, ptr.To(int32(1200))), withDeadline(own(), 3600), nil, 2000 * time.Second, false, runlease.LiveHolderRunning},
		{"duration of a 300 s deadline, Job's deadline 300 s, past it", lease(holder, ptr.To(int32(1200))), withDeadline(own(), 300), nil, 1201 * time.Second, true, runlease.FreePastBackstop},
		{"forged duration 1, holder gone, orphaned pod running, below the floor", lease(holder, ptr.To(int32(1))), nil, pods(pod(runlease.JobNameLabel, running)), floor, false, runlease.LivePodsRunning},
		{"forged duration 1, holder gone, unlabelled pod running, past the floor", lease(holder, ptr.To(int32(1))), nil, pods(pod(runlease.JobNameLabel, running)), floor + time.Second, true, runlease.FreePastBackstop},
		// A Job deleted with propagation Orphan: the garbage collector leaves its pod running
		// without an owner reference and no deadline ends it. The lease follows the pod.
		{"holder gone, orphaned pod of the owner running, past the floor", lease(holder, ptr.To(int32(1))), nil, pods(orphan(running)), floor + time.Second, false, runlease.LivePodsRunning},
		{"holder gone, orphaned pod of the owner running, a day past the backstop", lease(holder, nil), nil, pods(orphan(running)), backstop + day, false, runlease.LivePodsRunning},
		{"holder gone, orphaned pod of the owner pending, past the backstop", lease(holder, nil), nil, pods(orphan(corev1.PodPending)), backstop + time.Second, false, runlease.LivePodsRunning},
		{"holder gone, orphaned pod of the owner succeeded, past the backstop", lease(holder, nil), nil, pods(orphan(corev1.PodSucceeded)), backstop + time.Second, true, runlease.FreePastBackstop},
		{"holder gone, orphaned pod of the owner failed, past the grace", lease(holder, nil), nil, pods(orphan(corev1.PodFailed)), 2 * time.Minute, true, runlease.FreeHolderGone},
		{"holder gone, pod of another object running, past the backstop", lease(holder, nil), nil,
			pods(labelledFor(pod(runlease.JobNameLabel, running), owner.Kind, "m2")), backstop + time.Second, true, runlease.FreePastBackstop},
		{"holder gone, orphaned pod of the owner under another Job's name, past the backstop", lease(holder, nil), nil,
			pods(labelledFor(*objects.PodOf(objects.Job("ns", "captf-other-1").Obj(), "x").JobLabel(runlease.JobNameLabel).Phase(running).Obj(),
				owner.Kind, owner.Name)), backstop + time.Second, true, runlease.FreePastBackstop},
		{"times moved a day into the past, own Job created 10 min ago", lease(holder, nil), createdAt(own(), t0.Add(day-10*time.Minute)), nil, day, false, runlease.LiveHolderRunning},
		{"times moved into the past and duration 1, own Job created 10 min ago", lease(holder, ptr.To(int32(1))), createdAt(own(), t0.Add(day-10*time.Minute)), nil, day, false, runlease.LiveHolderRunning},
		{"times moved into the past, own Job older than its backstop", lease(holder, nil), createdAt(own(), t0.Add(day-backstop-time.Second)), nil, day, true, runlease.FreePastBackstop},
		{"times moved into the past, foreign Job: no clamp", lease(holder, nil), createdAt(job(infrav1.TerraformMachineKind, "m2"), t0.Add(day-time.Minute)), nil, day, true, runlease.FreePastBackstop},
		{"forged duration 1, foreign Job, inside the grace", lease(holder, ptr.To(int32(1))), job(infrav1.TerraformMachineKind, "m2"), nil, 30 * time.Second, false, runlease.LiveWithinGrace},
		{"own Job complete, no pods", lease(holder, nil), own(batchv1.JobSuccessCriteriaMet, batchv1.JobComplete), nil, time.Second, true, runlease.FreeHolderFinished},
		{"own Job failed, pods terminal", lease(holder, nil), own(batchv1.JobFailureTarget, batchv1.JobFailed),
			pods(pod(runlease.JobNameLabel, corev1.PodFailed), pod(runlease.LegacyJobNameLabel, corev1.PodSucceeded)), time.Second, true, runlease.FreeHolderFinished},
		{"own Job finished, pod still running", lease(holder, nil), own(batchv1.JobFailureTarget, batchv1.JobFailed), pods(pod(runlease.JobNameLabel, running)), time.Hour, false, runlease.LivePodsRunning},
		{"own Job finished, pod (legacy label) still running", lease(holder, nil), own(batchv1.JobSuccessCriteriaMet, batchv1.JobComplete), pods(pod(runlease.LegacyJobNameLabel, running)), time.Hour, false, runlease.LivePodsRunning},
		{"own Job finished, pod still pending", lease(holder, nil), own(batchv1.JobSuccessCriteriaMet, batchv1.JobComplete), pods(pod(runlease.JobNameLabel, corev1.PodPending)), time.Hour, false, runlease.LivePodsRunning},
		{"own Job finished, pod running past the backstop", lease(holder, nil), own(batchv1.JobFailed), pods(pod(runlease.JobNameLabel, running)), backstop + time.Minute, true, runlease.FreePastBackstop},
		{"own Job only failure-targeted, not finished", lease(holder, nil), own(batchv1.JobFailureTarget), nil, time.Hour, false, runlease.LiveHolderRunning},
		{"Job of another object, inside the grace", lease(holder, nil), job(infrav1.TerraformMachineKind, "m2"), nil, 30 * time.Second, false, runlease.LiveWithinGrace},
		{"Job of another object, past the grace", lease(holder, nil), job(infrav1.TerraformMachineKind, "m2"), nil, 2 * time.Minute, true, runlease.FreeHolderForeign},
		{"Job of another kind with the same name, past the grace", lease(holder, nil), job(infrav1.TerraformMachinePoolKind, "m1"), pods(pod(runlease.JobNameLabel, running)), 2 * time.Minute, true, runlease.FreeHolderForeign},
		{"Job without owner labels, past the grace", lease(holder, nil), objects.Job("ns", holder).Obj(), nil, 2 * time.Minute, true, runlease.FreeHolderForeign},
		// Labels stripped while the Job runs: its controller owner reference still makes it the
		// object's, for as long as it runs and no longer.
		{"labels stripped, controller reference to the owner, running", lease(holder, nil), stripped(own(), owner.Kind, owner.Name), nil, time.Hour, false, runlease.LiveHolderRunning},
		{"labels stripped, controller reference to the owner, finished", lease(holder, nil), stripped(own(batchv1.JobSuccessCriteriaMet, batchv1.JobComplete), owner.Kind, owner.Name), nil, time.Hour, true, runlease.FreeHolderFinished},
		{"labels stripped, controller reference to another object", lease(holder, nil), stripped(own(), owner.Kind, "m2"), nil, 2 * time.Minute, true, runlease.FreeHolderForeign},
		{"labels stripped, reference of another API group", lease(holder, nil), withGroup(stripped(own(), owner.Kind, owner.Name), "example.com/v1"), nil, 2 * time.Minute, true, runlease.FreeHolderForeign},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			clk.Step(tc.age)
			v := runlease.Assess(tc.lease, owner, tc.job, tc.pods, clk.Now(), opts)
			if v.Free != tc.free || v.Reason != tc.reason {
				t.Fatalf("Assess = free %v (%s), want free %v (%s)", v.Free, v.Reason, tc.free, tc.reason)
			}
			if v.Age != tc.age {
				t.Fatalf("age %s, want %s", v.Age, tc.age)
			}
		})
	}
}

// TestLeaseTime covers where the lease's time comes from, and that a time far in the future is
// not believed (it would keep a forged lease live forever).
func TestLeaseTime(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	owner := runlease.Owner{Namespace: "ns", Kind: infrav1.TerraformClusterKind, Name: "tc", Cluster: "c1"}
	opts := runlease.DefaultOptions()
	now := t0.Add(10 * time.Minute)
	base := func() *coordinationv1.Lease {
		return objects.Lease("ns", "l").Holder("captf-x-1").With(func(l *coordinationv1.Lease) { l.CreationTimestamp = metav1.NewTime(t0) }).Obj()
	}
	cases := []struct {
		name string
		mod  func(*coordinationv1.Lease)
		age  time.Duration
	}{
		{"renewTime first", func(l *coordinationv1.Lease) {
			l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now.Add(-30 * time.Second)))
			l.Spec.AcquireTime = ptr.To(metav1.NewMicroTime(t0))
		}, 30 * time.Second},
		{"then acquireTime", func(l *coordinationv1.Lease) {
			l.Spec.AcquireTime = ptr.To(metav1.NewMicroTime(now.Add(-40 * time.Second)))
		}, 40 * time.Second},
		{"then the annotation", func(l *coordinationv1.Lease) {
			l.Annotations = map[string]string{infrav1.LeaseAcquiredAtAnnotation: now.Add(-50 * time.Second).Format(time.RFC3339)}
		}, 50 * time.Second},
		{"then the creation time", func(*coordinationv1.Lease) {}, 10 * time.Minute},
		{"a future time is not believed", func(l *coordinationv1.Lease) {
			l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now.Add(24 * time.Hour)))
		}, 10 * time.Minute},
		{"a little clock skew is", func(l *coordinationv1.Lease) {
			l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now.Add(5 * time.Second)))
		}, -5 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := base()
			tc.mod(l)
			if v := runlease.Assess(l, owner, nil, nil, now, opts); v.Age != tc.age {
				t.Fatalf("age %s, want %s", v.Age, tc.age)
			}
		})
	}
}

func TestBackstopAndConditions(t *testing.T) {
	o := runlease.DefaultOptions()
	if got := o.Backstop(0); got != 4500*time.Second {
		t.Fatalf("default backstop %s, want 4500s", got)
	}
	if got := o.Backstop(60); got != 60*time.Second+600*time.Second+5*time.Minute {
		t.Fatalf("backstop(60) %s", got)
	}
	if got := runlease.BackstopFloor(nil, false, o); got != 960*time.Second {
		t.Fatalf("floor without a Job %s, want 960s", got)
	}
	own := objects.Job("ns", "j").Deadline(7200).Obj()
	if got := runlease.BackstopFloor(own, true, o); got != 8100*time.Second {
		t.Fatalf("floor of a 7200 s Job %s, want 8100s", got)
	}
	if got := runlease.BackstopFloor(own, false, o); got != 960*time.Second {
		t.Fatalf("a foreign Job's deadline must not raise the floor: %s", got)
	}
	if got := runlease.BackstopFloor(objects.Job("ns", "j").Obj(), true, o); got != 4500*time.Second {
		t.Fatalf("floor of an own Job without a deadline %s, want the default 4500s", got)
	}

	if !o.ClusterOperationGate || o.Grace != time.Minute || o.RequeueAfter != 30*time.Second {
		t.Fatalf("defaults: %+v", o)
	}
	w := &runlease.Wait{Condition: infrav1.ApplyJobSucceededCondition, Reason: infrav1.WaitingForRunLeaseReason, Message: "a"}
	cur := &metav1.Condition{Type: infrav1.ApplyJobSucceededCondition, Status: metav1.ConditionUnknown, Reason: infrav1.WaitingForRunLeaseReason, Message: "b"}
	if !w.Repeats(cur) {
		t.Fatal("same wait with another message is not a repeat")
	}
	for _, c := range []*metav1.Condition{nil,
		{Type: infrav1.ApplyJobSucceededCondition, Status: metav1.ConditionTrue, Reason: infrav1.JobSucceededReason},
		{Type: infrav1.ApplyJobSucceededCondition, Status: metav1.ConditionUnknown, Reason: infrav1.WaitingForClusterOperationReason},
		{Type: infrav1.DriftJobSucceededCondition, Status: metav1.ConditionUnknown, Reason: infrav1.WaitingForRunLeaseReason},
	} {
		if w.Repeats(c) {
			t.Fatalf("%v counted as a repeat of the wait", c)
		}
	}
}

// TestMinDeadlineIsTheAPIs: the floor of a lease's backstop assumes no Job deadline below
// MinActiveDeadlineSeconds, the minimum every reconciled kind's schema enforces.
func TestMinDeadlineIsTheAPIs(t *testing.T) {
	root, err := envtest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, plural := range []string{"terraformclusters", "terraformmachines", "terraformmachinepools"} {
		raw, err := os.ReadFile(filepath.Join(root, "config", "crd", "bases", "infrastructure.cluster.x-k8s.io_"+plural+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, crd); err != nil {
			t.Fatal(err)
		}
		for _, v := range crd.Spec.Versions {
			deadline := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["job"].Properties["activeDeadlineSeconds"]
			if deadline.Minimum == nil || int64(*deadline.Minimum) != runlease.MinActiveDeadlineSeconds {
				t.Fatalf("%s %s: spec.job.activeDeadlineSeconds minimum %v, runlease assumes %d", plural, v.Name, deadline.Minimum, runlease.MinActiveDeadlineSeconds)
			}
		}
	}
}
