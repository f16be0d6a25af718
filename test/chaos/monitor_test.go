package chaos_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// monitor records, through watches on the API server, every change of every Job, of every
// reconciled object of the three kinds and of every Terraform state Secret, then replays them
// in resourceVersion order (etcd's global revision) and checks I1-I5 and I7 of ARCHITECTURE.md
// at every step. A Job runs from its creation until it carries a Complete or Failed condition
// (jobstatus.Finished: the test's kubelet ends the pod before the Job), or is deleted.
//
// It keeps one small fact per change that matters to the checks (a status write that changes
// none of block-move, the finalizer, status.activeJob, the applied hash or existence is
// dropped), so it can watch a soak of thousands of objects. A watch the API server closes is
// resumed from the last version seen; a gap it cannot resume is reported as a violation.
type monitor struct {
	keep    func(namespace string) bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	streams []*stream

	mu    sync.Mutex
	facts []fact
	last  map[string]fact
	gaps  []string
}

// stream is one watch of the monitor and the last version it delivered.
type stream struct {
	list   func() client.ObjectList
	lastRV atomic.Uint64
}

// factKind says what a fact is about.
type factKind int

const (
	factJob factKind = iota
	factObject
	factState
)

// fact is what the checks need of one version of one object.
type fact struct {
	rv       uint64
	kind     factKind
	ns, name string
	deleted  bool

	// Jobs: the owner ("Kind/namespace/name"), the owner's UID, the operation, the Cluster.
	owner, ownerKind, ownerName string
	ownerUID                    types.UID
	op                          infrav1.Operation
	cluster                     string
	finished, failed            bool
	// stateLineage is the lineage the Job's state channel serves alone (jobs.StateLineageOf).
	stateLineage string

	// Reconciled objects (and Jobs: the Job's own UID).
	uid                           types.UID
	blockMove, finalizer, applied bool
	activeJob                     string

	// State Secrets: the Secret holds a state (absent, empty or unreadable: false), and its
	// lineage.
	hasState bool
	lineage  string
}

// same reports whether two facts of one object are equal for the checks.
func (f fact) same(g fact) bool {
	f.rv, g.rv = 0, 0
	return f == g
}

// violation is one broken invariant: the object (or "ns/cluster" for I5) and what broke.
type violation struct {
	owner, namespace string
	text             string
}

func (v violation) String() string { return v.text }

// replay is the outcome of a check: the violations, and the Jobs seen by operation.
type replay struct {
	violations []violation
	jobs       int
	byOp       map[infrav1.Operation]int
	failed     int
	// refused counts the Jobs created against a state that was lost or replaced after the
	// controller read it, whose state channel refuses that state (I7 kept at the point of use).
	refused int
}

// startMonitor records every namespace (check filters).
func startMonitor() *monitor {
	GinkgoHelper()
	return startMonitorFor(func(string) bool { return true })
}

// startMonitorFor records the namespaces keep accepts. Its watches start at the current
// version: objects of namespaces created afterwards are seen from their creation.
func startMonitorFor(keep func(string) bool) *monitor {
	GinkgoHelper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	Expect(err).NotTo(HaveOccurred())
	mctx, cancel := context.WithCancel(ctx)
	m := &monitor{keep: keep, cancel: cancel, last: map[string]fact{}}
	DeferCleanup(func() {
		cancel()
		m.wg.Wait()
	})
	for _, list := range []func() client.ObjectList{
		func() client.ObjectList { return &batchv1.JobList{} },
		func() client.ObjectList { return &infrav1.TerraformClusterList{} },
		func() client.ObjectList { return &infrav1.TerraformMachineList{} },
		func() client.ObjectList { return &infrav1.TerraformMachinePoolList{} },
		func() client.ObjectList { return &corev1.SecretList{} },
	} {
		s := &stream{list: list}
		// Start from the collection's current version, so nothing already there is replayed.
		l := list()
		Expect(wc.List(mctx, l, client.Limit(1))).To(Succeed())
		rv, err := strconv.ParseUint(l.GetResourceVersion(), 10, 64)
		Expect(err).NotTo(HaveOccurred())
		s.lastRV.Store(rv)
		m.streams = append(m.streams, s)
		m.wg.Add(1)
		go m.follow(mctx, wc, s)
	}
	return m
}

// follow watches one stream from its last version until ctx ends.
func (m *monitor) follow(ctx context.Context, wc client.WithWatch, s *stream) {
	defer m.wg.Done()
	for ctx.Err() == nil {
		from := strconv.FormatUint(s.lastRV.Load(), 10)
		w, err := wc.Watch(ctx, s.list(), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: from}})
		if err != nil {
			if ctx.Err() == nil {
				m.gap(fmt.Sprintf("watch %T from version %s: %v", s.list(), from, err))
			}
			return
		}
		if !m.consume(ctx, w, s) {
			w.Stop()
			return
		}
		w.Stop()
	}
}

// consume records the events of one watch; it returns false when the stream cannot go on.
func (m *monitor) consume(ctx context.Context, w watch.Interface, s *stream) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case ev, open := <-w.ResultChan():
			if !open {
				return true // the API server ended the watch: resume from the last version
			}
			if ev.Type == watch.Error {
				m.gap(fmt.Sprintf("watch %T after version %d: %v", s.list(), s.lastRV.Load(), ev.Object))
				return false
			}
			obj, ok := ev.Object.(client.Object)
			if !ok || ev.Type == watch.Bookmark {
				continue
			}
			rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
			if err != nil {
				continue
			}
			if m.keep(obj.GetNamespace()) {
				if f, ok := factOf(obj, rv, ev.Type == watch.Deleted); ok {
					m.record(f)
				}
			}
			s.lastRV.Store(rv)
		}
	}
}

func (m *monitor) gap(msg string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gaps = append(m.gaps, msg)
}

// record keeps f unless it changes nothing the checks look at.
func (m *monitor) record(f fact) {
	key := fmt.Sprintf("%d/%s/%s/%s", f.kind, f.ns, f.owner, f.name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if prev, ok := m.last[key]; ok && prev.same(f) {
		return
	}
	m.last[key] = f
	m.facts = append(m.facts, f)
}

// factOf reduces one version of a watched object to what the checks need; ok is false for
// objects the checks ignore (Secrets other than Terraform states).
func factOf(obj client.Object, rv uint64, deleted bool) (fact, bool) {
	f := fact{rv: rv, ns: obj.GetNamespace(), name: obj.GetName(), deleted: deleted}
	switch o := obj.(type) {
	case *batchv1.Job:
		f.kind = factJob
		f.uid = o.UID
		f.ownerKind = o.Labels[infrav1.OwnerKindLabel]
		for _, r := range o.OwnerReferences {
			f.ownerName, f.ownerUID = r.Name, r.UID
		}
		f.owner = f.ownerKind + "/" + o.Namespace + "/" + f.ownerName
		f.op = infrav1.Operation(o.Labels[infrav1.OperationLabel])
		f.cluster = o.Labels[infrav1.ClusterNameLabel]
		f.finished = terminal(o)
		f.failed = jobFailed(o)
		f.stateLineage = jobs.StateLineageOf(o)
		return f, true
	case *corev1.Secret:
		if !strings.HasPrefix(o.Name, naming.StateSecretName("")) {
			return f, false
		}
		f.kind = factState
		st, err := state.FromSecret(o)
		f.hasState = err == nil
		if f.hasState {
			f.lineage = st.Lineage
		}
		return f, true
	case *infrav1.TerraformCluster:
		return objectFact(f, infrav1.TerraformClusterKind, o, o.Status.ActiveJob), true
	case *infrav1.TerraformMachine:
		return objectFact(f, infrav1.TerraformMachineKind, o, o.Status.ActiveJob), true
	case *infrav1.TerraformMachinePool:
		return objectFact(f, infrav1.TerraformMachinePoolKind, o, o.Status.ActiveJob), true
	}
	return f, false
}

func objectFact(f fact, kind string, o client.Object, aj *infrav1.ActiveJob) fact {
	f.kind = factObject
	f.owner = kind + "/" + o.GetNamespace() + "/" + o.GetName()
	f.uid = o.GetUID()
	_, f.blockMove = o.GetAnnotations()[infrav1.BlockMoveAnnotation]
	f.applied = o.GetAnnotations()[infrav1.AppliedHashAnnotation] != ""
	f.finalizer = controllerutil.ContainsFinalizer(o, infrav1.Finalizer)
	if aj != nil {
		f.activeJob = aj.Name
	}
	return f
}

func jobFailed(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

type objState struct {
	exists, blockMove, finalizer, applied bool
	uid                                   types.UID
	activeJob                             string
}

// check makes sure every change made so far has been recorded (fence), stops the watches and
// replays the history of the given namespaces (created after the monitor started, so their
// whole history was watched); it returns the violations found and how many Jobs ran.
func (m *monitor) check(namespaces map[string]bool) (violations []string, jobs int) {
	GinkgoHelper()
	r := m.replayAll(namespaces)
	for _, v := range r.violations {
		violations = append(violations, v.String())
	}
	return violations, r.jobs
}

// replayAll is check with the whole outcome.
func (m *monitor) replayAll(namespaces map[string]bool) replay {
	GinkgoHelper()
	m.fence()
	m.cancel()
	m.wg.Wait()
	return m.replay(namespaces)
}

// fence writes one object of each watched type into a namespace of its own and waits until
// every watch has delivered it: a watch delivers in version order, so every earlier change has
// been recorded by then. The fence objects are not reconciled: call it with no manager running.
func (m *monitor) fence() {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "monitor-fence-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	spec := infrav1.TerraformSpec{Module: infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "m"}}}
	meta := func() metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns.Name, Name: "fence"} }
	fences := []client.Object{
		&batchv1.Job{ObjectMeta: meta(), Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "fence"}}}}}},
		&infrav1.TerraformCluster{ObjectMeta: meta(), Spec: infrav1.TerraformClusterSpec{TerraformSpec: spec}},
		&infrav1.TerraformMachine{ObjectMeta: meta(), Spec: infrav1.TerraformMachineSpec{TerraformSpec: spec}},
		&infrav1.TerraformMachinePool{ObjectMeta: meta(), Spec: infrav1.TerraformMachinePoolSpec{TerraformSpec: spec}},
		&corev1.Secret{ObjectMeta: meta()},
	}
	for i, o := range fences {
		Expect(k8s.Create(ctx, o)).To(Succeed())
		rv, err := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
		Expect(err).NotTo(HaveOccurred())
		s := m.streams[i]
		Eventually(s.lastRV.Load, "60s").Should(BeNumerically(">=", rv), "the monitor's watch of %T never delivered its fence", o)
	}
	for _, o := range fences {
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground)))).To(Succeed())
	}
}

// replay checks the recorded history of namespaces.
func (m *monitor) replay(namespaces map[string]bool) replay {
	m.mu.Lock()
	defer m.mu.Unlock()
	sort.SliceStable(m.facts, func(i, j int) bool { return m.facts[i].rv < m.facts[j].rv })
	out := replay{byOp: map[infrav1.Operation]int{}}
	for _, g := range m.gaps {
		out.violations = append(out.violations, violation{text: "monitor: events may be missing: " + g})
	}
	running := map[string]map[string]bool{} // owner -> running Job names
	mutating := map[string]mutatingJob{}    // namespace/job -> a running mutating Job
	objs := map[string]*objState{}
	states := map[string]*string{} // namespace/secret -> the lineage of the state it holds (nil: none)
	seen := map[string]bool{}
	for _, f := range m.facts {
		if !namespaces[f.ns] {
			continue
		}
		switch f.kind {
		case factState:
			if f.deleted || !f.hasState {
				states[f.ns+"/"+f.name] = nil
			} else {
				states[f.ns+"/"+f.name] = &f.lineage
			}
		case factJob:
			key := f.ns + "/" + f.name
			// By UID: a re-created object's Jobs reuse the names of its first incarnation's.
			if !seen[string(f.uid)] {
				seen[string(f.uid)] = true
				out.jobs++
				out.byOp[f.op]++
				v, refused := verifyState(f, objs[f.owner], states)
				out.violations = append(out.violations, v...)
				if refused {
					out.refused++
				}
			}
			if f.failed && !f.deleted {
				out.failed++
			}
			if running[f.owner] == nil {
				running[f.owner] = map[string]bool{}
			}
			if f.deleted || f.finished {
				delete(running[f.owner], f.name)
				delete(mutating, key)
			} else {
				running[f.owner][f.name] = true
				if f.op.Mutating() {
					mutating[key] = mutatingJob{namespace: f.ns, cluster: f.cluster, kind: f.ownerKind, name: f.name}
				}
			}
			out.violations = append(out.violations, verify(f.rv, f.owner, running[f.owner], objs[f.owner])...)
			out.violations = append(out.violations, verifyGate(f.rv, mutating)...)
		case factObject:
			out.violations = append(out.violations, object(f, running[f.owner], objs)...)
		}
	}
	return out
}

// object replays one version of a reconciled object.
func object(f fact, run map[string]bool, objs map[string]*objState) []violation {
	prev := objs[f.owner]
	next := &objState{exists: !f.deleted, blockMove: f.blockMove, finalizer: f.finalizer, applied: f.applied, uid: f.uid, activeJob: f.activeJob}
	objs[f.owner] = next
	var out []violation
	if prev != nil && prev.activeJob != "" && next.activeJob != prev.activeJob && run[prev.activeJob] {
		out = append(out, violation{owner: f.owner, namespace: f.ns,
			text: fmt.Sprintf("I4 at rv %d: %s cleared status.activeJob %s while it runs", f.rv, f.owner, prev.activeJob)})
	}
	return append(out, verify(f.rv, f.owner, run, next)...)
}

func verify(rv uint64, owner string, run map[string]bool, o *objState) []violation {
	if len(run) == 0 {
		return nil
	}
	ns := strings.Split(owner, "/")[1]
	v := func(format string, args ...any) violation {
		return violation{owner: owner, namespace: ns, text: fmt.Sprintf(format, args...)}
	}
	var out []violation
	if len(run) > 1 {
		out = append(out, v("I1 at rv %d: %s runs %d Jobs at once: %v", rv, owner, len(run), run))
	}
	if o == nil || !o.exists {
		return append(out, v("I3 at rv %d: %s is gone while a Job runs", rv, owner))
	}
	if !o.blockMove {
		out = append(out, v("I2 at rv %d: %s lacks block-move while a Job runs", rv, owner))
	}
	if !o.finalizer {
		out = append(out, v("I3 at rv %d: %s lacks its finalizer while a Job runs", rv, owner))
	}
	return out
}

// verifyState checks I7 when a Job is created: an object that has applied before (this
// incarnation carries the applied hash) runs no apply, plan or drift against a state Secret
// that holds no state. A restore is the way out of a lost state and is not checked.
//
// The controller reads the state live before it creates a Job, and a person can delete the
// Secret in between. Such a Job is no violation when its state channel is told a lineage the
// Secret no longer holds: the channel refuses the state at the Job's first request, so the run
// stops before it reads or writes anything (refused). A Job whose channel checks nothing (no
// lineage) against a lost state breaks I7.
func verifyState(f fact, o *objState, states map[string]*string) (v []violation, refused bool) {
	switch f.op {
	case infrav1.OperationApply, infrav1.OperationPlan, infrav1.OperationDrift:
	default:
		return nil, false
	}
	if f.deleted || f.finished || o == nil || !o.exists || o.uid != f.ownerUID || !o.applied {
		return nil, false
	}
	secret := naming.StateSecretName(naming.StateSuffix(f.ns, f.ownerKind, f.ownerName))
	held := states[f.ns+"/"+secret]
	if held != nil {
		return nil, f.stateLineage != "" && f.stateLineage != *held
	}
	if f.stateLineage != "" {
		return nil, true
	}
	return []violation{{owner: f.owner, namespace: f.ns,
		text: fmt.Sprintf("I7 at rv %d: %s applied before but started %s Job %s while its state Secret %s holds no state, and the Job's state channel checks no lineage", f.rv, f.owner, f.op, f.name, secret)}}, false
}

// mutatingJob is a running apply, destroy or restore Job and the Cluster it belongs to.
type mutatingJob struct{ namespace, cluster, kind, name string }

// verifyGate checks I5: no mutating Job of a TerraformCluster runs while a mutating Job of one
// of its Cluster's machines or pools runs.
func verifyGate(rv uint64, mutating map[string]mutatingJob) []violation {
	clusterJobs := map[string][]string{} // namespace/cluster -> running mutating cluster Jobs
	memberJobs := map[string][]string{}
	for _, j := range mutating {
		c := j.namespace + "/" + j.cluster
		if j.kind == infrav1.TerraformClusterKind {
			clusterJobs[c] = append(clusterJobs[c], j.name)
		} else {
			memberJobs[c] = append(memberJobs[c], j.name)
		}
	}
	var out []violation
	for c, cj := range clusterJobs {
		if mj := memberJobs[c]; len(mj) > 0 {
			sort.Strings(cj)
			sort.Strings(mj)
			out = append(out, violation{owner: c, namespace: strings.Split(c, "/")[0],
				text: fmt.Sprintf("I5 at rv %d: cluster %s runs mutating Job(s) %v while its members run %v", rv, c, cj, mj)})
		}
	}
	return out
}

func terminal(j *batchv1.Job) bool { return jobstatus.Finished(j) }
