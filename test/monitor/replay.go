package monitor

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// Violation is one broken invariant: the object ("Kind/namespace/name", or "namespace/cluster"
// for I5), its namespace, and what broke.
type Violation struct {
	Owner, Namespace string
	Text             string
}

func (v Violation) String() string { return v.Text }

// Result is the outcome of a check: the violations, and the Jobs seen.
type Result struct {
	Violations []Violation
	// Jobs counts the Jobs created (by UID), ByOp by operation.
	Jobs int
	ByOp map[infrav1.Operation]int
	// Failed counts the recorded versions of Jobs that carry a Failed condition.
	Failed int
	// Refused counts the Jobs created against a state that was lost or replaced after the
	// controller read it, whose state channel refuses that state (I7 kept at the point of use).
	Refused int
}

// run is one Job of an object, from its creation until it has ended and no pod of it runs.
type run struct {
	owner, kind, ns, name, cluster string
	op                             infrav1.Operation
	// ended: the Job carries a Complete or Failed condition, or is deleted.
	ended bool
}

type objState struct {
	exists, blockMove, finalizer, applied bool
	uid                                   types.UID
	activeJob                             string
}

// replayer holds what the replay knows at one version.
type replayer struct {
	out     Result
	runs    map[types.UID]*run               // Job UID -> the Job
	byName  map[string]types.UID             // namespace/name -> the latest Job of that name
	livePod map[types.UID]map[types.UID]bool // Job UID -> its pods neither terminal nor deleted
	podJob  map[types.UID]types.UID          // pod UID -> its Job's UID ("": none known)
	running map[string]map[types.UID]string  // owner -> its running Jobs (UID -> name)
	// mutating holds the running mutating Jobs, by UID.
	mutating map[types.UID]mutatingJob
	objs     map[string]*objState
	states   map[string]*string // namespace/secret -> the lineage of the state it holds (nil: none)
}

// replay checks a recorded history, sorted by resourceVersion, of namespaces; gaps are the
// watches that may have missed events.
func replay(facts []fact, gaps []string, namespaces map[string]bool) Result {
	r := &replayer{
		out:      Result{ByOp: map[infrav1.Operation]int{}},
		runs:     map[types.UID]*run{},
		byName:   map[string]types.UID{},
		livePod:  map[types.UID]map[types.UID]bool{},
		podJob:   map[types.UID]types.UID{},
		running:  map[string]map[types.UID]string{},
		mutating: map[types.UID]mutatingJob{},
		objs:     map[string]*objState{},
		states:   map[string]*string{},
	}
	for _, g := range gaps {
		r.violate(Violation{Text: "monitor: events may be missing: " + g})
	}
	for _, f := range facts {
		if !namespaces[f.ns] {
			continue
		}
		switch f.kind {
		case factState:
			if f.deleted || !f.hasState {
				r.states[f.ns+"/"+f.name] = nil
			} else {
				r.states[f.ns+"/"+f.name] = &f.lineage
			}
		case factJob:
			r.job(f)
		case factPod:
			r.pod(f)
		case factObject:
			r.violate(object(f, r.running[f.owner], r.objs)...)
		}
	}
	return r.out
}

func (r *replayer) violate(v ...Violation) { r.out.Violations = append(r.out.Violations, v...) }

// job replays one version of a Job.
func (r *replayer) job(f fact) {
	// By UID: a re-created object's Jobs reuse the names of its first incarnation's.
	j := r.runs[f.uid]
	if j == nil {
		j = &run{}
		r.runs[f.uid] = j
		r.byName[f.ns+"/"+f.name] = f.uid
		r.out.Jobs++
		r.out.ByOp[f.op]++
		v, refused := verifyState(f, r.objs[f.owner], r.states)
		r.violate(v...)
		if refused {
			r.out.Refused++
		}
	}
	if f.failed && !f.deleted {
		r.out.Failed++
	}
	if j.owner != "" && j.owner != f.owner { // its owner labels changed: it runs for its new owner
		delete(r.running[j.owner], f.uid)
	}
	*j = run{owner: f.owner, kind: f.ownerKind, ns: f.ns, name: f.name, cluster: f.cluster, op: f.op, ended: f.deleted || f.finished}
	r.settle(f.rv, f.uid, j)
}

// pod replays one version of a pod of a Job. A pod belongs to the Job whose UID its
// controller-uid label names (the Job controller sets it), else to the latest Job of its
// job-name label's name when the pod is first seen. It keeps its Job running until it is
// Succeeded, Failed or deleted; a pod on a lost node stays non-terminal until it is deleted.
func (r *replayer) pod(f fact) {
	jobUID, known := r.podJob[f.uid]
	if !known {
		jobUID = f.jobUID
		if jobUID == "" {
			jobUID = r.byName[f.ns+"/"+f.job]
		}
		r.podJob[f.uid] = jobUID
	}
	if jobUID == "" {
		return
	}
	live := r.livePod[jobUID]
	switch {
	case f.deleted:
		delete(live, f.uid)
		delete(r.podJob, f.uid)
	case f.finished:
		delete(live, f.uid)
	default:
		if live == nil {
			live = map[types.UID]bool{}
			r.livePod[jobUID] = live
		}
		live[f.uid] = true
	}
	if j := r.runs[jobUID]; j != nil {
		r.settle(f.rv, jobUID, j)
	}
}

// settle records whether the Job uid runs after a change of it or of its pods, and checks its
// object's invariants at that version.
func (r *replayer) settle(rv uint64, uid types.UID, j *run) {
	if r.running[j.owner] == nil {
		r.running[j.owner] = map[types.UID]string{}
	}
	if !j.ended || len(r.livePod[uid]) > 0 {
		r.running[j.owner][uid] = j.name
		if j.op.Mutating() {
			r.mutating[uid] = mutatingJob{namespace: j.ns, cluster: j.cluster, kind: j.kind, name: j.name}
		}
	} else {
		delete(r.running[j.owner], uid)
		delete(r.mutating, uid)
	}
	r.violate(verify(rv, j.owner, r.running[j.owner], r.objs[j.owner])...)
	r.violate(verifyGate(rv, r.mutating)...)
}

// object replays one version of a reconciled object.
func object(f fact, run map[types.UID]string, objs map[string]*objState) []Violation {
	prev := objs[f.owner]
	next := &objState{exists: !f.deleted, blockMove: f.blockMove, finalizer: f.finalizer, applied: f.applied, uid: f.uid, activeJob: f.activeJob}
	objs[f.owner] = next
	var out []Violation
	if prev != nil && prev.activeJob != "" && next.activeJob != prev.activeJob && runsNamed(run, prev.activeJob) {
		out = append(out, Violation{Owner: f.owner, Namespace: f.ns,
			Text: fmt.Sprintf("I4 at rv %d: %s cleared status.activeJob %s while it runs", f.rv, f.owner, prev.activeJob)})
	}
	return append(out, verify(f.rv, f.owner, run, next)...)
}

// runsNamed reports whether a Job named name is among run.
func runsNamed(run map[types.UID]string, name string) bool {
	for _, n := range run {
		if n == name {
			return true
		}
	}
	return false
}

// names returns the names of the running Jobs, sorted.
func names(run map[types.UID]string) []string {
	out := make([]string, 0, len(run))
	for _, n := range run {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func verify(rv uint64, owner string, run map[types.UID]string, o *objState) []Violation {
	if len(run) == 0 {
		return nil
	}
	ns := strings.Split(owner, "/")[1]
	v := func(format string, args ...any) Violation {
		return Violation{Owner: owner, Namespace: ns, Text: fmt.Sprintf(format, args...)}
	}
	var out []Violation
	if len(run) > 1 {
		out = append(out, v("I1 at rv %d: %s runs %d Jobs at once: %v", rv, owner, len(run), names(run)))
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
func verifyState(f fact, o *objState, states map[string]*string) (v []Violation, refused bool) {
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
	return []Violation{{Owner: f.owner, Namespace: f.ns,
		Text: fmt.Sprintf("I7 at rv %d: %s applied before but started %s Job %s while its state Secret %s holds no state, and the Job's state channel checks no lineage", f.rv, f.owner, f.op, f.name, secret)}}, false
}

// mutatingJob is a running apply, destroy or restore Job and the Cluster it belongs to.
type mutatingJob struct{ namespace, cluster, kind, name string }

// verifyGate checks I5: no mutating Job of a TerraformCluster runs while a mutating Job of one
// of its Cluster's machines or pools runs.
func verifyGate(rv uint64, mutating map[types.UID]mutatingJob) []Violation {
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
	var out []Violation
	for c, cj := range clusterJobs {
		if mj := memberJobs[c]; len(mj) > 0 {
			sort.Strings(cj)
			sort.Strings(mj)
			out = append(out, Violation{Owner: c, Namespace: strings.Split(c, "/")[0],
				Text: fmt.Sprintf("I5 at rv %d: cluster %s runs mutating Job(s) %v while its members run %v", rv, c, cj, mj)})
		}
	}
	return out
}
