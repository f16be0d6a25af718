package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Store is the in-memory API server. Use it through Client (a client.WithWatch). All its methods
// are safe for concurrent use; one mutex orders every write, which is what makes the
// resourceVersion counter global and the watch streams consistent with it.
type Store struct {
	scheme *runtime.Scheme
	opts   Options
	clock  clock.PassiveClock
	mapper *meta.DefaultRESTMapper

	mu        sync.Mutex
	rv        uint64
	uids      uint64
	watches   uint64
	rand      *rand.Rand
	resources map[schema.GroupVersionKind]*resource
}

// resource holds one kind's objects, its event history and its watchers.
type resource struct {
	gvk    schema.GroupVersionKind
	gr     schema.GroupResource
	policy KindPolicy
	typ    reflect.Type // the struct type (not the pointer)

	objects  map[string]*entry // by namespace/name
	history  []event           // every committed change, in resourceVersion order
	watchers []*watcher        // in the order they were opened
}

// entry is one stored object: obj is never mutated after commit (readers copy it), data is its
// JSON with an empty resourceVersion, as etcd holds it; a write whose JSON equals data is a no-op.
type entry struct {
	obj  client.Object
	data []byte
}

// event is one committed change. obj is the object after the change (for Deleted: its last
// state, carrying the deletion's resourceVersion, as the real server sends it); prev is the
// state before (nil for Added).
type event struct {
	typ       watch.EventType
	rv        uint64
	obj, prev client.Object
}

// New returns an empty store for the kinds of scheme. The namespaces every kube-apiserver creates
// (default, kube-system, kube-public, kube-node-lease) exist from the start when the scheme
// holds corev1.
func New(scheme *runtime.Scheme, opts Options) (*Store, error) {
	if scheme == nil {
		return nil, errors.New("new store: nil scheme")
	}
	s := &Store{
		scheme:    scheme,
		opts:      opts,
		clock:     opts.Clock,
		mapper:    meta.NewDefaultRESTMapper(nil),
		rand:      rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		resources: map[schema.GroupVersionKind]*resource{},
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	gvks := make([]schema.GroupVersionKind, 0, len(scheme.AllKnownTypes()))
	for gvk := range scheme.AllKnownTypes() {
		gvks = append(gvks, gvk)
	}
	sort.Slice(gvks, func(i, j int) bool { return gvks[i].String() < gvks[j].String() })
	for _, gvk := range gvks {
		if p, _, ok := s.policyFor(gvk); ok {
			scope := meta.RESTScopeNamespace
			if p.ClusterScoped {
				scope = meta.RESTScopeRoot
			}
			s.mapper.Add(gvk, scope)
		}
	}
	nsGVK := corev1.SchemeGroupVersion.WithKind("Namespace")
	if scheme.Recognizes(nsGVK) {
		for _, name := range []string{"default", "kube-node-lease", "kube-public", "kube-system"} {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
			if _, err := s.create(context.Background(), nil, nsGVK, ns); err != nil {
				return nil, fmt.Errorf("new store: create namespace %s: %w", name, err)
			}
		}
	}
	return s, nil
}

// policyFor says whether gvk is a storable kind (an object with ObjectMeta, not a list, not an
// internal version) and, if so, its policy and struct type.
func (s *Store) policyFor(gvk schema.GroupVersionKind) (KindPolicy, reflect.Type, bool) {
	if gvk.Version == runtime.APIVersionInternal || strings.HasSuffix(gvk.Kind, "List") {
		return KindPolicy{}, nil, false
	}
	t, ok := s.scheme.AllKnownTypes()[gvk]
	if !ok || t.Kind() != reflect.Struct {
		return KindPolicy{}, nil, false
	}
	if f, ok := t.FieldByName("ObjectMeta"); !ok || f.Type != reflect.TypeFor[metav1.ObjectMeta]() {
		return KindPolicy{}, nil, false
	}
	if p, ok := s.opts.Kinds[gvk.GroupKind()]; ok {
		return p, t, true
	}
	return DefaultKinds(gvk.GroupKind(), t), t, true
}

// resourceFor returns (creating on first use) the bucket of gvk. The caller holds s.mu.
func (s *Store) resourceFor(gvk schema.GroupVersionKind) (*resource, error) {
	if r, ok := s.resources[gvk]; ok {
		return r, nil
	}
	p, t, ok := s.policyFor(gvk)
	if !ok {
		return nil, &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
	}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	r := &resource{
		gvk:     gvk,
		gr:      plural.GroupResource(),
		policy:  p,
		typ:     t,
		objects: map[string]*entry{},
	}
	s.resources[gvk] = r
	return r, nil
}

// ResourceVersion is the current value of the global counter (the last committed write).
func (s *Store) ResourceVersion() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rv
}

func objKey(ns, name string) string { return ns + "/" + name }

// lookupLocked resolves gvk and finds its object ns/name (ns ignored for a cluster-scoped kind),
// with s.mu held: the resource, the object's key and its entry, or NotFound.
func (s *Store) lookupLocked(gvk schema.GroupVersionKind, ns, name string) (*resource, string, *entry, error) {
	r, err := s.resourceFor(gvk)
	if err != nil {
		return nil, "", nil, err
	}
	if r.policy.ClusterScoped {
		ns = ""
	}
	k := objKey(ns, name)
	e, ok := r.objects[k]
	if !ok {
		return r, k, nil, apierrors.NewNotFound(r.gr, name)
	}
	return r, k, e, nil
}

func formatRV(rv uint64) string { return strconv.FormatUint(rv, 10) }

// newObject returns a new empty object of r's type.
func (r *resource) newObject() client.Object {
	o, _ := reflect.New(r.typ).Interface().(client.Object)
	return o
}

// normalize returns a copy of obj as the server would store and return it: through JSON, so
// that times lose their sub-second part and empty omitempty fields read back as nil, exactly
// as a client of the real server sees them.
func (r *resource) normalize(obj runtime.Object) (client.Object, []byte, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("encode %s: %v", r.gvk.Kind, err))
	}
	out := r.newObject()
	if err := json.Unmarshal(data, out); err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("decode %s: %v", r.gvk.Kind, err))
	}
	out.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return out, data, nil
}

// commit stores cand (already normalised, validated, carrying the stored resourceVersion or
// none) as the new state of its key and records the event. A write that changes nothing is a
// no-op: no new resourceVersion and no event, as etcd3's GuaranteedUpdate does. The caller
// holds s.mu. It returns the stored object (callers copy it).
func (s *Store) commit(r *resource, cand client.Object, typ watch.EventType) (client.Object, error) {
	k := objKey(cand.GetNamespace(), cand.GetName())
	old := r.objects[k]
	cand.SetResourceVersion("")
	cand.SetManagedFields(nil)
	obj, data, err := r.normalize(cand)
	if err != nil {
		return nil, err
	}
	if old != nil && string(old.data) == string(data) {
		return old.obj, nil
	}
	s.rv++
	obj.SetResourceVersion(formatRV(s.rv))
	r.objects[k] = &entry{obj: obj, data: data}
	ev := event{typ: typ, rv: s.rv, obj: obj}
	if old != nil {
		ev.prev = old.obj
	}
	s.record(r, ev)
	return obj, nil
}

// remove deletes key k for good, recording a Deleted event whose object is the last stored
// state with the deletion's resourceVersion. The caller holds s.mu.
func (s *Store) remove(r *resource, k string) client.Object {
	old := r.objects[k]
	delete(r.objects, k)
	s.rv++
	gone, _ := old.obj.DeepCopyObject().(client.Object)
	gone.SetResourceVersion(formatRV(s.rv))
	s.record(r, event{typ: watch.Deleted, rv: s.rv, obj: gone, prev: old.obj})
	return gone
}

// record appends ev to r's history and hands it to r's watchers. The caller holds s.mu.
func (s *Store) record(r *resource, ev event) {
	r.history = append(r.history, ev)
	for _, w := range r.watchers {
		w.offer(ev)
	}
}

// sortedKeys returns r's keys in the order the real server lists them (etcd key order:
// namespace, then name, bytewise).
func (r *resource) sortedKeys() []string {
	keys := make([]string, 0, len(r.objects))
	for k := range r.objects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// nextUID returns a deterministic UID (the real server's are random; a seed must determine a run).
func (s *Store) nextUID() string {
	s.uids++
	return fmt.Sprintf("00000000-0000-4000-8000-%012x", s.uids)
}

// generateNameSuffix returns 5 characters from the alphabet of k8s.io/apimachinery's
// utilrand.String, drawn from the seeded source.
func (s *Store) generateNameSuffix() string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	for i := range b {
		b[i] = alphabet[s.rand.IntN(len(alphabet))]
	}
	return string(b)
}
