package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
