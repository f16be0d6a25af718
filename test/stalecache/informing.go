package stalecache

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Informing returns c with every event handler added through its informers wrapped: before a
// handler sees an added or updated object, the reader records that version as delivered, and
// never serves an older copy of that object afterwards. An informer raises an object's event
// only once its cache holds that version, so a pass the event triggers cannot read an older
// one; with this wiring the double keeps that promise while it lags. Give the manager the
// returned cache (manager.Options.NewCache) and the reader as its client's cache reader.
func (r *Reader) Informing(c cache.Cache) cache.Cache {
	return &informingCache{Cache: c, r: r}
}

// DelayEvents makes the informers of Informing hand each event to its handler delay() after it
// arrived, in order, and count its version as delivered only then: the watch latency of an
// informer that trails the API server. Until an event is delivered, a rule may still serve the
// version before it; from then on, never. Call it before the manager starts.
func (r *Reader) DelayEvents(delay func() time.Duration) { r.delay = delay }

type informingCache struct {
	cache.Cache
	r *Reader
}

func (c *informingCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	i, err := c.Cache.GetInformer(ctx, obj, opts...)
	if err != nil {
		return nil, err
	}
	return &informer{Informer: i, r: c.r, ctx: ctx}, nil
}

func (c *informingCache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	i, err := c.Cache.GetInformerForKind(ctx, gvk, opts...)
	if err != nil {
		return nil, err
	}
	return &informer{Informer: i, r: c.r, ctx: ctx}, nil
}

// informer wraps the handlers added to it; ctx (the one the informer was asked for with, which
// ends with the controller) bounds the goroutines of delayed handlers.
type informer struct {
	cache.Informer
	r   *Reader
	ctx context.Context
}

func (i *informer) wrap(h toolscache.ResourceEventHandler) toolscache.ResourceEventHandler {
	d := &delivering{h: h, r: i.r}
	if i.r.delay != nil {
		d.queue = make(chan func(), 4096)
		go d.run(i.ctx, i.r.delay)
	}
	return d
}

func (i *informer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandler(i.wrap(h))
}

func (i *informer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandlerWithResyncPeriod(i.wrap(h), resync)
}

func (i *informer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandlerWithOptions(i.wrap(h), o)
}

// delivering records each added or updated object as delivered, then hands it on: at once, or,
// with a delay, in arrival order from a goroutine of its own.
type delivering struct {
	h     toolscache.ResourceEventHandler
	r     *Reader
	queue chan func()
}

func (d *delivering) run(ctx context.Context, delay func() time.Duration) {
	for {
		select {
		case <-ctx.Done():
			return
		case f := <-d.queue:
			t := time.NewTimer(delay())
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			f()
		}
	}
}

func (d *delivering) send(f func()) {
	if d.queue == nil {
		f()
		return
	}
	d.queue <- f
}

func (d *delivering) OnAdd(obj interface{}, initial bool) {
	d.send(func() {
		if o, ok := obj.(client.Object); ok {
			d.r.delivered(o)
		}
		d.h.OnAdd(obj, initial)
	})
}

func (d *delivering) OnUpdate(oldObj, newObj interface{}) {
	d.send(func() {
		if o, ok := newObj.(client.Object); ok {
			d.r.delivered(o)
		}
		d.h.OnUpdate(oldObj, newObj)
	})
}

func (d *delivering) OnDelete(obj interface{}) { d.send(func() { d.h.OnDelete(obj) }) }
