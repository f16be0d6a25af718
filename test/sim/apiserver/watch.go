package apiserver

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// filter is what a List or a Watch selects: a namespace (empty: all), labels and fields
// (metadata.name and metadata.namespace only).
type filter struct {
	namespace string
	labels    labels.Selector
	fields    fields.Selector
}

// newFilter checks a list's options as the real server does for the fields every kind supports.
func newFilter(o *client.ListOptions) (filter, error) {
	f := filter{namespace: o.Namespace, labels: o.LabelSelector, fields: o.FieldSelector}
	if f.fields != nil {
		for _, req := range f.fields.Requirements() {
			if req.Field != "metadata.name" && req.Field != "metadata.namespace" {
				return filter{}, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", req.Field))
			}
		}
	}
	return f, nil
}

func (f filter) matches(o client.Object) bool {
	if f.namespace != "" && o.GetNamespace() != f.namespace {
		return false
	}
	if f.labels != nil && !f.labels.Matches(labels.Set(o.GetLabels())) {
		return false
	}
	if f.fields != nil && !f.fields.Matches(fields.Set{"metadata.name": o.GetName(), "metadata.namespace": o.GetNamespace()}) {
		return false
	}
	return true
}

// watcher is one open watch. The store offers it events under its lock, in resourceVersion
// order; the watcher's goroutine (pump) hands them to Options.Deliver, then to the channel.
type watcher struct {
	id      uint64
	store   *Store
	r       *resource
	filter  filter
	format  func(client.Object) (runtime.Object, error)
	deliver func(ctx context.Context, d Delivery) error

	mu     sync.Mutex
	queue  []watch.Event
	rvs    []uint64
	wake   chan struct{}
	stop   chan struct{}
	once   sync.Once
	result chan watch.Event
}

// offer queues ev for the watcher as its filter sees it: an object that starts matching arrives
// as Added, one that stops matching as Deleted (carrying its previous state and the event's
// resourceVersion), as the real server's watch cache does. The caller holds the store's lock.
func (w *watcher) offer(ev event) {
	now := w.filter.matches(ev.obj)
	before := ev.prev != nil && w.filter.matches(ev.prev)
	var out watch.Event
	switch {
	case ev.typ == watch.Deleted && before:
		out = watch.Event{Type: watch.Deleted, Object: ev.obj}
	case ev.typ == watch.Deleted:
		return
	case now && before:
		out = watch.Event{Type: watch.Modified, Object: ev.obj}
	case now:
		out = watch.Event{Type: watch.Added, Object: ev.obj}
	case before:
		gone, _ := ev.prev.DeepCopyObject().(client.Object)
		gone.SetResourceVersion(formatRV(ev.rv))
		out = watch.Event{Type: watch.Deleted, Object: gone}
	default:
		return
	}
	w.mu.Lock()
	w.queue = append(w.queue, out)
	w.rvs = append(w.rvs, ev.rv)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Stop ends the watch; ResultChan is closed once the watcher's goroutine has returned.
func (w *watcher) Stop() { w.once.Do(func() { close(w.stop) }) }

// ResultChan is the stream of events.
func (w *watcher) ResultChan() <-chan watch.Event { return w.result }

// pump delivers queued events until the watch stops, its context ends or Deliver refuses one.
func (w *watcher) pump(ctx context.Context) {
	defer close(w.result)
	defer w.store.unwatch(w)
	for {
		w.mu.Lock()
		if len(w.queue) == 0 {
			w.mu.Unlock()
			select {
			case <-w.wake:
				continue
			case <-w.stop:
				return
			case <-ctx.Done():
				return
			}
		}
		ev, rv := w.queue[0], w.rvs[0]
		w.queue, w.rvs = w.queue[1:], w.rvs[1:]
		w.mu.Unlock()
		o, _ := ev.Object.(client.Object)
		if w.deliver != nil {
			d := Delivery{Watch: w.id, Kind: w.r.gvk, Type: ev.Type, ResourceVersion: rv, Namespace: o.GetNamespace(), Name: o.GetName()}
			if err := w.deliver(ctx, d); err != nil {
				return
			}
		}
		obj, err := w.format(o)
		if err != nil {
			obj = &apierrors.NewInternalError(err).ErrStatus
			ev.Type = watch.Error
		}
		select {
		case w.result <- watch.Event{Type: ev.Type, Object: obj}:
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		}
	}
}

// watch opens a watch on r from resourceVersion rv: "" and "0" first send the current objects
// as Added (key order), as the real server does; a number sends every later change.
func (s *Store) watch(ctx context.Context, r *resource, f filter, rv string, format func(client.Object) (runtime.Object, error)) (*watcher, error) {
	var from uint64
	initial := rv == "" || rv == "0"
	if !initial {
		n, err := strconv.ParseUint(rv, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q: %v", rv, err))
		}
		from = n
	}
	s.watches++
	w := &watcher{
		id: s.watches, store: s, r: r, filter: f, format: format, deliver: s.opts.Deliver,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), result: make(chan watch.Event),
	}
	if initial {
		for _, k := range r.sortedKeys() {
			if o := r.objects[k].obj; f.matches(o) {
				w.queue = append(w.queue, watch.Event{Type: watch.Added, Object: o})
				n, _ := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
				w.rvs = append(w.rvs, n)
			}
		}
	} else {
		start := sort.Search(len(r.history), func(i int) bool { return r.history[i].rv > from })
		for _, ev := range r.history[start:] {
			w.offer(ev)
		}
	}
	r.watchers = append(r.watchers, w)
	go w.pump(ctx)
	return w, nil
}

// unwatch forgets a stopped watcher.
func (s *Store) unwatch(w *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := w.r.watchers
	for i, x := range ws {
		if x == w {
			w.r.watchers = append(ws[:i:i], ws[i+1:]...)
			return
		}
	}
}
