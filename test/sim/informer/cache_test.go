package informer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/test/sim/apiserver"
	"github.com/captf/cluster-api-provider-terraform/test/sim/informer"
)

// newStore returns a store over the manager's scheme whose watches go through informer.Deliver
// and then next.
func newStore(t *testing.T, next func(context.Context, apiserver.Delivery) error) *apiserver.Store {
	t.Helper()
	scheme, err := setup.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	s, err := apiserver.New(scheme, apiserver.Options{Deliver: informer.Deliver(next)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// recorder collects what a cache applies, with the bubble's time since start.
type recorder struct {
	mu      sync.Mutex
	start   time.Time
	applied []informer.Applied
	at      []time.Duration
}

func (r *recorder) observe(a informer.Applied) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applied = append(r.applied, a)
	r.at = append(r.at, time.Since(r.start))
}

func (r *recorder) trace() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.applied))
	for i, a := range r.applied {
		out[i] = fmt.Sprintf("%v %s", r.at[i], a)
	}
	return out
}

func cm(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Data: map[string]string{"n": "0"}}
}

// TestLagObserved writes through the store and requires the cache to show the write only after
// the event's lag, which is above zero and below MaxLag; Client reads from the cache and
// writes to the store.
func TestLagObserved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t, nil)
		rec := &recorder{start: time.Now()}
		c := informer.New(s.Client(), informer.Options{Name: "manager", Seed: 1, MaxLag: time.Second, Observe: rec.observe})
		defer c.Stop()
		cl := informer.Client(c, s.Client())
		ctx := t.Context()
		if err := cl.List(ctx, &corev1.ConfigMapList{}); err != nil { // starts and syncs the informer
			t.Fatal(err)
		}
		written := time.Now()
		if err := cl.Create(ctx, cm("a")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "default", Name: "a"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the cache showed the write at once: %v", err)
		}
		if err := s.Client().Get(ctx, client.ObjectKey{Namespace: "default", Name: "a"}, &corev1.ConfigMap{}); err != nil {
			t.Fatalf("the store lacks the write: %v", err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		got := &corev1.ConfigMap{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "default", Name: "a"}, got); err != nil {
			t.Fatalf("the write is not in the cache after MaxLag: %v", err)
		}
		if len(rec.at) != 1 {
			t.Fatalf("applied %v, want one event", rec.trace())
		}
		if lag := written.Add(rec.at[0]).Sub(rec.start); lag <= 0 || lag >= time.Second {
			t.Errorf("lag %v, want in (0, 1s)", lag)
		}
		if got.ResourceVersion != fmt.Sprint(s.ResourceVersion()) {
			t.Errorf("cache holds resourceVersion %s, store %d", got.ResourceVersion, s.ResourceVersion())
		}
	})
}

// scenario writes ConfigMaps and Secrets on a fixed schedule while the cache lags; it returns
// the cache's trace and, per kind, the resourceVersions the store committed.
func scenario(t *testing.T, seed uint64, drop func(apiserver.Delivery) bool) (*recorder, map[string][]uint64) {
	t.Helper()
	var next func(context.Context, apiserver.Delivery) error
	if drop != nil {
		next = func(_ context.Context, d apiserver.Delivery) error {
			if drop(d) {
				return errors.New("connection dropped")
			}
			return nil
		}
	}
	s := newStore(t, next)
	rec := &recorder{start: time.Now()}
	c := informer.New(s.Client(), informer.Options{Name: "manager", Seed: seed, MaxLag: 300 * time.Millisecond, Observe: rec.observe})
	defer c.Stop()
	ctx := t.Context()
	if err := c.List(ctx, &corev1.ConfigMapList{}); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, &corev1.SecretList{}); err != nil {
		t.Fatal(err)
	}
	committed := map[string][]uint64{}
	api := s.Client()
	for i := range 20 {
		var o client.Object = cm(fmt.Sprintf("c%d", i%3))
		kind := "ConfigMap"
		if i%2 == 1 {
			o = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i%4), Namespace: "default"}}
			kind = "Secret"
		}
		err := api.Create(ctx, o)
		if apierrors.IsAlreadyExists(err) {
			err = api.Delete(ctx, o)
		}
		if err != nil {
			t.Fatal(err)
		}
		committed[kind] = append(committed[kind], s.ResourceVersion())
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(20 * 300 * time.Millisecond) // every queued event is due by now
	synctest.Wait()
	return rec, committed
}

// TestOrdering requires every committed event to be applied once, in resourceVersion order per
// kind, and events of the two kinds to be applied out of their global order.
func TestOrdering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, committed := scenario(t, 3, nil)
		perKind := map[string][]uint64{}
		var global []uint64
		for _, a := range rec.applied {
			perKind[a.Kind] = append(perKind[a.Kind], a.ResourceVersion)
			global = append(global, a.ResourceVersion)
		}
		for kind, want := range committed {
			if !slices.Equal(perKind[kind], want) {
				t.Errorf("%s: applied %v, committed %v", kind, perKind[kind], want)
			}
		}
		if slices.IsSorted(global) {
			t.Errorf("no reordering across kinds with seed 3: %v", rec.trace())
		}
	})
}

// TestDroppedWatches drops every fifth delivery (the watch ends; the cache reopens it from its
// last applied resourceVersion) and still requires every event applied once, in order.
func TestDroppedWatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		var mu sync.Mutex
		drops := 0
		rec, committed := scenario(t, 5, func(apiserver.Delivery) bool {
			mu.Lock()
			defer mu.Unlock()
			n++
			if n%5 == 0 {
				drops++
				return true
			}
			return false
		})
		if drops == 0 {
			t.Fatal("no watch was dropped")
		}
		perKind := map[string][]uint64{}
		for _, a := range rec.applied {
			perKind[a.Kind] = append(perKind[a.Kind], a.ResourceVersion)
		}
		for kind, want := range committed {
			if !slices.Equal(perKind[kind], want) {
				t.Errorf("%s with %d drops: applied %v, committed %v", kind, drops, perKind[kind], want)
			}
		}
	})
}

// TestMonotonicReads updates one ConfigMap every 100 ms while a reader reads it every 37 ms in
// its three forms (typed, unstructured, metadata): each read is at least as new as the previous
// one, some reads are stale (the lag is seen), and the last read is the final state.
func TestMonotonicReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t, nil)
		c := informer.New(s.Client(), informer.Options{Name: "reader", Seed: 9, MaxLag: 250 * time.Millisecond})
		defer c.Stop()
		ctx := t.Context()
		api := s.Client()
		obj := cm("x")
		if err := api.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		key := client.ObjectKeyFromObject(obj)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range 40 {
				obj.Data["n"] = fmt.Sprint(i + 1)
				if err := api.Update(ctx, obj); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		var last uint64
		stale := 0
		for i := 0; ; i++ {
			var rv string
			switch i % 3 {
			case 0:
				o := &corev1.ConfigMap{}
				if err := c.Get(ctx, key, o); err != nil {
					t.Fatal(err)
				}
				rv = o.ResourceVersion
			case 1:
				o := &unstructured.Unstructured{}
				o.SetAPIVersion("v1")
				o.SetKind("ConfigMap")
				if err := c.Get(ctx, key, o); err != nil {
					t.Fatal(err)
				}
				rv = o.GetResourceVersion()
			default:
				o := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}}
				if err := c.Get(ctx, key, o); err != nil {
					t.Fatal(err)
				}
				rv = o.ResourceVersion
			}
			var n uint64
			if _, err := fmt.Sscan(rv, &n); err != nil {
				t.Fatal(err)
			}
			if n < last {
				t.Fatalf("read %d went back in time: resourceVersion %d after %d", i, n, last)
			}
			if n < s.ResourceVersion() {
				stale++
			}
			last = n
			select {
			case <-done:
				time.Sleep(time.Second)
				synctest.Wait()
				final := &corev1.ConfigMap{}
				if err := c.Get(ctx, key, final); err != nil {
					t.Fatal(err)
				}
				if final.Data["n"] != "40" || final.ResourceVersion != fmt.Sprint(s.ResourceVersion()) {
					t.Errorf("final read %v rv %s, want n=40 rv %d", final.Data, final.ResourceVersion, s.ResourceVersion())
				}
				if stale == 0 {
					t.Error("no read was stale: the lag was never seen")
				}
				return
			default:
			}
			time.Sleep(37 * time.Millisecond)
		}
	})
}

// TestSeedDeterminesTrace runs the same scenario twice per seed and requires the same trace
// (events and the bubble times they were applied at); two seeds give different traces.
func TestSeedDeterminesTrace(t *testing.T) {
	run := func(seed uint64) []string {
		var out []string
		synctest.Test(t, func(t *testing.T) {
			rec, _ := scenario(t, seed, nil)
			out = rec.trace()
		})
		return out
	}
	a, b := run(11), run(11)
	if !slices.Equal(a, b) {
		t.Errorf("seed 11 gave two traces:\n%v\n%v", a, b)
	}
	if c := run(12); slices.Equal(a, c) {
		t.Errorf("seeds 11 and 12 gave the same trace %v", a)
	}
}

// TestUnknownFieldSelector requires a field selector that needs an index to fail, not to be
// ignored.
func TestUnknownFieldSelector(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t, nil)
		c := informer.New(s.Client(), informer.Options{Name: "r"})
		defer c.Stop()
		err := c.List(t.Context(), &corev1.PodList{}, client.MatchingFields{"spec.nodeName": "n"})
		if err == nil {
			t.Error("a field selector on spec.nodeName was accepted")
		}
	})
}

// TestListRetried fails the cache's first two lists: the first read waits for the third,
// two seconds later on the bubble's clock, and then sees the object.
func TestListRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		scheme, err := setup.NewScheme()
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		failures := 2
		s, err := apiserver.New(scheme, apiserver.Options{Intercept: func(_ context.Context, r apiserver.Request) error {
			mu.Lock()
			defer mu.Unlock()
			if r.Verb == apiserver.VerbList && failures > 0 {
				failures--
				return apierrors.NewServerTimeout(schema.GroupResource{Resource: "configmaps"}, "list", 1)
			}
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Client().Create(t.Context(), cm("a")); err != nil {
			t.Fatal(err)
		}
		c := informer.New(s.Client(), informer.Options{Name: "r"})
		defer c.Stop()
		start := time.Now()
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "a"}, &corev1.ConfigMap{}); err != nil {
			t.Fatalf("read after two failed lists: %v", err)
		}
		if waited := time.Since(start); waited != 2*time.Second {
			t.Errorf("the first read waited %v, want 2s (two retries)", waited)
		}
	})
}

// TestSelectors scopes the ConfigMap informer to a label: an unlabelled object is never seen,
// a labelled one is, and it leaves the cache when its label is removed.
func TestSelectors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t, nil)
		api := s.Client()
		ctx := t.Context()
		c := informer.New(api, informer.Options{Name: "r", MaxLag: 100 * time.Millisecond,
			Selectors: map[schema.GroupKind]labels.Selector{{Kind: "ConfigMap"}: labels.SelectorFromSet(labels.Set{"managed": "true"})}})
		defer c.Stop()
		plain, labelled := cm("plain"), cm("labelled")
		labelled.Labels = map[string]string{"managed": "true"}
		for _, o := range []client.Object{plain, labelled} {
			if err := api.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		l := &corev1.ConfigMapList{}
		if err := c.List(ctx, l); err != nil || len(l.Items) != 1 || l.Items[0].Name != "labelled" {
			t.Fatalf("the scoped cache lists %v (%v), want only labelled", l.Items, err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(plain), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("an object outside the selector: %v, want NotFound", err)
		}
		labelled.Labels = nil
		if err := api.Update(ctx, labelled); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if err := c.Get(ctx, client.ObjectKeyFromObject(labelled), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("an object that lost its label is still cached: %v", err)
		}
	})
}
