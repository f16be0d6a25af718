package chaos_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// TestMonitorSeesDriftJobs checks the monitor's replay on a recorded history: a drift Job that
// starts while an apply of the same object runs breaks I1, one that starts against a state
// Secret holding no state breaks I7 unless its state channel was told the lineage read before
// (then the channel refuses that state: counted, not a violation), and a drift Job after the
// apply ended breaks nothing. The soak relies on these checks to say that no drift check
// overlapped an apply or used a lost state.
func TestMonitorSeesDriftJobs(t *testing.T) {
	const ns, name = "mon", "c"
	owner := infrav1.TerraformClusterKind + "/" + ns + "/" + name
	uid := types.UID("uid-c")
	secret := naming.StateSecretName(naming.StateSuffix(ns, infrav1.TerraformClusterKind, name))
	object := fact{kind: factObject, ns: ns, name: name, owner: owner, uid: uid, blockMove: true, finalizer: true, applied: true}
	const lineage = "l-1"
	stateOf := func(has bool, lineage string) fact {
		return fact{kind: factState, ns: ns, name: secret, hasState: has, lineage: lineage}
	}
	state := func(has bool) fact { return stateOf(has, lineage) }
	job := func(jobName string, op infrav1.Operation, finished bool) fact {
		return fact{kind: factJob, ns: ns, name: jobName, owner: owner, ownerKind: infrav1.TerraformClusterKind, ownerName: name,
			ownerUID: uid, op: op, uid: types.UID("uid-" + jobName), finished: finished}
	}
	checked := func(f fact) fact { f.stateLineage = lineage; return f }
	replayOf := func(facts ...fact) replay {
		m := &monitor{last: map[string]fact{}}
		for i := range facts {
			facts[i].rv = uint64(i + 1)
			m.facts = append(m.facts, facts[i])
		}
		return m.replay(map[string]bool{ns: true})
	}
	texts := func(r replay) string {
		var out []string
		for _, v := range r.violations {
			out = append(out, v.text)
		}
		return strings.Join(out, "\n")
	}

	for _, tc := range []struct {
		name    string
		facts   []fact
		want    string // a violation that must be reported ("": none)
		refused int    // Jobs whose state channel refuses the state
	}{{
		name:  "drift next to a running apply",
		facts: []fact{object, state(true), job("j2", infrav1.OperationApply, false), job("j3", infrav1.OperationDrift, false)},
		want:  "I1 at rv 4: " + owner + " runs 2 Jobs at once",
	}, {
		name:  "apply next to a running drift check",
		facts: []fact{object, state(true), job("j2", infrav1.OperationDrift, false), job("j3", infrav1.OperationApply, false)},
		want:  "I1 at rv 4: " + owner + " runs 2 Jobs at once",
	}, {
		name:  "drift against a lost state",
		facts: []fact{object, state(true), state(false), job("j2", infrav1.OperationDrift, false)},
		want:  "I7 at rv 4: " + owner + " applied before but started Drift Job j2",
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
			got := texts(r)
			switch {
			case tc.want == "" && got != "":
				t.Fatalf("want no violation, got:\n%s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Fatalf("want a violation %q, got:\n%s", tc.want, got)
			}
			if r.refused != tc.refused {
				t.Fatalf("refused by the state channel: %d, want %d", r.refused, tc.refused)
			}
			if r.byOp[infrav1.OperationDrift] != 1 {
				t.Fatalf("drift Jobs counted: %d, want 1", r.byOp[infrav1.OperationDrift])
			}
		})
	}
}
