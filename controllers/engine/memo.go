package engine

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// memoKey identifies what an inputs hash was computed from: the object (UID and generation)
// and the fingerprint of the cached objects its contract inputs come from.
type memoKey struct {
	uid         types.UID
	generation  int64
	fingerprint string
}

type memoEntry struct {
	key     memoKey
	hash    string
	expires time.Time
}

// inputsMemo remembers the last inputs hash per object, so idle passes read nothing live. It
// holds one entry per object; a stale entry can only delay noticing a change of a source the
// fingerprint cannot see, never start a Job on its own (a start reassembles the inputs).
type inputsMemo struct {
	mu sync.Mutex
	m  map[types.UID]memoEntry
}

func (m *inputsMemo) get(k memoKey, now time.Time) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[k.uid]
	if !ok || e.key != k || !now.Before(e.expires) {
		return "", false
	}
	return e.hash, true
}

func (m *inputsMemo) put(k memoKey, hash string, expires time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[types.UID]memoEntry{}
	}
	m.m[k.uid] = memoEntry{key: k, hash: hash, expires: expires}
}

// forget drops an object's entry (it is gone).
func (m *inputsMemo) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, uid)
}
