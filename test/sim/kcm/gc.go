package kcm

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// GCOptions configure the garbage collector.
type GCOptions struct {
	// Kinds are the kinds it follows, as owners and as dependents (the real collector follows
	// every kind; the simulation names those its objects use).
	Kinds []schema.GroupVersionKind
	// Observe, when set, is called for every deletion or reference drop the collector makes.
	Observe func(Collected)
}

// Collected is one action of the garbage collector.
type Collected struct {
	Kind            string
	Namespace, Name string
	// What is "deleted" or "dropped dangling owner references".
	What string
}

// GarbageCollector plays the garbage collector over a client of the store.
type GarbageCollector struct {
	c    client.WithWatch
	opts GCOptions

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	events chan gcEvent
}

type gcEvent struct {
	gvk schema.GroupVersionKind
	typ watch.EventType
	obj *metav1.PartialObjectMetadata
}

// StartGarbageCollector starts the collector; it runs until Stop.
func StartGarbageCollector(c client.WithWatch, o GCOptions) *GarbageCollector {
	ctx, cancel := context.WithCancel(context.Background())
	gc := &GarbageCollector{c: c, opts: o, ctx: ctx, cancel: cancel, events: make(chan gcEvent)}
	for _, gvk := range o.Kinds {
		gc.wg.Add(1)
		go gc.watch(gvk)
	}
	gc.wg.Add(1)
	go gc.work()
	return gc
}

// Stop ends the collector.
func (gc *GarbageCollector) Stop() {
	gc.cancel()
	gc.wg.Wait()
}

// watch feeds one kind's metadata events to the worker, reopening its watch when it ends.
func (gc *GarbageCollector) watch(gvk schema.GroupVersionKind) {
	defer gc.wg.Done()
	for gc.ctx.Err() == nil {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		w, err := gc.c.Watch(gc.ctx, l)
		if err != nil {
			log.FromContext(gc.ctx).Info("garbage collector watch failed; retrying in one second", "kind", gvk.Kind, "error", err.Error())
			select {
			case <-time.After(time.Second):
			case <-gc.ctx.Done():
			}
			continue
		}
		for ev := range w.ResultChan() {
			o, ok := ev.Object.(*metav1.PartialObjectMetadata)
			if !ok {
				continue
			}
			select {
			case gc.events <- gcEvent{gvk: gvk, typ: ev.Type, obj: o}:
			case <-gc.ctx.Done():
			}
		}
		w.Stop()
	}
}

// work handles events one at a time: a deleted object's dependents are judged, and so is every
// object that is created or changed with owner references.
func (gc *GarbageCollector) work() {
	defer gc.wg.Done()
	for {
		select {
		case <-gc.ctx.Done():
			return
		case ev := <-gc.events:
			if ev.typ == watch.Deleted {
				gc.collectDependents(ev.obj)
			} else if len(ev.obj.OwnerReferences) > 0 {
				gc.judge(ev.gvk, ev.obj)
			}
		}
	}
}

// collectDependents judges every object of the followed kinds that names owner.
func (gc *GarbageCollector) collectDependents(owner *metav1.PartialObjectMetadata) {
	for _, gvk := range gc.opts.Kinds {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		var opts []client.ListOption
		if owner.Namespace != "" {
			opts = append(opts, client.InNamespace(owner.Namespace))
		}
		if err := gc.c.List(gc.ctx, l, opts...); err != nil {
			log.FromContext(gc.ctx).Info("garbage collector list failed", "kind", gvk.Kind, "error", err.Error())
			continue
		}
		for i := range l.Items {
			for _, ref := range l.Items[i].OwnerReferences {
				if ref.UID == owner.UID {
					gc.judge(gvk, &l.Items[i])
					break
				}
			}
		}
	}
}

// judge deletes a dependent none of whose owners is live, or drops its dangling references
// when some owner is.
func (gc *GarbageCollector) judge(gvk schema.GroupVersionKind, dep *metav1.PartialObjectMetadata) {
	logger := log.FromContext(gc.ctx).WithValues("kind", gvk.Kind, "object", dep.Namespace+"/"+dep.Name)
	var solid []metav1.OwnerReference
	dangling := 0
	for _, ref := range dep.OwnerReferences {
		live, err := gc.ownerLive(dep.Namespace, ref)
		if err != nil {
			logger.Info("garbage collector could not read an owner; leaving the object", "owner", ref.Name, "error", err.Error())
			return
		}
		if live {
			solid = append(solid, ref)
		} else {
			dangling++
		}
	}
	switch {
	case dangling == 0:
		return
	case len(solid) == 0:
		target := &metav1.PartialObjectMetadata{}
		target.SetGroupVersionKind(gvk)
		target.Namespace, target.Name = dep.Namespace, dep.Name
		uid := dep.UID
		err := gc.c.Delete(gc.ctx, target, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			logger.Info("garbage collector delete failed", "error", err.Error())
			return
		}
		if err == nil && gc.opts.Observe != nil {
			gc.opts.Observe(Collected{Kind: gvk.Kind, Namespace: dep.Namespace, Name: dep.Name, What: "deleted"})
		}
	default:
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"ownerReferences": solid, "resourceVersion": dep.ResourceVersion, "uid": dep.UID}})
		if err != nil {
			logger.Info("garbage collector could not encode a patch", "error", err.Error())
			return
		}
		target := &metav1.PartialObjectMetadata{}
		target.SetGroupVersionKind(gvk)
		target.Namespace, target.Name = dep.Namespace, dep.Name
		if err := gc.c.Patch(gc.ctx, target, client.RawPatch(types.MergePatchType, patch)); err != nil {
			logger.Info("garbage collector could not drop dangling owner references", "error", err.Error())
			return
		}
		if gc.opts.Observe != nil {
			gc.opts.Observe(Collected{Kind: gvk.Kind, Namespace: dep.Namespace, Name: dep.Name, What: "dropped dangling owner references"})
		}
	}
}

// ownerLive reports whether the owner a reference names exists with the reference's uid.
func (gc *GarbageCollector) ownerLive(namespace string, ref metav1.OwnerReference) (bool, error) {
	gv, perr := schema.ParseGroupVersion(ref.APIVersion)
	if perr != nil {
		return false, nil // a reference to no valid kind names no live owner
	}
	o := &metav1.PartialObjectMetadata{}
	o.SetGroupVersionKind(gv.WithKind(ref.Kind))
	err := gc.c.Get(gc.ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, o)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read owner %s %s: %w", ref.Kind, ref.Name, err)
	}
	return o.UID == ref.UID, nil
}
