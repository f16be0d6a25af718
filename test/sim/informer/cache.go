package informer

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/captf/cluster-api-provider-terraform/test/sim/apiserver"
)

// Options configure one reader's cache.
type Options struct {
	// Name names the reader (a manager, a webhook); it seeds the lags with Seed, so two readers
	// of one run lag differently.
	Name string
	// Seed determines every lag.
	Seed uint64
	// MaxLag bounds the delay of one event: each waits a duration drawn in [0, MaxLag) on the
	// clock of the bubble. Zero delivers at once.
	MaxLag time.Duration
	// Selectors scope a kind's informer to the objects whose labels match (the ByObject
	// label selectors of a controller-runtime cache, cmd/manager/setup.CacheOptions): an
	// object that stops matching leaves the cache as if deleted. Kinds not named cache all
	// their objects.
	Selectors map[schema.GroupKind]labels.Selector
	// Observe, when set, is called once per event the cache applies, in the order it applies
	// them (for traces and tests). It must not call the cache.
	Observe func(Applied)
}

// Applied is one event a cache applied.
type Applied struct {
	Reader          string
	Kind            string
	Type            watch.EventType
	Namespace, Name string
	ResourceVersion uint64
}

func (a Applied) String() string {
	return fmt.Sprintf("%s %s %s %s/%s rv=%d", a.Reader, a.Kind, a.Type, a.Namespace, a.Name, a.ResourceVersion)
}

// Cache is one reader's informer cache over a store's client.
type Cache struct {
	api    client.WithWatch
	scheme *runtime.Scheme
	opts   Options

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	kinds map[schema.GroupVersionKind]*kindCache
}

var _ client.Reader = &Cache{}

// kindCache is one kind's informer: its objects (by namespace/name), the resourceVersion of the
// last event or list applied, and whether its first list is done.
type kindCache struct {
	gvk     schema.GroupVersionKind
	newList func() client.ObjectList

	mu      sync.Mutex
	objects map[string]client.Object
	rv      uint64
	synced  chan struct{}
	err     error // the first list's error, if it failed
}

// New returns a cache reading through api (the store's client). Its watches live until Stop.
func New(api client.WithWatch, opts Options) *Cache {
	ctx, cancel := context.WithCancel(context.Background())
	ctx = context.WithValue(ctx, lagKey{}, &lag{reader: opts.Name, seed: opts.Seed, max: opts.MaxLag})
	return &Cache{api: api, scheme: api.Scheme(), opts: opts, ctx: ctx, cancel: cancel,
		kinds: map[schema.GroupVersionKind]*kindCache{}}
}

// Stop ends the cache's watches and waits for their goroutines.
func (c *Cache) Stop() {
	c.cancel()
	c.wg.Wait()
}

// typedKind resolves the kind an object or list of any form (typed, unstructured, metadata)
// stands for.
func (c *Cache) typedKind(obj runtime.Object) (schema.GroupVersionKind, error) {
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		return gvk, fmt.Errorf("kind of %T: %w", obj, err)
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	if !c.scheme.Recognizes(gvk) {
		return gvk, &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
	}
	return gvk, nil
}

// informer returns the kind's informer, starting it (list, then watch) on first use, and waits
// until it has synced.
func (c *Cache) informer(ctx context.Context, gvk schema.GroupVersionKind) (*kindCache, error) {
	c.mu.Lock()
	k, ok := c.kinds[gvk]
	if !ok {
		k = &kindCache{gvk: gvk, objects: map[string]client.Object{}, synced: make(chan struct{})}
		listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
		k.newList = func() client.ObjectList {
			o, _ := c.scheme.New(listGVK)
			l, _ := o.(client.ObjectList)
			return l
		}
		if k.newList() == nil {
			c.mu.Unlock()
			return nil, fmt.Errorf("informer of %s: the scheme has no %s", gvk.Kind, listGVK.Kind)
		}
		c.kinds[gvk] = k
		c.wg.Add(1)
		go c.run(k)
	}
	c.mu.Unlock()
	select {
	case <-k.synced:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the %s informer: %w", gvk.Kind, ctx.Err())
	}
	if k.err != nil {
		return nil, k.err
	}
	return k, nil
}

// run lists the kind, then applies its watch's events until the cache stops, reopening the
// watch from the last applied resourceVersion whenever it ends.
func (c *Cache) run(k *kindCache) {
	defer c.wg.Done()
	logger := log.FromContext(c.ctx).WithValues("reader", c.opts.Name, "kind", k.gvk.Kind)
	var items []runtime.Object
	var l client.ObjectList
	for {
		// A failed list is retried, as a reflector retries it; reads wait meanwhile.
		l = k.newList()
		err := c.api.List(c.ctx, l, c.selectorFor(k.gvk)...)
		if err == nil {
			if items, err = meta.ExtractList(l); err != nil {
				k.err = fmt.Errorf("extract %s list: %w", k.gvk.Kind, err)
				close(k.synced)
				return
			}
			break
		}
		logger.Info("list failed; retrying in one second", "error", err.Error())
		select {
		case <-time.After(time.Second):
		case <-c.ctx.Done():
			k.err = fmt.Errorf("list %s: %w", k.gvk.Kind, c.ctx.Err())
			close(k.synced)
			return
		}
	}
	k.mu.Lock()
	for _, it := range items {
		o, _ := it.(client.Object)
		k.objects[key(o.GetNamespace(), o.GetName())] = o
	}
	k.rv = parseRV(l.GetResourceVersion())
	k.mu.Unlock()
	close(k.synced)
	for c.ctx.Err() == nil {
		k.mu.Lock()
		from := strconv.FormatUint(k.rv, 10)
		k.mu.Unlock()
		opts := append(c.selectorFor(k.gvk), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: from}})
		w, err := c.api.Watch(c.ctx, k.newList(), opts...)
		if err != nil {
			if c.ctx.Err() == nil {
				logger.Info("watch failed; retrying in one second", "error", err.Error())
				select {
				case <-time.After(time.Second):
				case <-c.ctx.Done():
				}
			}
			continue
		}
		for ev := range w.ResultChan() {
			c.apply(k, ev)
		}
		w.Stop()
	}
}

// selectorFor is the list option that scopes a kind's informer, if any.
func (c *Cache) selectorFor(gvk schema.GroupVersionKind) []client.ListOption {
	if sel, ok := c.opts.Selectors[gvk.GroupKind()]; ok && sel != nil {
		return []client.ListOption{client.MatchingLabelsSelector{Selector: sel}}
	}
	return nil
}

// apply applies one event to the kind's objects; an event not newer than the last applied one
// is ignored (a watch reopened from rv never sends one, so this only guards the invariant).
func (c *Cache) apply(k *kindCache, ev watch.Event) {
	o, ok := ev.Object.(client.Object)
	if !ok || ev.Type == watch.Error || ev.Type == watch.Bookmark {
		return
	}
	rv := parseRV(o.GetResourceVersion())
	k.mu.Lock()
	if rv <= k.rv {
		k.mu.Unlock()
		return
	}
	kk := key(o.GetNamespace(), o.GetName())
	if ev.Type == watch.Deleted {
		delete(k.objects, kk)
	} else {
		k.objects[kk] = o
	}
	k.rv = rv
	k.mu.Unlock()
	if c.opts.Observe != nil {
		c.opts.Observe(Applied{Reader: c.opts.Name, Kind: k.gvk.Kind, Type: ev.Type, Namespace: o.GetNamespace(), Name: o.GetName(), ResourceVersion: rv})
	}
}

// ResourceVersion is the resourceVersion of the last event (or list) the cache applied for the
// kind of obj, 0 when it has not read that kind yet.
func (c *Cache) ResourceVersion(obj runtime.Object) uint64 {
	gvk, err := c.typedKind(obj)
	if err != nil {
		return 0
	}
	c.mu.Lock()
	k, ok := c.kinds[gvk]
	c.mu.Unlock()
	if !ok {
		return 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.rv
}

// Get reads one object from the cache (NotFound when the cache has not heard of it).
func (c *Cache) Get(ctx context.Context, nn client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	gvk, err := c.typedKind(obj)
	if err != nil {
		return err
	}
	k, err := c.informer(ctx, gvk)
	if err != nil {
		return err
	}
	k.mu.Lock()
	stored, ok := k.objects[key(nn.Namespace, nn.Name)]
	if !ok {
		// A cluster-scoped kind is stored without a namespace.
		stored, ok = k.objects[key("", nn.Name)]
	}
	k.mu.Unlock()
	if !ok {
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		return apierrors.NewNotFound(plural.GroupResource(), nn.Name)
	}
	return apiserver.CopyOut(obj, stored, gvk)
}

// List reads the objects a namespace, label selector and field selector (metadata.name and
// metadata.namespace only) select, in namespace/name order.
func (c *Cache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	gvk, err := c.typedKind(list)
	if err != nil {
		return err
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	if lo.FieldSelector != nil {
		for _, r := range lo.FieldSelector.Requirements() {
			if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
				return fmt.Errorf("list %s from the cache: field selector %s needs an index, which test/sim/informer does not model", gvk.Kind, r.Field)
			}
		}
	}
	k, err := c.informer(ctx, gvk)
	if err != nil {
		return err
	}
	k.mu.Lock()
	keys := make([]string, 0, len(k.objects))
	for kk := range k.objects {
		keys = append(keys, kk)
	}
	sort.Strings(keys)
	var selected []client.Object
	for _, kk := range keys {
		if o := k.objects[kk]; matches(lo, o) {
			selected = append(selected, o)
		}
	}
	rv := k.rv
	k.mu.Unlock()
	return apiserver.FillList(list, selected, gvk, rv)
}

func matches(lo *client.ListOptions, o client.Object) bool {
	if lo.Namespace != "" && o.GetNamespace() != lo.Namespace {
		return false
	}
	if lo.LabelSelector != nil && !lo.LabelSelector.Matches(labels.Set(o.GetLabels())) {
		return false
	}
	if lo.FieldSelector != nil && !lo.FieldSelector.Matches(fields.Set{"metadata.name": o.GetName(), "metadata.namespace": o.GetNamespace()}) {
		return false
	}
	return true
}

func key(ns, name string) string { return ns + "/" + name }

func parseRV(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

// lagKey carries a cache's lag in the context of its watches, where Deliver finds it.
type lagKey struct{}

// lag is one reader's lag rule.
type lag struct {
	reader string
	seed   uint64
	max    time.Duration
}

// delay is the lag of one event: a pure function of the seed, the reader, the kind and the
// event's resourceVersion.
func (l *lag) delay(d apiserver.Delivery) time.Duration {
	if l.max <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(l.reader + "\x00" + d.Kind.String()))
	r := rand.New(rand.NewPCG(l.seed^h.Sum64(), d.ResourceVersion))
	return time.Duration(r.Int64N(int64(l.max)))
}

// Deliver returns a hook for apiserver.Options.Deliver: an event of a watch a Cache opened
// waits the cache's lag for it on the bubble's clock, then goes on to next (nil: delivered);
// events of other watches go to next at once.
func Deliver(next func(context.Context, apiserver.Delivery) error) func(context.Context, apiserver.Delivery) error {
	return func(ctx context.Context, d apiserver.Delivery) error {
		if l, ok := ctx.Value(lagKey{}).(*lag); ok {
			if dl := l.delay(d); dl > 0 {
				t := time.NewTimer(dl)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return fmt.Errorf("deliver: %w", ctx.Err())
				}
			}
		}
		if next == nil {
			return nil
		}
		return next(ctx, d)
	}
}

// Client returns the client a reconciler uses: reads (Get, List) from cache, everything else
// (writes, Status, SubResource, the scheme and mapper) through writer, as a manager's client
// reads from its informers and writes to the API server.
func Client(cache client.Reader, writer client.Client) client.Client {
	return &cachedClient{Client: writer, cache: cache}
}

type cachedClient struct {
	client.Client
	cache client.Reader
}

func (c *cachedClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.cache.Get(ctx, key, obj, opts...)
}

func (c *cachedClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.cache.List(ctx, list, opts...)
}
