package decide

import (
	"crypto/sha256"
	"encoding/binary"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// DriftJitter is the largest share of the interval a drift check is delayed by, per object.
const DriftJitter = 0.10

// OverdueSpread is over how many intervals the checks that fell due before the manager started
// are spread. Phases are random per object, so over one interval a tenth of the interval would
// hold a tenth of the checks only on average; over three it holds about a thirtieth, and more
// than a tenth of a 100-object fleet almost never (p < 0.001).
const OverdueSpread = 3

// phaseOf places an object deterministically in [0, 1): the same UID always gets the same
// phase, and phases spread evenly over a fleet.
func phaseOf(uid types.UID) float64 {
	sum := sha256.Sum256([]byte(uid))
	return float64(binary.BigEndian.Uint64(sum[:8])>>11) / float64(uint64(1)<<53)
}

// DriftDueAt is when the next drift check of an object is due, or the zero time when its
// checks are off (interval 0). It is pure.
//
// The schedule counts from the last check (the durable annotation captf.io/last-drift-check;
// the object's creation when it never had one): interval plus a jitter of up to DriftJitter of
// the interval, fixed per object. A check that fell due while no manager ran it (a manager
// started after downtime, the target of a clusterctl move) is not started at once with every
// other overdue one: such checks are spread over OverdueSpread intervals after managerStart,
// by the same per-object phase.
func DriftDueAt(last, created, managerStart time.Time, interval time.Duration, uid types.UID) time.Time {
	if interval <= 0 {
		return time.Time{}
	}
	ref := last
	if ref.IsZero() {
		ref = created
	}
	phase := phaseOf(uid)
	due := ref.Add(interval + time.Duration(float64(interval)*DriftJitter*phase))
	if due.Before(managerStart) {
		due = managerStart.Add(time.Duration(float64(OverdueSpread*interval) * phase))
	}
	return due
}

// DriftCheckRequested reports a drift check asked for now (annotation captf.io/drift-check)
// on an object that has a state to check. It overrides the schedule (the interval, the jitter,
// the spread of overdue checks, and an interval of 0, which turns off only the schedule) and
// nothing else: the check starts where a due one would, after every operation Decide puts
// before it. A request on an object that never applied waits for its first apply.
func DriftCheckRequested(ev Evidence) bool {
	return ev.State.AppliedBefore && ev.Drift.CheckRequest != ""
}
