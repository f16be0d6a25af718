package kcm_test

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/test/sim/apiserver"
	"github.com/captf/cluster-api-provider-terraform/test/sim/kcm"
)

func newStore(t *testing.T) *apiserver.Store {
	t.Helper()
	scheme, err := setup.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	s, err := apiserver.New(scheme, apiserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func job(name string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "runner", Image: "runner:1"}}}}},
	}
}

// transitions collects what a Job controller writes.
type transitions struct {
	mu  sync.Mutex
	all []string
}

func (tr *transitions) observe(t kcm.Transition) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.all = append(tr.all, t.String())
}

func (tr *transitions) list() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.all)
}

// condition returns the Job's True condition of type t, if any.
func condition(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if c := &j.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// TestJobRuns creates a Job that succeeds, one that fails and one whose run outlasts its
// deadline, and requires each to start at once and end at the time and with the status the
// real Job controller gives it; a suspended Job starts only when resumed.
func TestJobRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t)
		c := s.Client()
		ctx := t.Context()
		jc := kcm.StartJobController(c, kcm.JobOptions{Seed: 4, MinRun: 10 * time.Second, MaxRun: time.Minute,
			Decide: func(j *batchv1.Job, drawn kcm.Run) kcm.Run {
				switch j.Name {
				case "fails":
					drawn.Fail = true
				case "slow":
					drawn.Duration = 10 * time.Minute
				}
				return drawn
			}})
		defer jc.Stop()
		start := time.Now()
		ok, fails, slow, suspended := job("ok"), job("fails"), job("slow"), job("suspended")
		slow.Spec.ActiveDeadlineSeconds = ptr.To[int64](120)
		suspended.Spec.Suspend = ptr.To(true)
		for _, j := range []*batchv1.Job{ok, fails, slow, suspended} {
			if err := c.Create(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		for _, j := range []*batchv1.Job{ok, fails, slow, suspended} {
			if err := c.Get(ctx, client.ObjectKeyFromObject(j), j); err != nil {
				t.Fatal(err)
			}
		}
		for _, j := range []*batchv1.Job{ok, fails, slow} {
			if j.Status.StartTime == nil || !j.Status.StartTime.Time.Equal(start) || j.Status.Active != 1 {
				t.Errorf("%s: startTime %v active %d, want started at %v", j.Name, j.Status.StartTime, j.Status.Active, start)
			}
		}
		if suspended.Status.StartTime != nil {
			t.Errorf("a suspended Job started")
		}
		okRun := jc.Draw(ok)
		time.Sleep(okRun.Duration - time.Second)
		synctest.Wait()
		if err := c.Get(ctx, client.ObjectKeyFromObject(ok), ok); err != nil || condition(ok, batchv1.JobComplete) != nil {
			t.Fatalf("the Job finished before its run ended: %v", err)
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		for _, j := range []*batchv1.Job{ok, fails, slow} {
			if err := c.Get(ctx, client.ObjectKeyFromObject(j), j); err != nil {
				t.Fatal(err)
			}
		}
		if c := condition(ok, batchv1.JobComplete); c == nil || condition(ok, batchv1.JobSuccessCriteriaMet) == nil ||
			ok.Status.Succeeded != 1 || ok.Status.Active != 0 || ok.Status.CompletionTime == nil ||
			!ok.Status.CompletionTime.Time.Equal(start.Add(okRun.Duration).Truncate(time.Second)) {
			t.Errorf("ok: status %+v, want Complete at %v", ok.Status, start.Add(okRun.Duration))
		}
		if c := condition(fails, batchv1.JobFailed); c == nil || c.Reason != "BackoffLimitExceeded" || fails.Status.Failed != 1 || condition(fails, batchv1.JobFailureTarget) == nil {
			t.Errorf("fails: status %+v, want Failed with BackoffLimitExceeded", fails.Status)
		}
		if c := condition(slow, batchv1.JobFailed); c == nil || c.Reason != "DeadlineExceeded" || !c.LastTransitionTime.Time.Equal(start.Add(2*time.Minute)) {
			t.Errorf("slow: status %+v, want DeadlineExceeded at %v", slow.Status, start.Add(2*time.Minute))
		}
		suspended.Spec.Suspend = ptr.To(false)
		if err := c.Update(ctx, suspended); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := c.Get(ctx, client.ObjectKeyFromObject(suspended), suspended); err != nil || suspended.Status.StartTime == nil {
			t.Errorf("a resumed Job did not start: %v", err)
		}
	})
}

// TestRestartAndDeletion stops the controller during a run and starts another: the Job ends
// when the first would have ended it. A Job deleted during its run and created again under its
// name gets no further write; its successor runs its own run.
func TestRestartAndDeletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t)
		c := s.Client()
		ctx := t.Context()
		tr := &transitions{}
		opts := kcm.JobOptions{Seed: 8, MinRun: 30 * time.Second, MaxRun: 90 * time.Second, Observe: tr.observe}
		first := kcm.StartJobController(c, opts)
		start := time.Now()
		a, gone := job("a"), job("gone")
		for _, j := range []*batchv1.Job{a, gone} {
			if err := c.Create(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(10 * time.Second)
		first.Stop()
		second := kcm.StartJobController(c, opts)
		defer second.Stop()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		oldUID := gone.UID
		if err := c.Delete(ctx, gone); err != nil {
			t.Fatal(err)
		}
		again := job("gone") // the same name, a new Job
		again.Spec.ActiveDeadlineSeconds = ptr.To[int64](3600)
		if err := c.Create(ctx, again); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if err := c.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
			t.Fatal(err)
		}
		want := start.Add(second.Draw(a).Duration).Truncate(time.Second)
		if a.Status.CompletionTime == nil || !a.Status.CompletionTime.Time.Equal(want) {
			t.Errorf("after a restart the Job completed at %v, want %v", a.Status.CompletionTime, want)
		}
		var oldWrites, newWrites int
		for _, line := range tr.list() {
			switch {
			case strings.Contains(line, "uid="+string(oldUID)):
				oldWrites++
			case strings.Contains(line, "uid="+string(again.UID)):
				newWrites++
			}
		}
		if oldWrites != 1 || newWrites != 2 {
			t.Errorf("writes to the deleted Job %d (want only its start), to its successor %d (want start and end): %q", oldWrites, newWrites, tr.list())
		}
	})
}

// TestSeedDeterminesRuns plays the same Jobs twice per seed and requires the same transitions
// at the same times; another seed gives other durations.
func TestSeedDeterminesRuns(t *testing.T) {
	run := func(seed uint64) []string {
		var out []string
		synctest.Test(t, func(t *testing.T) {
			s := newStore(t)
			tr := &transitions{}
			jc := kcm.StartJobController(s.Client(), kcm.JobOptions{Seed: seed, FailPercent: 30, Observe: tr.observe})
			defer jc.Stop()
			for i := range 6 {
				if err := s.Client().Create(t.Context(), job(string(rune('a'+i)))); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Second)
			}
			time.Sleep(5 * time.Minute)
			synctest.Wait()
			out = tr.list()
			slices.Sort(out) // writes at one instant may commit in either order
		})
		return out
	}
	a, b := run(21), run(21)
	if len(a) != 12 || !slices.Equal(a, b) {
		t.Errorf("seed 21 gave\n%q\nand\n%q", a, b)
	}
	if c := run(22); slices.Equal(a, c) {
		t.Errorf("seeds 21 and 22 gave the same runs %q", a)
	}
}

// TestGarbageCollector deletes an owner and requires its sole dependents deleted, a dependent
// with another live owner kept without the dangling reference, and an object created naming a
// gone owner collected too.
func TestGarbageCollector(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t)
		c := s.Client()
		ctx := t.Context()
		gc := kcm.StartGarbageCollector(c, kcm.GCOptions{Kinds: []schema.GroupVersionKind{
			{Version: "v1", Kind: "ConfigMap"}, {Version: "v1", Kind: "Secret"}, {Group: "batch", Version: "v1", Kind: "Job"}}})
		defer gc.Stop()
		owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: "default"}}
		other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "default"}}
		for _, o := range []client.Object{owner, other} {
			if err := c.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		ref := func(o *corev1.ConfigMap) metav1.OwnerReference {
			return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: o.Name, UID: o.UID}
		}
		dep := job("dep")
		dep.OwnerReferences = []metav1.OwnerReference{ref(owner)}
		shared := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: "default",
			OwnerReferences: []metav1.OwnerReference{ref(owner), ref(other)}}}
		for _, o := range []client.Object{dep, shared} {
			if err := c.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if err := c.Get(ctx, client.ObjectKeyFromObject(dep), &batchv1.Job{}); err != nil {
			t.Fatalf("a dependent of a live owner was collected: %v", err)
		}
		if err := c.Delete(ctx, owner); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := c.Get(ctx, client.ObjectKeyFromObject(dep), &batchv1.Job{}); !apierrors.IsNotFound(err) {
			t.Errorf("the sole dependent of a deleted owner: %v, want NotFound", err)
		}
		got := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(shared), got); err != nil {
			t.Fatalf("a dependent with a live owner was deleted: %v", err)
		}
		if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != other.UID {
			t.Errorf("owner references %v, want only the live owner's", got.OwnerReferences)
		}
		late := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: "default",
			OwnerReferences: []metav1.OwnerReference{ref(owner)}}}
		if err := c.Create(ctx, late); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := c.Get(ctx, client.ObjectKeyFromObject(late), &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("an object created naming a gone owner: %v, want NotFound", err)
		}
	})
}
