package stalecache_test

import (
	"context"
	"math/rand"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/captf/cluster-api-provider-terraform/test/stalecache"
)

func setup(t *testing.T) (*runtime.Scheme, client.Client, *corev1.ConfigMap) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}, Data: map[string]string{"n": "0"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(cm).Build()
	return scheme, c, cm
}

// bump writes a new version of the ConfigMap and returns its resourceVersion.
func bump(t *testing.T, c client.Client, n int) uint64 {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "cm"}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["n"] = strconv.Itoa(n)
	if err := c.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	return version(t, cm)
}

func version(t *testing.T, o client.Object) uint64 {
	t.Helper()
	rv, err := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", o.GetResourceVersion(), err)
	}
	return rv
}

// readGet and readList read the ConfigMap through the double, by Get and by List.
func readGet(t *testing.T, r *stalecache.Reader) uint64 {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := r.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "cm"}, cm); err != nil {
		t.Fatal(err)
	}
	return version(t, cm)
}

func readList(t *testing.T, r *stalecache.Reader) uint64 {
	t.Helper()
	l := &corev1.ConfigMapList{}
	if err := r.List(context.Background(), l, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 {
		t.Fatalf("listed %d ConfigMaps, want 1", len(l.Items))
	}
	return version(t, &l.Items[0])
}

// TestLaggingIsMonotonicPerReader: under random lag, one reader never serves a version older
// than one it served before, by Get or List, and it does serve versions older than the current
// one (the lag is still there) as well as the current one (it catches up).
func TestLaggingIsMonotonicPerReader(t *testing.T) {
	scheme, c, _ := setup(t)
	rnd := rand.New(rand.NewSource(1))
	r := stalecache.Wrap(c, scheme)
	r.Add(stalecache.Lagging(&corev1.ConfigMap{}, 0.5, rnd.Float64))

	var last uint64
	lagged, current := 0, 0
	for i := 1; i <= 200; i++ {
		cur := bump(t, c, i)
		for k := 0; k < 1+rnd.Intn(3); k++ {
			read := readGet
			if rnd.Intn(2) == 0 {
				read = readList
			}
			got := read(t, r)
			if got < last {
				t.Fatalf("update %d: served version %d after version %d", i, got, last)
			}
			if got < cur {
				lagged++
			} else {
				current++
			}
			last = got
		}
	}
	if lagged == 0 || current == 0 {
		t.Fatalf("lagged reads %d, current reads %d: want both", lagged, current)
	}
	if r.Aged() != int64(lagged) {
		t.Fatalf("Aged() = %d, want the %d lagged reads", r.Aged(), lagged)
	}
}

// TestLaggingNeverHidesADeliveredVersion: wired to the cache's events, a reader that lags on
// every read still serves the older version until the newer one's event reaches the handlers,
// and from then on never an older one: the passes that event triggers see it.
func TestLaggingNeverHidesADeliveredVersion(t *testing.T) {
	scheme, c, _ := setup(t)
	always := func() float64 { return 0 }
	r := stalecache.Wrap(c, scheme)
	r.Add(stalecache.Lagging(&corev1.ConfigMap{}, 1, always))

	fi := &fakeInformer{}
	inf, err := r.Informing(&fakeCache{informer: fi}).GetInformer(context.Background(), &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	if _, err := inf.AddEventHandlerWithOptions(rec, toolscache.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}

	first := readGet(t, r)
	for i := 1; i <= 5; i++ {
		prev := first
		cur := bump(t, c, i)
		// The informer holds the new version but has not raised its event: the lag shows.
		if got := readGet(t, r); got != prev {
			t.Fatalf("update %d before its event: served %d, want the older %d", i, got, prev)
		}
		if got := readList(t, r); got != prev {
			t.Fatalf("update %d before its event (list): served %d, want the older %d", i, got, prev)
		}
		fresh := &corev1.ConfigMap{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "cm"}, fresh); err != nil {
			t.Fatal(err)
		}
		fi.handler.OnUpdate(fresh, fresh)
		if rec.updates != i {
			t.Fatalf("the handler saw %d updates, want %d", rec.updates, i)
		}
		for k := 0; k < 3; k++ {
			if got := readGet(t, r); got != cur {
				t.Fatalf("update %d after its event: served %d, want %d", i, got, cur)
			}
			if got := readList(t, r); got != cur {
				t.Fatalf("update %d after its event (list): served %d, want %d", i, got, cur)
			}
		}
		first = cur
	}
}

// TestDelayedEventsKeepTheLagUntilDelivered: with DelayEvents, an event reaches the handler
// only after its delay, in arrival order; until then a lagging read may still serve the older
// version, and once the handler has it, never.
func TestDelayedEventsKeepTheLagUntilDelivered(t *testing.T) {
	scheme, c, _ := setup(t)
	r := stalecache.Wrap(c, scheme)
	r.Add(stalecache.Lagging(&corev1.ConfigMap{}, 1, func() float64 { return 0 }))
	gate := make(chan struct{})
	r.DelayEvents(func() time.Duration { <-gate; return 0 })

	fi := &fakeInformer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inf, err := r.Informing(&fakeCache{informer: fi}).GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{seen: make(chan string, 2)}
	if _, err := inf.AddEventHandlerWithOptions(rec, toolscache.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}

	first := readGet(t, r)
	var sent []string
	for i := 1; i <= 2; i++ {
		bump(t, c, i)
		fresh := &corev1.ConfigMap{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "cm"}, fresh); err != nil {
			t.Fatal(err)
		}
		fi.handler.OnUpdate(fresh, fresh)
		sent = append(sent, fresh.ResourceVersion)
	}
	if got := readGet(t, r); got != first {
		t.Fatalf("both events still delayed: served %d, want the older %d", got, first)
	}
	for i, want := range sent {
		gate <- struct{}{}
		if got := <-rec.seen; got != want {
			t.Fatalf("event %d delivered version %s, want %s (arrival order)", i, got, want)
		}
	}
	last := version(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: sent[1]}})
	for k := 0; k < 3; k++ {
		if got := readGet(t, r); got != last {
			t.Fatalf("after the events were delivered: served %d, want %d", got, last)
		}
	}
}

type fakeCache struct {
	cache.Cache
	informer *fakeInformer
}

func (f *fakeCache) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return f.informer, nil
}

type fakeInformer struct {
	cache.Informer
	handler toolscache.ResourceEventHandler
}

func (f *fakeInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, _ toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	f.handler = h
	return nil, nil
}

type recorder struct {
	updates int
	seen    chan string
}

func (r *recorder) OnAdd(interface{}, bool) {}
func (r *recorder) OnUpdate(_, newObj interface{}) {
	r.updates++
	if r.seen != nil {
		r.seen <- newObj.(client.Object).GetResourceVersion()
	}
}
func (r *recorder) OnDelete(interface{}) {}
