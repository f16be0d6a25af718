package stalecache

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Rule looks at an object the cache is about to return. It returns hide to make the cache
// pretend the object does not exist, or a non-nil older copy to return instead.
type Rule func(obj client.Object) (hide bool, older client.Object)

// Reader wraps a cache reader with rules.
type Reader struct {
	inner  client.Reader
	scheme *runtime.Scheme

	mu    sync.RWMutex
	rules map[int]Rule
	next  int

	hidden atomic.Int64
	aged   atomic.Int64

	// floors holds, per object (Go type, namespace, name), the newest resourceVersion this
	// reader has served or has delivered in an event (Informing). An older copy below it is
	// never served: a reader does not go back in time.
	floorMu sync.Mutex
	floors  map[string]uint64

	// delay, when set, is the latency of each event (DelayEvents).
	delay func() time.Duration
}

// Wrap returns a Reader over inner (normally the manager's cache).
func Wrap(inner client.Reader, scheme *runtime.Scheme) *Reader {
	return &Reader{inner: inner, scheme: scheme, rules: map[int]Rule{}, floors: map[string]uint64{}}
}

// Add installs a rule and returns the function that removes it.
func (r *Reader) Add(rule Rule) (remove func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := r.next
	r.next++
	r.rules[id] = rule
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.rules, id)
	}
}

// Hidden is how many reads a rule answered with "not there"; Aged how many got an older copy.
func (r *Reader) Hidden() int64 { return r.hidden.Load() }

// Aged is how many reads returned an older copy.
func (r *Reader) Aged() int64 { return r.aged.Load() }

// judge asks the rules about obj (the current version in the inner cache) and keeps the reader
// monotonic: an older copy is served only when it is not older than a version this reader has
// already served or delivered; otherwise the current one is served. Whatever is served raises
// the floor.
func (r *Reader) judge(obj client.Object) (bool, client.Object) {
	hide, older := r.ask(obj)
	if hide {
		return true, nil
	}
	key := objectKey(obj)
	r.floorMu.Lock()
	defer r.floorMu.Unlock()
	if older != nil {
		rv, ok := parseVersion(older)
		if !ok || rv < r.floors[key] {
			older = nil
		}
	}
	served := obj
	if older != nil {
		served = older
	}
	if rv, ok := parseVersion(served); ok && rv > r.floors[key] {
		r.floors[key] = rv
	}
	return false, older
}

func (r *Reader) ask(obj client.Object) (bool, client.Object) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, rule := range r.rules {
		if hide, older := rule(obj); hide || older != nil {
			return hide, older
		}
	}
	return false, nil
}

// delivered raises obj's floor to its version: an informer has handed it to event handlers,
// so every read after the handler ran (the passes that event triggers) sees it or a newer one.
func (r *Reader) delivered(obj client.Object) {
	rv, ok := parseVersion(obj)
	if !ok {
		return
	}
	key := objectKey(obj)
	r.floorMu.Lock()
	defer r.floorMu.Unlock()
	if rv > r.floors[key] {
		r.floors[key] = rv
	}
}

func objectKey(obj client.Object) string {
	return fmt.Sprintf("%T/%s/%s", obj, obj.GetNamespace(), obj.GetName())
}

// parseVersion reads a resourceVersion as the etcd revision it is on the API servers these
// tests run against (envtest, the fake client). A version that is not a number is not
// compared, and no older copy is served against it.
func parseVersion(obj client.Object) (uint64, bool) {
	rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	return rv, err == nil
}

// Get implements client.Reader.
func (r *Reader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.inner.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	hide, older := r.judge(obj)
	switch {
	case hide:
		r.hidden.Add(1)
		gvk, _ := apiutil.GVKForObject(obj, r.scheme)
		return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, key.Name)
	case older != nil:
		r.aged.Add(1)
		return copyInto(older, obj)
	}
	return nil
}

// List implements client.Reader.
func (r *Reader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := r.inner.List(ctx, list, opts...); err != nil {
		return err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return fmt.Errorf("extract list: %w", err)
	}
	kept := make([]runtime.Object, 0, len(items))
	for _, it := range items {
		obj, ok := it.(client.Object)
		if !ok {
			kept = append(kept, it)
			continue
		}
		hide, older := r.judge(obj)
		switch {
		case hide:
			r.hidden.Add(1)
		case older != nil:
			r.aged.Add(1)
			kept = append(kept, older.DeepCopyObject())
		default:
			kept = append(kept, it)
		}
	}
	return meta.SetList(list, kept)
}

func copyInto(src, dst client.Object) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(src)
	if err != nil {
		return fmt.Errorf("convert older copy: %w", err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, dst); err != nil {
		return fmt.Errorf("convert older copy: %w", err)
	}
	return nil
}

// ByName hides the object of this kind (Go type of sample), namespace and name.
func ByName(sample client.Object, namespace, name string) Rule {
	t := fmt.Sprintf("%T", sample)
	return func(obj client.Object) (bool, client.Object) {
		return fmt.Sprintf("%T", obj) == t && obj.GetNamespace() == namespace && obj.GetName() == name, nil
	}
}

// Younger hides objects of sample's type created less than d ago (by now()): the view an
// informer gives of objects whose create events it has not processed yet.
func Younger(sample client.Object, d time.Duration, now func() time.Time) Rule {
	t := fmt.Sprintf("%T", sample)
	return func(obj client.Object) (bool, client.Object) {
		return fmt.Sprintf("%T", obj) == t && now().Sub(obj.GetCreationTimestamp().Time) < d, nil
	}
}

// Snapshot serves a frozen copy of one object (its state when the rule was made) instead of
// the current one: the view of an informer whose watch stalled. Like every older copy, it is
// not served once the reader has served or delivered a newer version.
func Snapshot(frozen client.Object) Rule {
	t := fmt.Sprintf("%T", frozen)
	frozen = frozen.DeepCopyObject().(client.Object)
	return func(obj client.Object) (bool, client.Object) {
		if fmt.Sprintf("%T", obj) == t && obj.GetNamespace() == frozen.GetNamespace() && obj.GetName() == frozen.GetName() {
			return false, frozen
		}
		return false, nil
	}
}

// Random hides objects of sample's type with probability p (decided by rnd, which must be
// safe for concurrent use), for chaos tests.
func Random(sample client.Object, p float64, rnd func() float64) Rule {
	t := fmt.Sprintf("%T", sample)
	return func(obj client.Object) (bool, client.Object) {
		return fmt.Sprintf("%T", obj) == t && rnd() < p, nil
	}
}

// Lagging serves, with probability p, the version of an object of sample's type that this
// rule saw before the current one: the view of an informer one event behind. It never hides an
// object. Install one Lagging per Reader (one per manager): its memory of versions is that
// reader's.
//
// The Reader keeps the lag to what an informer can show: a copy older than one the reader has
// already served is never served (a reader does not go back), and once the reader is wired to
// the cache's events (Informing), a copy older than the newest version delivered to event
// handlers is never served either, so the passes an object's event triggers see that version
// or a newer one. A new version can still be delayed until its event arrives.
func Lagging(sample client.Object, p float64, rnd func() float64) Rule {
	t := fmt.Sprintf("%T", sample)
	type versions struct{ prev, cur client.Object }
	var mu sync.Mutex
	seen := map[string]*versions{}
	return func(obj client.Object) (bool, client.Object) {
		if fmt.Sprintf("%T", obj) != t {
			return false, nil
		}
		key := obj.GetNamespace() + "/" + obj.GetName()
		mu.Lock()
		defer mu.Unlock()
		v := seen[key]
		if v == nil {
			v = &versions{}
			seen[key] = v
		}
		if v.cur == nil || v.cur.GetResourceVersion() != obj.GetResourceVersion() {
			v.prev, v.cur = v.cur, obj.DeepCopyObject().(client.Object)
		}
		if v.prev != nil && v.prev.GetUID() == obj.GetUID() && rnd() < p {
			return false, v.prev.DeepCopyObject().(client.Object)
		}
		return false, nil
	}
}
