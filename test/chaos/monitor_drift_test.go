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
// Secret holding no state breaks I7, and a drift Job after the apply ended breaks nothing. The
// soak relies on these checks to say that no drift check overlapped an apply.
func TestMonitorSeesDriftJobs(t *testing.T) {
	const ns, name = "mon", "c"
	owner := infrav1.TerraformClusterKind + "/" + ns + "/" + name
	uid := types.UID("uid-c")
	secret := naming.StateSecretName(naming.StateSuffix(ns, infrav1.TerraformClusterKind, name))
	object := fact{kind: factObject, ns: ns, name: name, owner: owner, uid: uid, blockMove: true, finalizer: true, applied: true}
	state := func(has bool) fact { return fact{kind: factState, ns: ns, name: secret, hasState: has} }
	job := func(jobName string, op infrav1.Operation, finished bool) fact {
		return fact{kind: factJob, ns: ns, name: jobName, owner: owner, ownerKind: infrav1.TerraformClusterKind, ownerName: name,
			ownerUID: uid, op: op, uid: types.UID("uid-" + jobName), finished: finished}
	}
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
		name  string
		facts []fact
		want  string // a violation that must be reported ("": none)
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
			if r.byOp[infrav1.OperationDrift] != 1 {
				t.Fatalf("drift Jobs counted: %d, want 1", r.byOp[infrav1.OperationDrift])
			}
		})
	}
}
