package decide

import (
	"sort"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// HistoryCandidate is one of the object's finished Jobs, as the pruning rule sees it.
type HistoryCandidate struct {
	Name      string
	Seq       int64
	Operation infrav1.Operation
	Succeeded bool
	// Counted: the Job's bookkeeping is done (its run sequence is below the object's).
	Counted bool
	// Finished: the Job carries Complete or Failed (jobstatus.Finished).
	Finished bool
	// Foreign: another incarnation's Job (never pruned by this object).
	Foreign bool
}

// JobsToPrune returns the Jobs to delete so that, per operation, at most keepSucceeded
// successful and keepFailed unsuccessful Jobs stay, the newest ones. It never picks a Job
// that has not finished, one not counted yet, or another incarnation's. It is pure; the caller
// still checks each pick's pods live and deletes with preconditions.
func JobsToPrune(cands []HistoryCandidate, keepSucceeded, keepFailed int) []string {
	type group struct {
		op        infrav1.Operation
		succeeded bool
	}
	groups := map[group][]HistoryCandidate{}
	for _, c := range cands {
		if !c.Finished || !c.Counted || c.Foreign {
			continue
		}
		g := group{c.Operation, c.Succeeded}
		groups[g] = append(groups[g], c)
	}
	var out []string
	for g, list := range groups {
		sort.Slice(list, func(i, j int) bool { return list[i].Seq > list[j].Seq })
		keep := keepFailed
		if g.succeeded {
			keep = keepSucceeded
		}
		for i := keep; i < len(list); i++ {
			out = append(out, list[i].Name)
		}
	}
	sort.Strings(out)
	return out
}
