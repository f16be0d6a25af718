package monitor

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

const testNS, testName = "mon", "c"

var (
	testOwner = infrav1.TerraformClusterKind + "/" + testNS + "/" + testName
	testUID   = types.UID("uid-c")
)

// objectFactOf is the TerraformCluster mon/c, with block-move and its finalizer, never applied
// (so no I7 check needs its state).
func objectFactOf() fact {
	return fact{kind: factObject, ns: testNS, name: testName, owner: testOwner, uid: testUID, blockMove: true, finalizer: true}
}

// jobFact is a version of the Job jobName of mon/c.
func jobFact(jobName string, op infrav1.Operation, finished bool) fact {
	return fact{kind: factJob, ns: testNS, name: jobName, owner: testOwner, ownerKind: infrav1.TerraformClusterKind, ownerName: testName,
		ownerUID: testUID, op: op, uid: types.UID("uid-" + jobName), finished: finished}
}

// deleted is f deleted.
func deleted(f fact) fact { f.deleted = true; return f }

// podFact is a version of the pod podName of the Job jobName, linked to it by the controller's
// UID label when byUID, else by the job-name label alone.
func podFact(podName, jobName string, byUID, terminal bool) fact {
	f := fact{kind: factPod, ns: testNS, name: podName, job: jobName, uid: types.UID("uid-" + podName), finished: terminal}
	if byUID {
		f.jobUID = types.UID("uid-" + jobName)
	}
	return f
}

// replayOf replays facts, numbered from version 1, in namespace mon.
func replayOf(facts ...fact) Result {
	for i := range facts {
		facts[i].rv = uint64(i + 1)
	}
	return replay(facts, nil, map[string]bool{testNS: true})
}

func texts(r Result) string {
	var out []string
	for _, v := range r.Violations {
		out = append(out, v.Text)
	}
	return strings.Join(out, "\n")
}

func expect(t *testing.T, r Result, want string) {
	t.Helper()
	got := texts(r)
	switch {
	case want == "" && got != "":
		t.Fatalf("want no violation, got:\n%s", got)
	case want != "" && !strings.Contains(got, want):
		t.Fatalf("want a violation %q, got:\n%s", want, got)
	}
}

// TestMonitorSeesDriftJobs checks the replay on a recorded history: a drift Job that starts
// while an apply of the same object runs breaks I1, one that starts against a state Secret
// holding no state breaks I7 unless its state channel was told the lineage read before (then
// the channel refuses that state: counted, not a violation), and a drift Job after the apply
// ended breaks nothing. The soak relies on these checks to say that no drift check overlapped
// an apply or used a lost state.
func TestMonitorSeesDriftJobs(t *testing.T) {
	secret := naming.StateSecretName(naming.StateSuffix(testNS, infrav1.TerraformClusterKind, testName))
	object := objectFactOf()
	object.applied = true
	const lineage = "l-1"
	stateOf := func(has bool, lineage string) fact {
		return fact{kind: factState, ns: testNS, name: secret, hasState: has, lineage: lineage}
	}
	state := func(has bool) fact { return stateOf(has, lineage) }
	job := jobFact
	checked := func(f fact) fact { f.stateLineage = lineage; return f }

	for _, tc := range []struct {
		name    string
		facts   []fact
		want    string // a violation that must be reported ("": none)
		refused int    // Jobs whose state channel refuses the state
	}{{
		name:  "drift next to a running apply",
		facts: []fact{object, state(true), job("j2", infrav1.OperationApply, false), job("j3", infrav1.OperationDrift, false)},
		want:  "I1 at rv 4: " + testOwner + " runs 2 Jobs at once",
	}, {
		name:  "apply next to a running drift check",
		facts: []fact{object, state(true), job("j2", infrav1.OperationDrift, false), job("j3", infrav1.OperationApply, false)},
		want:  "I1 at rv 4: " + testOwner + " runs 2 Jobs at once",
	}, {
		name:  "drift against a lost state",
		facts: []fact{object, state(true), state(false), job("j2", infrav1.OperationDrift, false)},
		want:  "I7 at rv 4: " + testOwner + " applied before but started Drift Job j2",
	}, {
		name:    "drift against a lost state, its channel told the lineage read before",
		facts:   []fact{object, state(true), state(false), checked(job("j2", infrav1.OperationDrift, false))},
		refused: 1,
	}, {
		name:    "drift against a replaced state, its channel told the lineage read before",
		facts:   []fact{object, state(true), stateOf(true, "l-2"), checked(job("j2", infrav1.OperationDrift, false))},
		refused: 1,
	}, {
		name:  "drift with the state it was told",
		facts: []fact{object, state(true), checked(job("j2", infrav1.OperationDrift, false))},
	}, {
		name: "drift after the apply ended",
		facts: []fact{object, state(true), job("j2", infrav1.OperationApply, false), job("j2", infrav1.OperationApply, true),
			job("j3", infrav1.OperationDrift, false), job("j3", infrav1.OperationDrift, true)},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := replayOf(tc.facts...)
			expect(t, r, tc.want)
			if r.Refused != tc.refused {
				t.Fatalf("refused by the state channel: %d, want %d", r.Refused, tc.refused)
			}
			if r.ByOp[infrav1.OperationDrift] != 1 {
				t.Fatalf("drift Jobs counted: %d, want 1", r.ByOp[infrav1.OperationDrift])
			}
		})
	}
}

// TestMonitorCountsPodsOfEndedJobs checks that a run lasts until its Job has ended and every
// pod of it is terminal or deleted: a Job deleted with --cascade=orphan, or whose pod sits on a
// lost node, still runs while that pod does.
func TestMonitorCountsPodsOfEndedJobs(t *testing.T) {
	object := objectFactOf()
	apply := func(name string) fact { return jobFact(name, infrav1.OperationApply, false) }
	const i1 = "I1 at rv 5: " + "TerraformCluster/mon/c runs 2 Jobs at once: [j1 j2]"

	for _, tc := range []struct {
		name  string
		facts []fact
		want  string // a violation that must be reported ("": none)
	}{{
		name: "Job deleted while its pod runs, then a second apply",
		facts: []fact{object, apply("j1"), podFact("p1", "j1", true, false), deleted(apply("j1")),
			apply("j2"), podFact("p1", "j1", true, true)},
		want: i1,
	}, {
		name: "Job deleted while its pod runs, the pod linked by job name only",
		facts: []fact{object, apply("j1"), podFact("p1", "j1", false, false), deleted(apply("j1")),
			apply("j2"), podFact("p1", "j1", false, true)},
		want: i1,
	}, {
		name: "Job finished while its pod still runs (lost node), then a second apply",
		facts: []fact{object, apply("j1"), podFact("p1", "j1", true, false), jobFact("j1", infrav1.OperationApply, true),
			apply("j2")},
		want: i1,
	}, {
		name: "Job deleted while its pod runs, the second apply after the pod went terminal",
		facts: []fact{object, apply("j1"), podFact("p1", "j1", true, false), deleted(apply("j1")),
			podFact("p1", "j1", true, true), apply("j2")},
	}, {
		name: "Job deleted while its pod runs, the second apply after the pod was deleted",
		facts: []fact{object, apply("j1"), podFact("p1", "j1", true, false), deleted(apply("j1")),
			deleted(podFact("p1", "j1", true, false)), apply("j2")},
	}, {
		name: "the object loses block-move while the pod of its deleted Job runs",
		facts: []fact{object, apply("j1"), podFact("p1", "j1", true, false), deleted(apply("j1")),
			func() fact { f := objectFactOf(); f.blockMove = false; return f }()},
		want: "I2 at rv 5: " + testOwner + " lacks block-move while a Job runs",
	}, {
		name: "a mutating cluster Job next to the pod of a deleted machine Job",
		facts: func() []fact {
			cluster := func(f fact) fact { f.cluster = "cl"; return f }
			m := cluster(apply("m1"))
			m.ownerKind, m.owner = infrav1.TerraformMachineKind, infrav1.TerraformMachineKind+"/mon/m"
			return []fact{m, podFact("p1", "m1", true, false), deleted(m), cluster(apply("c1"))}
		}(),
		want: "I5 at rv 4: cluster mon/cl runs mutating Job(s) [c1] while its members run [m1]",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := replayOf(tc.facts...)
			expect(t, r, tc.want)
		})
	}
}

// TestMonitorWithoutPods checks the replay of Jobs that have no pods (envtest's simulated
// Jobs): a Job runs from its creation until it finishes or is deleted, as before pods counted.
func TestMonitorWithoutPods(t *testing.T) {
	object := objectFactOf()
	apply := func(name string) fact { return jobFact(name, infrav1.OperationApply, false) }
	for _, tc := range []struct {
		name  string
		facts []fact
		want  string
		jobs  int // Jobs counted
	}{{
		name:  "two applies at once",
		facts: []fact{object, apply("j1"), apply("j2")},
		want:  "I1 at rv 3: " + testOwner + " runs 2 Jobs at once: [j1 j2]",
		jobs:  2,
	}, {
		name:  "an apply after the first was deleted",
		facts: []fact{object, apply("j1"), deleted(apply("j1")), apply("j2")},
		jobs:  2,
	}, {
		name:  "an apply after the first finished",
		facts: []fact{object, apply("j1"), jobFact("j1", infrav1.OperationApply, true), apply("j2")},
		jobs:  2,
	}, {
		name: "activeJob cleared while the Job runs",
		facts: []fact{func() fact { f := objectFactOf(); f.activeJob = "j1"; return f }(), apply("j1"),
			objectFactOf()},
		want: "I4 at rv 3: " + testOwner + " cleared status.activeJob j1 while it runs",
		jobs: 1,
	}, {
		name:  "the object loses its finalizer while a Job runs",
		facts: []fact{object, apply("j1"), func() fact { f := objectFactOf(); f.finalizer = false; return f }()},
		want:  "I3 at rv 3: " + testOwner + " lacks its finalizer while a Job runs",
		jobs:  1,
	}, {
		name:  "the object goes while a Job runs",
		facts: []fact{object, apply("j1"), deleted(objectFactOf())},
		want:  "I3 at rv 3: " + testOwner + " is gone while a Job runs",
		jobs:  1,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := replayOf(tc.facts...)
			expect(t, r, tc.want)
			if r.Jobs != tc.jobs {
				t.Fatalf("Jobs counted: %d, want %d", r.Jobs, tc.jobs)
			}
		})
	}
}

// TestMonitorReportsGaps checks that a watch that may have missed events is a violation.
func TestMonitorReportsGaps(t *testing.T) {
	r := replay(nil, []string{"watch *v1.JobList from version 7: gone"}, nil)
	expect(t, r, "monitor: events may be missing: watch *v1.JobList from version 7: gone")
}
