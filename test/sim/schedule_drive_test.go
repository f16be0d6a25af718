package sim_test

import (
	"fmt"
	"slices"
	"sort"
	"testing/synctest"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
	"github.com/captf/cluster-api-provider-terraform/test/monitor"
	"github.com/captf/cluster-api-provider-terraform/test/sim/faults"
)

// crashDown is how long a manager that crashed after a write stays down.
const crashDown = 2 * time.Second

// maxSpin bounds the driver's iterations at one instant (passes that keep dirtying their own
// caches at once): beyond it the schedule fails as a livelock.
const maxSpin = 500

// timed is one thing the driver does at a bubble time.
type timed struct {
	at   time.Duration
	what string
	do   func()
}

// driver state of one schedule.
type driver struct {
	w           *schedRun
	events      []timed
	convergedAt time.Duration
	livelock    string
}

// drive plays the schedule: managers up and down, the person's steps, passes when a manager's
// cache changed or its requeue is due, until the object has converged and stayed so for quiet,
// or the bound passed.
func (w *schedRun) drive() *driver {
	d := &driver{w: w, convergedAt: -1}
	d.at(0, "A up", func() { w.up(faults.ManagerA) })
	d.at(w.s.BJoins, "B up", func() { d.restart(faults.ManagerB) })
	for _, k := range w.s.Kills {
		d.at(k.At, faults.Name(k.Manager)+" killed", func() { w.down(k.Manager) })
		d.at(k.At+k.Down, faults.Name(k.Manager)+" restarts", func() { d.restart(k.Manager) })
	}
	changes := 0
	for _, st := range w.s.Steps {
		if st.What == faults.StepChange {
			changes++
		}
		d.at(st.At, st.What, d.step(st.What, changes+1))
	}
	spin, last := 0, time.Duration(-1)
	for {
		synctest.Wait()
		now := w.now()
		if now == last {
			if spin++; spin > maxSpin {
				d.livelock = fmt.Sprintf("more than %d driver rounds at %v", maxSpin, now)
				return d
			}
		} else {
			spin, last = 0, now
		}
		d.runDue(now)
		d.passes(now)
		if d.done(now) {
			return d
		}
		d.sleep(now)
	}
}

func (d *driver) at(at time.Duration, what string, do func()) {
	d.events = append(d.events, timed{at: at, what: what, do: do})
	sort.SliceStable(d.events, func(i, j int) bool { return d.events[i].at < d.events[j].at })
}

// restart brings manager m up unless it is up or has not joined yet.
func (d *driver) restart(m int) {
	if m == faults.ManagerB && d.w.now() < d.w.s.BJoins {
		return
	}
	d.w.mu.Lock()
	up := d.w.inc[m] != nil
	if !up && d.w.lives[m] > 0 {
		d.w.restarts++
	}
	d.w.mu.Unlock()
	if !up {
		d.w.up(m)
	}
}

func (d *driver) runDue(now time.Duration) {
	for len(d.events) > 0 && d.events[0].at <= now {
		e := d.events[0]
		d.events = d.events[1:]
		d.w.tr.add("schedule: %s", e.what)
		e.do()
	}
}

// passes runs a pass of each live manager whose cache changed or whose requeue is due; a
// manager that crashed in its pass goes down and comes back after crashDown.
func (d *driver) passes(now time.Duration) {
	for m := range d.w.inc {
		d.w.mu.Lock()
		inc := d.w.inc[m]
		run := inc != nil && !inc.dead && (inc.dirty || (inc.due > 0 && inc.due <= now))
		d.w.mu.Unlock()
		if !run {
			continue
		}
		d.w.pass(inc)
		for i := range d.w.inc {
			d.w.mu.Lock()
			cur := d.w.inc[i]
			dead := cur != nil && cur.dead
			d.w.mu.Unlock()
			if dead {
				d.w.down(i)
				d.at(now+crashDown, faults.Name(i)+" restarts after its crash", func() { d.restart(i) })
			}
		}
	}
}

// done reports the end of the schedule: converged and quiet since, or past the bound.
func (d *driver) done(now time.Duration) bool {
	settle := d.w.s.Settle
	if now >= settle+convergeBound {
		return true
	}
	if now < settle || len(d.events) > 0 {
		return false
	}
	if d.w.converged() == "" {
		if d.convergedAt < 0 {
			d.convergedAt = now
			d.w.tr.add("converged")
		}
		return now >= d.convergedAt+quiet
	}
	d.convergedAt = -1
	return false
}

// sleep waits on the bubble's clock until the next thing due, or an event a cache applied.
func (d *driver) sleep(now time.Duration) {
	next := d.w.s.Settle + convergeBound
	if d.convergedAt >= 0 {
		next = min(next, d.convergedAt+quiet)
	}
	if now < d.w.s.Settle {
		next = min(next, d.w.s.Settle)
	}
	if len(d.events) > 0 {
		next = min(next, d.events[0].at)
	}
	d.w.mu.Lock()
	for _, inc := range d.w.inc {
		if inc == nil || inc.dead {
			continue
		}
		if inc.dirty {
			next = now
		}
		if inc.due > 0 {
			next = min(next, max(inc.due, now))
		}
	}
	d.w.mu.Unlock()
	if next <= now {
		return
	}
	t := time.NewTimer(next - now)
	defer t.Stop()
	select {
	case <-t.C:
	case <-d.w.wake:
	}
}

// step is what a person does: change the variables, pause, unpause, delete.
func (d *driver) step(what string, size int) func() {
	w := d.w
	return func() {
		ctx := w.t.Context()
		tc := &infrav1.TerraformCluster{}
		if err := w.api.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c1"}, tc); err != nil {
			w.tr.add("person: %s: %v", what, err)
			return
		}
		if what == faults.StepDelete {
			w.tr.add("person: delete: %s", outcome(w.api.Delete(ctx, tc)))
			return
		}
		base := tc.DeepCopy()
		switch what {
		case faults.StepChange:
			tc.Spec.Variables = &runtime.RawExtension{Raw: fmt.Appendf(nil, `{"size":%d}`, size)}
		case faults.StepPause:
			if tc.Annotations == nil {
				tc.Annotations = map[string]string{}
			}
			tc.Annotations[infrav1.PausedAnnotation] = "true"
		case faults.StepUnpause:
			delete(tc.Annotations, infrav1.PausedAnnotation)
		}
		err := w.api.Patch(ctx, tc, client.MergeFrom(base))
		w.tr.add("person: %s: %s", what, outcome(err))
		if err == nil && what == faults.StepChange {
			w.mu.Lock()
			w.changedAt = parseRV(tc.ResourceVersion)
			w.mu.Unlock()
		}
	}
}

// converged is "" when the object is where its schedule leaves it: gone (deleted) or Ready,
// idle and unpaused, with no unfinished Job; else what is missing.
func (w *schedRun) converged() string {
	ctx := w.t.Context()
	l := &batchv1.JobList{}
	if err := w.api.List(ctx, l, client.InNamespace(ns)); err != nil {
		return err.Error()
	}
	for i := range l.Items {
		if !jobstatus.Finished(&l.Items[i]) {
			return "Job " + l.Items[i].Name + " unfinished"
		}
	}
	tc := &infrav1.TerraformCluster{}
	err := w.api.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c1"}, tc)
	switch {
	case w.s.Deleted() && apierrors.IsNotFound(err):
		return ""
	case w.s.Deleted():
		return fmt.Sprintf("not gone (%v; finalizers %v)", outcome(err), tc.Finalizers)
	case err != nil:
		return err.Error()
	case tc.Status.ActiveJob != nil:
		return "status.activeJob " + tc.Status.ActiveJob.Name
	}
	if c := apimeta.FindStatusCondition(tc.Status.Conditions, "Ready"); c == nil || c.Status != "True" {
		return fmt.Sprintf("not Ready (%v)", c)
	}
	return w.appliedSinceChange()
}

// appliedSinceChange is "" when no input changed, or an apply Job created after the last
// change completed (its first version in the write stream is newer than the change).
func (w *schedRun) appliedSinceChange() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.changedAt == 0 {
		return ""
	}
	created := map[string]uint64{}
	for _, h := range w.history {
		j, ok := h.obj.(*batchv1.Job)
		if !ok || j.Labels[infrav1.OperationLabel] != string(infrav1.OperationApply) {
			continue
		}
		key := string(j.UID)
		if _, seen := created[key]; !seen {
			created[key] = h.rv
		}
		if created[key] > w.changedAt && !h.deleted && jobstatus.Finished(j) && j.Status.Succeeded > 0 {
			return ""
		}
	}
	return fmt.Sprintf("no apply created after the input change (rv %d) completed", w.changedAt)
}

// judge replays the store's write stream through the monitor's checks (I1-I5, I7) and the
// simulator's own (S1: the finalizer never dropped while the state holds resources), and
// reports convergence.
func (w *schedRun) judge(d *driver) schedOutcome {
	w.mu.Lock()
	hist := slices.Clone(w.history)
	out := schedOutcome{seed: w.s.Seed, restarts: w.restarts, faults: w.faultsN, denials: w.denials, bubble: w.now()}
	w.mu.Unlock()
	sort.SliceStable(hist, func(i, j int) bool { return hist[i].rv < hist[j].rv })
	rec := monitor.NewRecorder()
	for _, h := range hist {
		rec.Record(h.obj, h.deleted)
	}
	res := rec.Check(map[string]bool{ns: true})
	out.jobs = res.Jobs
	for _, v := range res.Violations {
		out.violations = append(out.violations, v.Text)
	}
	out.violations = append(out.violations, finalizerWhileState(hist)...)
	if d.livelock != "" {
		out.violations = append(out.violations, "livelock: "+d.livelock)
	}
	if d.convergedAt < 0 {
		out.unconverged = w.converged()
		if out.unconverged == "" {
			out.unconverged = "converged only at the bound"
		}
	}
	out.trace = w.tr.all()
	return out
}

// finalizerWhileState is S1: at no version does the object lose its finalizer (or vanish)
// while its state Secret records a managed resource.
func finalizerWhileState(hist []recorded) []string {
	resources := map[string]int{} // state Secret name -> managed resources it records
	had := false
	var out []string
	for _, h := range hist {
		switch o := h.obj.(type) {
		case *corev1.Secret:
			resources[o.Name] = 0
			if st, err := state.FromSecret(o); err == nil && !h.deleted {
				for _, r := range st.Resources {
					if r.Mode == "managed" {
						resources[o.Name]++
					}
				}
			}
		case *infrav1.TerraformCluster:
			has := !h.deleted && controllerutil.ContainsFinalizer(o, infrav1.Finalizer)
			secret := naming.StateSecretName(naming.StateSuffix(o.Namespace, infrav1.TerraformClusterKind, o.Name))
			if had && !has && resources[secret] > 0 {
				out = append(out, fmt.Sprintf("S1 at rv %d: %s/%s lost its finalizer while its state %s records %d managed resources", h.rv, o.Namespace, o.Name, secret, resources[secret]))
			}
			had = has
		}
	}
	return out
}
