package jobslots

import (
	"context"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
)

// pendingSlot is a reservation whose Job the cache does not show yet.
type pendingSlot struct {
	background bool
	at         time.Time
}

// Slots bounds how many Jobs one manager runs at once (--max-active-jobs), and how many of
// them may be background work (--max-background-jobs), so a burst of scheduled drift checks
// never starves the applies and destroys people wait for. It counts the running managed Jobs
// in the manager's cache (no API request) plus the reservations of Jobs being created that
// the cache does not show yet. Safe for concurrent use by every worker of every controller;
// Reserve calls are serialized (an in-memory list of the cache per call).
type Slots struct {
	// Max is the most Jobs running at once; 0 means no bound.
	Max int
	// MaxBackground is the most background Jobs running at once; 0 means no bound besides Max.
	MaxBackground int
	// Cache lists the managed Jobs (the manager's cached client).
	Cache client.Reader
	// PendingTTL forgets a reservation whose Job never showed up in the cache (a create that
	// failed without an answer). Default 2 minutes.
	PendingTTL time.Duration

	mu      sync.Mutex
	pending map[types.NamespacedName]pendingSlot
}

// Reserve takes a slot for the Job key of operation op, or reports that none is free. A
// reservation lasts until the Job shows in the cache (then the Job itself counts until it has
// finished) or until Release.
func (s *Slots) Reserve(ctx context.Context, key types.NamespacedName, op infrav1.Operation, now time.Time) (bool, error) {
	if s == nil || s.Max <= 0 && s.MaxBackground <= 0 {
		return true, nil
	}
	// The list is read under the lock. A reservation is dropped once a list shows its Job; a
	// list read before the Job reached the cache, but judged after another caller's newer list
	// dropped the reservation, would count that Job nowhere and hand its slot out twice.
	// Reading under the lock judges the lists in the order they were read, and the cache's
	// store only moves forward.
	s.mu.Lock()
	defer s.mu.Unlock()
	list := &batchv1.JobList{}
	if err := s.Cache.List(ctx, list, client.MatchingLabels{infrav1.ManagedLabel: "true"}); err != nil {
		return false, fmt.Errorf("count running jobs: %w", err)
	}
	if s.pending == nil {
		s.pending = map[types.NamespacedName]pendingSlot{}
	}
	ttl := s.PendingTTL
	if ttl <= 0 {
		ttl = 2 * time.Minute
	}
	total, background := 0, 0
	for i := range list.Items {
		j := &list.Items[i]
		k := types.NamespacedName{Namespace: j.Namespace, Name: j.Name}
		delete(s.pending, k) // the cache shows it: the Job itself counts from now on
		if jobstatus.Finished(j) {
			continue
		}
		total++
		if infrav1.Operation(j.Labels[infrav1.OperationLabel]).Background() {
			background++
		}
	}
	for k, p := range s.pending {
		if now.Sub(p.at) > ttl {
			delete(s.pending, k)
			continue
		}
		total++
		if p.background {
			background++
		}
	}
	if _, mine := s.pending[key]; mine {
		return true, nil
	}
	bg := op.Background()
	if (s.Max > 0 && total >= s.Max) || (bg && s.MaxBackground > 0 && background >= s.MaxBackground) {
		return false, nil
	}
	s.pending[key] = pendingSlot{background: bg, at: now}
	return true, nil
}

// Release gives back a reservation whose Job was not created. A create whose outcome is
// unknown (a timeout) is not released: its reservation lasts until the cache shows the Job or
// PendingTTL passes.
func (s *Slots) Release(key types.NamespacedName) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, key)
}
