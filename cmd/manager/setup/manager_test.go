package setup

import (
	"strings"
	"testing"
)

// TestShardsHaveTheirOwnLeader: two managers of different shards must not wait for each
// other's leader election, and a watch filter that is no label value is refused at start.
func TestShardsHaveTheirOwnLeader(t *testing.T) {
	ids := map[string]string{}
	for _, shard := range []string{"", "a", "b"} {
		mo, _, err := managerOptions(Options{WatchFilter: shard})
		if err != nil {
			t.Fatalf("shard %q: %v", shard, err)
		}
		if other, ok := ids[mo.LeaderElectionID]; ok {
			t.Errorf("shards %q and %q share the leader election Lease %s", other, shard, mo.LeaderElectionID)
		}
		ids[mo.LeaderElectionID] = shard
	}
	if _, _, err := managerOptions(Options{WatchFilter: "not a label value"}); err == nil || !strings.Contains(err.Error(), "--watch-filter") {
		t.Errorf("a watch filter that is no label value: err = %v, want a refusal naming --watch-filter", err)
	}
}
