package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

func TestRareCountersStartAtZeroForEveryLabelValue(t *testing.T) {
	for name, c := range map[string]struct {
		n    int
		want int
	}{
		"captf_guard_decisions_total":    {testutil.CollectAndCount(GuardDecisions), len(Guards) * len(GuardOutcomes)},
		"captf_state_locks_broken_total": {testutil.CollectAndCount(LocksBroken), len(kinds)},
		"captf_drift_detected_total":     {testutil.CollectAndCount(DriftDetected), len(kinds)},
	} {
		if c.n < c.want {
			t.Errorf("%s has %d series at start, want at least %d", name, c.n, c.want)
		}
	}
}

// failingReader fails every List with err.
type failingReader struct {
	client.Reader
	err error
}

func (r failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return r.err
}

func TestObjectsReportsNothingWithoutInformersAndLogsRealErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		err    error
		logged bool
	}{
		"a standby (no informer)": {&cache.ErrResourceNotCached{}, false},
		"the cache failed":        {errors.New("boom"), true},
	} {
		t.Run(name, func(t *testing.T) {
			var logs []string
			o := &Objects{Cache: failingReader{err: tc.err}, Log: funcr.New(func(_, args string) { logs = append(logs, args) }, funcr.Options{})}
			if n := testutil.CollectAndCount(o); n != 0 {
				t.Errorf("%d series from a cache that cannot list", n)
			}
			if got := len(logs) > 0 && strings.Contains(strings.Join(logs, "\n"), "collect objects gauge"); got != tc.logged {
				t.Errorf("logged %v, want %v: %q", got, tc.logged, logs)
			}
		})
	}
}

// listReader lists the given TerraformMachines and no object of the other kinds.
type listReader struct {
	client.Reader
	machines []infrav1.TerraformMachine
}

func (r listReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	if l, ok := list.(*infrav1.TerraformMachineList); ok {
		l.Items = r.machines
	}
	return nil
}

func TestObjectsCountsTheObjectsWhoseReplicaIsBehind(t *testing.T) {
	machine := func(name string, conds ...metav1.Condition) infrav1.TerraformMachine {
		m := infrav1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Name: name}}
		m.Status.Conditions = conds
		return m
	}
	o := &Objects{Cache: listReader{machines: []infrav1.TerraformMachine{
		machine("behind", metav1.Condition{Type: infrav1.StateReplicatedCondition, Status: metav1.ConditionFalse, Reason: infrav1.ReplicaUnavailableReason}),
		machine("replicated", metav1.Condition{Type: infrav1.StateReplicatedCondition, Status: metav1.ConditionTrue, Reason: infrav1.StateReplicatedReason}),
		machine("no-replica"),
	}}}
	want := `
# HELP captf_state_replica_behind Objects whose last state replication failed (StateReplicated False), by kind.
# TYPE captf_state_replica_behind gauge
captf_state_replica_behind{kind="TerraformCluster"} 0
captf_state_replica_behind{kind="TerraformMachine"} 1
captf_state_replica_behind{kind="TerraformMachinePool"} 0
`
	if err := testutil.CollectAndCompare(o, strings.NewReader(want), "captf_state_replica_behind"); err != nil {
		t.Fatal(err)
	}
}
