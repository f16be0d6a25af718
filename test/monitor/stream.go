package monitor

import (
	"sort"
	"strconv"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Recorder is the monitor's checks without its watches of a real API server: a caller that
// sees every version of every object in order per object (test/sim, from its in-memory
// store's watches) records each with Record and replays them with Check. The checks are the
// Monitor's, one rule in one place.
type Recorder struct {
	mu    sync.Mutex
	last  map[string]fact
	facts []fact
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{last: map[string]fact{}} }

// Record keeps one version of a watched object (its resourceVersion is the object's);
// deleted marks a Deleted event. Objects the checks ignore are dropped.
func (r *Recorder) Record(obj client.Object, deleted bool) {
	rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		return
	}
	f, ok := factOf(obj, rv, deleted)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.last[f.key()]; ok && prev.same(f) {
		return
	}
	r.last[f.key()] = f
	r.facts = append(r.facts, f)
}

// Check replays what was recorded so far, in resourceVersion order, for namespaces.
func (r *Recorder) Check(namespaces map[string]bool) Result {
	r.mu.Lock()
	facts := append([]fact(nil), r.facts...)
	r.mu.Unlock()
	sort.SliceStable(facts, func(i, j int) bool { return facts[i].rv < facts[j].rv })
	return replay(facts, nil, namespaces)
}
