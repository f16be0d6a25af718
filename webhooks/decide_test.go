package webhooks_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

func marks(blockMove, finalizer bool, activeJob string) *webhooks.Marks {
	m := &webhooks.Marks{}
	if blockMove {
		m.Annotations = map[string]string{infrav1.BlockMoveAnnotation: ""}
	}
	if finalizer {
		m.Finalizers = []string{"other.example.com/keep", infrav1.Finalizer}
	}
	if activeJob != "" {
		m.Status.ActiveJob = &infrav1.ActiveJob{Name: activeJob, Operation: infrav1.OperationApply}
	}
	return m
}

func TestDiff(t *testing.T) {
	cases := []struct {
		name     string
		old, new *webhooks.Marks
		guarded  bool
		describe string
	}{
		{"nothing set, nothing changes", marks(false, false, ""), marks(false, false, ""), false, "removes nothing"},
		{"adding marks is not guarded", marks(false, false, ""), marks(true, true, "j1"), false, "removes nothing"},
		{"block-move removed", marks(true, true, ""), marks(false, true, ""), true, "removes the clusterctl.cluster.x-k8s.io/block-move annotation"},
		{"finalizer removed, other finalizer kept", marks(false, true, ""), &webhooks.Marks{ObjectMeta: metav1.ObjectMeta{Finalizers: []string{"other.example.com/keep"}}}, true, "removes the finalizer infrastructure.cluster.x-k8s.io/captf"},
		{"activeJob cleared", marks(false, false, "j1"), marks(false, false, ""), true, "clears status.activeJob (j1)"},
		{"activeJob replaced", marks(false, false, "j1"), marks(false, false, "j2"), true, "changes status.activeJob from j1 to j2"},
		{"activeJob unchanged", marks(true, true, "j1"), marks(true, true, "j1"), false, "removes nothing"},
		{"all three at once", marks(true, true, "j1"), marks(false, false, ""), true,
			"removes the clusterctl.cluster.x-k8s.io/block-move annotation, removes the finalizer infrastructure.cluster.x-k8s.io/captf and clears status.activeJob (j1)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ch := webhooks.Diff(c.old, c.new)
			if ch.Guarded() != c.guarded {
				t.Fatalf("Guarded() = %v, want %v (%+v)", ch.Guarded(), c.guarded, ch)
			}
			if !strings.HasPrefix(ch.Describe(), c.describe) {
				t.Fatalf("Describe() = %q, want prefix %q", ch.Describe(), c.describe)
			}
		})
	}
}

func TestDecodeMarksReadsEveryKind(t *testing.T) {
	raw := []byte(`{"apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha1","kind":"TerraformMachinePool",
		"metadata":{"name":"p","annotations":{"clusterctl.cluster.x-k8s.io/block-move":"","captf.io/guard-override-reason":"  INC-1  "},
		"finalizers":["infrastructure.cluster.x-k8s.io/captf"]},
		"spec":{"module":{"image":"m:1"}},"status":{"replicas":2,"activeJob":{"name":"captf-x-1","operation":"Apply"}}}`)
	m, err := webhooks.DecodeMarks(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !m.BlockMove() || !m.HasFinalizer() || m.ActiveJobName() != "captf-x-1" || m.OverrideReason() != "INC-1" {
		t.Fatalf("marks not read: %+v", m)
	}
	if _, err := webhooks.DecodeMarks([]byte(`{`)); err == nil {
		t.Fatal("a broken object must not decode")
	}
}

func job(name string, finished bool, start time.Time) *batchv1.Job {
	st := metav1.NewTime(start)
	j := objects.Job("ns", name).Started(st).With(func(j *batchv1.Job) { j.CreationTimestamp = st })
	if finished {
		j.Complete(st)
	}
	return j.Obj()
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	taken := now.Add(-42 * time.Second)
	const lease, holder = "captf-run-abc", "captf-abc-3"
	running := runlease.Evidence{LeaseName: lease, Found: true, Holder: holder, Operation: infrav1.OperationApply,
		AcquiredAt: taken, Job: job(holder, false, taken), JobOfOwner: true,
		Verdict: runlease.Verdict{Reason: runlease.LiveHolderRunning}}
	podsLive := runlease.Evidence{LeaseName: lease, Found: true, Holder: holder, AcquiredAt: taken, Job: job(holder, true, taken), JobOfOwner: true,
		Verdict: runlease.Verdict{Reason: runlease.LivePodsRunning}}
	inGrace := runlease.Evidence{LeaseName: lease, Found: true, Holder: holder, Operation: infrav1.OperationDestroy, AcquiredAt: now.Add(-5 * time.Second),
		Verdict: runlease.Verdict{Reason: runlease.LiveWithinGrace}}
	inGraceForeignJob := inGrace
	inGraceForeignJob.Job = job(holder, false, taken)
	finished := runlease.Evidence{LeaseName: lease, Found: true, Holder: holder, AcquiredAt: taken, Job: job(holder, true, taken), JobOfOwner: true,
		Verdict: runlease.Verdict{Free: true, Reason: runlease.FreeHolderFinished}}
	pastBackstop := runlease.Evidence{LeaseName: lease, Found: true, Holder: holder, AcquiredAt: now.Add(-2 * time.Hour),
		Verdict: runlease.Verdict{Free: true, Reason: runlease.FreePastBackstop}}
	noLease := runlease.Evidence{LeaseName: lease, Verdict: runlease.Verdict{Free: true, Reason: runlease.FreeNoHolder}}

	blockMove := webhooks.Change{BlockMoveRemoved: true}
	finalizer := webhooks.Change{FinalizerRemoved: true}
	clearActive := webhooks.Change{OldActiveJob: "captf-abc-2"}
	toHolder := webhooks.Change{OldActiveJob: "captf-abc-2", NewActiveJob: holder}
	toOther := webhooks.Change{OldActiveJob: "captf-abc-2", NewActiveJob: "captf-abc-9"}
	toHolderAndBlockMove := webhooks.Change{OldActiveJob: "captf-abc-2", NewActiveJob: holder, BlockMoveRemoved: true}

	oldRuns := &webhooks.JobState{Name: "captf-abc-2", Summary: jobstatus.Summary{Found: true}, Operation: "Apply", Since: taken}
	oldPods := &webhooks.JobState{Name: "captf-abc-2", Summary: jobstatus.Summary{Found: true, Finished: true, LivePods: []string{"captf-abc-2-pod"}}}
	oldGonePods := &webhooks.JobState{Name: "captf-abc-2", Summary: jobstatus.Summary{LivePods: []string{"captf-abc-2-pod"}}}
	oldDone := &webhooks.JobState{Name: "captf-abc-2", Summary: jobstatus.Summary{Found: true, Finished: true}}
	oldGone := &webhooks.JobState{Name: "captf-abc-2"}

	cases := []struct {
		name    string
		ch      webhooks.Change
		lease   runlease.Evidence
		active  *webhooks.JobState
		allowed bool
		want    []string
	}{
		{"nothing guarded passes whatever runs", webhooks.Change{}, running, oldRuns, true, nil},
		{"block-move while the holder runs", blockMove, running, nil, false,
			[]string{"Job captf-abc-3 (Apply) of this object runs", "run lease captf-run-abc", "2026-11-29T11:59:18Z, 42s ago", "kubectl -n ns delete job captf-abc-3 --cascade=foreground", "captf.io/guard-override-reason"}},
		{"finalizer while the holder runs", finalizer, running, nil, false, []string{"removes the finalizer", "Job captf-abc-3"}},
		{"finalizer while a pod of the finished holder runs", finalizer, podsLive, nil, false, []string{"still has a pod that is not terminated"}},
		{"block-move inside the grace, Job not created", blockMove, inGrace, nil, false,
			[]string{"may still be created until 2026-11-29T12:00:55Z", "not on the API server yet", "Wait until that time"}},
		{"inside the grace but the name is another object's Job", blockMove, inGraceForeignJob, nil, true, nil},
		{"block-move with the holder finished", blockMove, finished, nil, true, nil},
		{"finalizer with the lease past its backstop", finalizer, pastBackstop, nil, true, nil},
		{"finalizer with no lease", finalizer, noLease, nil, true, nil},
		{"clear activeJob whose Job runs, no lease", clearActive, noLease, oldRuns, false, []string{"Job captf-abc-2 (Apply) named by status.activeJob runs", "kubectl -n ns delete job captf-abc-2"}},
		{"clear activeJob whose finished Job has a live pod", clearActive, noLease, oldPods, false, []string{"captf-abc-2-pod are not terminated"}},
		{"clear activeJob whose deleted Job has a live pod", clearActive, noLease, oldGonePods, false, []string{"has finished or is gone"}},
		{"clear activeJob whose Job finished", clearActive, finished, oldDone, true, nil},
		{"clear activeJob whose Job is gone", clearActive, noLease, oldGone, true, nil},
		{"clear activeJob while the lease holder runs", clearActive, running, oldDone, false, []string{"Job captf-abc-3 (Apply) of this object runs"}},
		{"replace activeJob with the running holder", toHolder, running, oldDone, true, nil},
		{"replace activeJob with the holder inside the grace", toHolder, inGrace, oldDone, true, nil},
		{"replace activeJob with the holder while the old Job runs", toHolder, running, oldRuns, false, []string{"captf-abc-2 (Apply) named by status.activeJob runs"}},
		{"replace activeJob with another name while the holder runs", toOther, running, oldDone, false, []string{"Job captf-abc-3"}},
		{"replace with the holder but also drop block-move", toHolderAndBlockMove, running, oldDone, false, []string{"removes the clusterctl.cluster.x-k8s.io/block-move annotation and changes status.activeJob"}},
		{"both blockers are named", clearActive, running, oldRuns, false, []string{"Job captf-abc-3", "; and Job captf-abc-2"}},
	}
	ref := webhooks.ObjectRef{Kind: infrav1.TerraformClusterKind, Namespace: "ns", Name: "c1"}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := webhooks.Decide(c.ch, webhooks.Evidence{Lease: c.lease, ActiveJob: c.active, Now: now, Grace: time.Minute})
			if v.Allowed != c.allowed {
				t.Fatalf("Allowed = %v, want %v; blockers %q", v.Allowed, c.allowed, v.Blockers)
			}
			msg := v.Message(ref, c.ch)
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message lacks %q:\n%s", w, msg)
				}
			}
		})
	}
}

func TestOverrideAllows(t *testing.T) {
	o := &webhooks.Override{Groups: []string{"captf:breakglass"}}
	in := authenticationv1.UserInfo{Username: "oncall", Groups: []string{"system:authenticated", "captf:breakglass"}}
	out := authenticationv1.UserInfo{Username: "dev", Groups: []string{"system:authenticated", "devs"}}
	switch {
	case !o.Allows(in, "INC-7: lease stuck"):
		t.Error("a member with a reason must be allowed")
	case o.Allows(in, "   "):
		t.Error("a blank reason must not override")
	case o.Allows(out, "INC-7"):
		t.Error("a non-member must not override")
	case (&webhooks.Override{}).Allows(in, "INC-7"):
		t.Error("no configured group: nobody overrides")
	case (&webhooks.Override{Groups: []string{""}}).Allows(authenticationv1.UserInfo{Groups: []string{""}}, "x"):
		t.Error("an empty group name matches nobody")
	}
	if !strings.Contains(o.Refusal(out), `"dev" is in none of the override groups captf:breakglass`) {
		t.Errorf("refusal: %s", o.Refusal(out))
	}
	if !strings.Contains((&webhooks.Override{}).Refusal(out), "--guard-override-groups") {
		t.Error("the refusal must name the flag when no group is configured")
	}
}

func TestLeaseChanges(t *testing.T) {
	at := metav1.NewMicroTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	base := func() *coordinationv1.Lease {
		return objects.Lease("ns", "captf-run-0123456789abcdef").Label(infrav1.LeaseLabel, "run").Label(infrav1.OwnerNameLabel, "m1").
			Annotation(infrav1.LeaseOpAnnotation, "Apply").Holder("captf-x-1").Renewed(at, 4500).
			With(func(l *coordinationv1.Lease) { l.Spec.LeaseTransitions = ptr.To[int32](1) }).Obj()
	}
	later := metav1.NewMicroTime(at.Add(time.Second))
	cases := []struct {
		name string
		mod  func(*coordinationv1.Lease)
		want []string
	}{
		{"nothing", func(*coordinationv1.Lease) {}, nil},
		{"transitions only (not protected)", func(l *coordinationv1.Lease) { l.Spec.LeaseTransitions = ptr.To[int32](9) }, nil},
		{"the same instant, re-encoded", func(l *coordinationv1.Lease) { l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(at.Local())) }, nil},
		{"holder", func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = ptr.To("captf-x-2") }, []string{"holder"}},
		{"holder cleared", func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = nil }, []string{"holder"}},
		{"duration", func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = ptr.To[int32](1) }, []string{"duration"}},
		{"acquire time", func(l *coordinationv1.Lease) { l.Spec.AcquireTime = &later }, []string{"acquire time"}},
		{"renew time removed", func(l *coordinationv1.Lease) { l.Spec.RenewTime = nil }, []string{"renew time"}},
		{"label removed", func(l *coordinationv1.Lease) { delete(l.Labels, infrav1.LeaseLabel) }, []string{"labels"}},
		{"owner label changed", func(l *coordinationv1.Lease) { l.Labels[infrav1.OwnerNameLabel] = "m2" }, []string{"labels"}},
		{"annotation added", func(l *coordinationv1.Lease) { l.Annotations["note"] = "x" }, []string{"annotations"}},
		{"all at once", func(l *coordinationv1.Lease) {
			l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.AcquireTime, l.Spec.RenewTime = nil, nil, nil, nil
			l.Labels, l.Annotations = nil, nil
		}, []string{"holder", "duration", "acquire time", "renew time", "labels", "annotations"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := base()
			tc.mod(n)
			if got := webhooks.LeaseChanges(base(), n); !slices.Equal(got, tc.want) {
				t.Fatalf("LeaseChanges = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDiffJob(t *testing.T) {
	ref := metav1.OwnerReference{APIVersion: infrav1.GroupVersion.String(), Kind: infrav1.TerraformClusterKind, Name: "c", UID: "u1", Controller: ptr.To(true)}
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "u2"}
	base := func() *batchv1.Job {
		return objects.Job("ns", "j").Of(infrav1.TerraformClusterKind, "c", "c").Label(infrav1.OperationLabel, "Apply").Label("team", "infra").
			With(func(j *batchv1.Job) { j.OwnerReferences = []metav1.OwnerReference{ref, other} }).Obj()
	}
	cases := []struct {
		name                 string
		mod                  func(*batchv1.Job)
		labels               int
		owner, gcOrphansOnly bool
	}{
		{"nothing", func(*batchv1.Job) {}, 0, false, false},
		{"another label", func(j *batchv1.Job) { j.Labels["team"] = "x" }, 0, false, false},
		{"another owner reference dropped", func(j *batchv1.Job) { j.OwnerReferences = []metav1.OwnerReference{ref} }, 0, false, false},
		{"owner-name changed", func(j *batchv1.Job) { j.Labels[infrav1.OwnerNameLabel] = "d" }, 1, false, false},
		{"managed removed", func(j *batchv1.Job) { delete(j.Labels, infrav1.ManagedLabel) }, 1, false, false},
		{"every CAPTF label removed", func(j *batchv1.Job) { j.Labels = map[string]string{"team": "infra"} }, 5, false, false},
		{"operation emptied", func(j *batchv1.Job) { j.Labels[infrav1.OperationLabel] = "" }, 1, false, false},
		{"controller reference removed (orphaning)", func(j *batchv1.Job) { j.OwnerReferences = nil }, 0, true, true},
		{"controller reference pointed elsewhere", func(j *batchv1.Job) {
			r := ref
			r.Name, r.UID = "d", "u3"
			j.OwnerReferences = []metav1.OwnerReference{r}
		}, 0, true, false},
		{"controller flag dropped", func(j *batchv1.Job) {
			r := ref
			r.Controller = nil
			j.OwnerReferences = []metav1.OwnerReference{r}
		}, 0, true, true},
		{"controller reference removed and a label changed", func(j *batchv1.Job) {
			j.OwnerReferences = nil
			j.Labels[infrav1.ClusterNameLabel] = "d"
		}, 1, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := base()
			tc.mod(n)
			c := webhooks.DiffJob(base(), n)
			if len(c.Labels) != tc.labels || c.OwnerChanged != tc.owner || c.OwnerRemovedOnly != tc.gcOrphansOnly {
				t.Fatalf("DiffJob = %+v, want %d labels, owner changed %v, removal only %v", c, tc.labels, tc.owner, tc.gcOrphansOnly)
			}
			if c.Any() != (tc.labels > 0 || tc.owner) {
				t.Fatalf("Any = %v", c.Any())
			}
		})
	}
}

func TestManagerUsername(t *testing.T) {
	for in, want := range map[string]string{
		"":                                      "",
		"captf-system/captf-controller-manager": "system:serviceaccount:captf-system:captf-controller-manager",
		" ns/sa ":                               "system:serviceaccount:ns:sa",
		"system:serviceaccount:ns:sa":           "system:serviceaccount:ns:sa",
	} {
		if got, err := webhooks.ManagerUsername(in); err != nil || got != want {
			t.Errorf("ManagerUsername(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"sa", "ns/", "/sa", "system:serviceaccount:ns", "system:serviceaccount::sa", "NS/sa", "ns/sa/x", "admin"} {
		if got, err := webhooks.ManagerUsername(bad); err == nil {
			t.Errorf("ManagerUsername(%q) = %q, want an error", bad, got)
		}
	}
}

func TestServiceAccountFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if got := webhooks.ServiceAccountFromEnv(env(map[string]string{webhooks.EnvPodNamespace: "captf-system", webhooks.EnvPodServiceAccount: "captf-controller-manager"})); got != "captf-system/captf-controller-manager" {
		t.Fatalf("got %q", got)
	}
	for _, m := range []map[string]string{{}, {webhooks.EnvPodNamespace: "ns"}, {webhooks.EnvPodServiceAccount: "sa"}} {
		if got := webhooks.ServiceAccountFromEnv(env(m)); got != "" {
			t.Fatalf("%v: got %q, want nothing", m, got)
		}
	}
}
