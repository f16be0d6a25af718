package webhooks_test

import (
	"slices"
	"testing"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// TestDiffIdentityLetsClusterctlMoveReplaceTheSourceAnnotations: clusterctl move marks the source
// copy it deletes with a JSON patch that replaces every annotation by delete-for-move alone
// (DiffRecords judges the lineage record with the manager's other records).
// That removal of the lineage record is no change of it (the record lives on in the target
// copy, and a missing record can only hold the object); setting or changing it, with or
// without delete-for-move, still is.
func TestDiffIdentityLetsClusterctlMoveReplaceTheSourceAnnotations(t *testing.T) {
	marks := func(kv ...string) *webhooks.Marks {
		m := &webhooks.Marks{}
		m.Annotations = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m.Annotations[kv[i]] = kv[i+1]
		}
		return m
	}
	const rec, seen, move = infrav1.StateLineageAnnotation, infrav1.StateLineageSeenAnnotation, infrav1.DeleteForMoveAnnotation
	const first = infrav1.StateFirstRunAnnotation
	for _, c := range []struct {
		name     string
		old, new *webhooks.Marks
		changed  bool
	}{
		{"clusterctl move's patch of the source copy", marks(rec, "a", seen, "b", infrav1.AppliedHashAnnotation, "h"), marks(move, ""), false},
		{"removing the record without a move", marks(rec, "a"), marks(), true},
		{"changing the record during a move", marks(rec, "a"), marks(move, "", rec, "b"), true},
		{"setting the record during a move", marks(), marks(move, "", rec, "b"), true},
		{"changing the record", marks(rec, "a"), marks(rec, "b"), true},
		{"leaving it as it is", marks(rec, "a"), marks(rec, "a", infrav1.PausedAnnotation, ""), false},
		// The first-run mark claims the state found after it (docs/state.md): part of the record.
		{"setting the first-run mark", marks(), marks(first, "uid/job-1"), true},
		{"changing the first-run mark", marks(first, "u0/job-1"), marks(first, "u1/job-1"), true},
		{"clusterctl move's patch drops the first-run mark", marks(first, "u0/job-1"), marks(move, ""), false},
	} {
		recs := webhooks.DiffRecords(c.old, c.new).Records
		got := slices.ContainsFunc(recs, func(k string) bool { return k == rec || k == seen || k == first })
		if got != c.changed {
			t.Errorf("%s: lineage record changed = %v (records %q), want %v", c.name, got, recs, c.changed)
		}
	}
}
