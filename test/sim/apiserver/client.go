package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Client returns a client.WithWatch served by the store. Typed objects of the scheme,
// *unstructured.Unstructured and (for reads, patches and deletes) *metav1.PartialObjectMetadata
// are accepted, with their lists.
func (s *Store) Client() client.WithWatch { return &simClient{s: s} }

type simClient struct{ s *Store }

var _ client.WithWatch = &simClient{}

// errDryRun is returned for dry-run requests, which the store does not model.
var errDryRun = apierrors.NewBadRequest("dry run is not modelled by test/sim/apiserver")

func (c *simClient) Scheme() *runtime.Scheme     { return c.s.scheme }
func (c *simClient) RESTMapper() meta.RESTMapper { return c.s.mapper }

func (c *simClient) GroupVersionKindFor(obj runtime.Object) (schema.GroupVersionKind, error) {
	gvk, err := apiutil.GVKForObject(obj, c.s.scheme)
	if err != nil {
		return gvk, fmt.Errorf("kind of %T: %w", obj, err)
	}
	return gvk, nil
}

func (c *simClient) IsObjectNamespaced(obj runtime.Object) (bool, error) {
	ok, err := apiutil.IsObjectNamespaced(obj, c.s.scheme, c.s.mapper)
	if err != nil {
		return false, fmt.Errorf("scope of %T: %w", obj, err)
	}
	return ok, nil
}

// kindOf returns the kind of an object or (without its List suffix) of a list.
func (c *simClient) kindOf(obj runtime.Object) (schema.GroupVersionKind, error) {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return gvk, err
	}
	if meta.IsListType(obj) {
		gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	}
	return gvk, nil
}

// begin runs Options.Intercept.
func (c *simClient) begin(ctx context.Context, r Request) error {
	if c.s.opts.Intercept == nil {
		return nil
	}
	return c.s.opts.Intercept(ctx, r)
}

// end runs Options.AfterWrite.
func (c *simClient) end(ctx context.Context, r Request, err error) error {
	if c.s.opts.AfterWrite == nil {
		return err
	}
	return c.s.opts.AfterWrite(ctx, r, err)
}

// decodeIn returns a normalised private copy, of the stored type, of an object a caller writes.
func (c *simClient) decodeIn(obj client.Object, gvk schema.GroupVersionKind) (client.Object, error) {
	c.s.mu.Lock()
	r, err := c.s.resourceFor(gvk)
	c.s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var src any = obj
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		src = o.Object
	case *metav1.PartialObjectMetadata:
		return nil, apierrors.NewBadRequest("a PartialObjectMetadata can be read, patched and deleted, not created or updated")
	default:
		if reflect.TypeOf(obj).Elem() != r.typ {
			return nil, fmt.Errorf("decode %T: the scheme stores %s as %s", obj, gvk, r.typ)
		}
	}
	data, err := json.Marshal(src)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", gvk.Kind, err)
	}
	out := r.newObject()
	if err := json.Unmarshal(data, out); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("decode %s: %v", gvk.Kind, err))
	}
	out.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return out, nil
}

// fill copies a stored object into the caller's object, in the caller's form.
func (c *simClient) fill(dst client.Object, stored client.Object, gvk schema.GroupVersionKind) error {
	if stored == nil {
		return nil // AfterWrite turned a failed write into a success: nothing to copy
	}
	return CopyOut(dst, stored, gvk)
}

// CopyOut copies a stored object into a caller's object, in the caller's form (a typed
// pointer, *unstructured.Unstructured or *metav1.PartialObjectMetadata): the copy this
// package's client and test/sim/informer's caches both hand out.
func CopyOut(dst, stored client.Object, gvk schema.GroupVersionKind) error {
	out, err := convertOut(stored, gvk, reflect.TypeOf(dst))
	if err != nil {
		return err
	}
	switch d := dst.(type) {
	case *unstructured.Unstructured:
		u, _ := out.(*unstructured.Unstructured)
		d.Object = u.Object
	case *metav1.PartialObjectMetadata:
		p, _ := out.(*metav1.PartialObjectMetadata)
		*d = *p
	default:
		reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(out).Elem())
	}
	return nil
}

// convertOut returns a copy of a stored object in the form of type t (a typed pointer,
// *unstructured.Unstructured or *metav1.PartialObjectMetadata).
func convertOut(stored client.Object, gvk schema.GroupVersionKind, t reflect.Type) (client.Object, error) {
	switch t {
	case reflect.TypeFor[*unstructured.Unstructured]():
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(stored)
		if err != nil {
			return nil, fmt.Errorf("convert %s to unstructured: %w", gvk.Kind, err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(gvk)
		return u, nil
	case reflect.TypeFor[*metav1.PartialObjectMetadata]():
		om, _ := getField(stored, "ObjectMeta").Interface().(metav1.ObjectMeta)
		p := &metav1.PartialObjectMetadata{ObjectMeta: *om.DeepCopy()}
		p.SetGroupVersionKind(gvk)
		return p, nil
	}
	if reflect.TypeOf(stored) != t {
		return nil, fmt.Errorf("convert %s: the scheme stores it as %T, not %s", gvk.Kind, stored, t)
	}
	out, _ := stored.DeepCopyObject().(client.Object)
	return out, nil
}

func (c *simClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	gvk, err := c.kindOf(obj)
	if err != nil {
		return err
	}
	if err := c.begin(ctx, Request{Verb: VerbGet, Kind: gvk, Namespace: key.Namespace, Name: key.Name}); err != nil {
		return err
	}
	stored, err := c.s.get(gvk, key.Namespace, key.Name)
	if err != nil {
		return err
	}
	return c.fill(obj, stored, gvk)
}

func (c *simClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	gvk, err := c.kindOf(list)
	if err != nil {
		return err
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	if err := c.begin(ctx, Request{Verb: VerbList, Kind: gvk, Namespace: lo.Namespace}); err != nil {
		return err
	}
	f, err := newFilter(lo)
	if err != nil {
		return err
	}
	objs, rv, err := c.s.list(gvk, f)
	if err != nil {
		return err
	}
	return FillList(list, objs, gvk, rv)
}

// FillList sets a list's items (copies, in the list's form) and its resourceVersion, as this
// package's client and test/sim/informer's caches both answer a List.
func FillList(list client.ObjectList, objs []client.Object, gvk schema.GroupVersionKind, rv uint64) error {
	var itemType reflect.Type
	switch l := list.(type) {
	case *unstructured.UnstructuredList:
		itemType = reflect.TypeFor[*unstructured.Unstructured]()
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	case *metav1.PartialObjectMetadataList:
		itemType = reflect.TypeFor[*metav1.PartialObjectMetadata]()
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	}
	items := make([]runtime.Object, 0, len(objs))
	for _, o := range objs {
		t := itemType
		if t == nil {
			t = reflect.TypeOf(o)
		}
		out, err := convertOut(o, gvk, t)
		if err != nil {
			return err
		}
		items = append(items, out)
	}
	if err := meta.SetList(list, items); err != nil {
		return fmt.Errorf("set list of %s: %w", gvk.Kind, err)
	}
	list.SetResourceVersion(formatRV(rv))
	list.SetContinue("")
	return nil
}

func (c *simClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if len((&client.CreateOptions{}).ApplyOptions(opts).DryRun) > 0 {
		return errDryRun
	}
	gvk, err := c.kindOf(obj)
	if err != nil {
		return err
	}
	req := Request{Verb: VerbCreate, Kind: gvk, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if err := c.begin(ctx, req); err != nil {
		return err
	}
	in, err := c.decodeIn(obj, gvk)
	if err != nil {
		return err
	}
	stored, err := c.s.create(ctx, &req, gvk, in)
	if err := c.end(ctx, req, err); err != nil {
		return err
	}
	return c.fill(obj, stored, gvk)
}

func (c *simClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if len((&client.UpdateOptions{}).ApplyOptions(opts).DryRun) > 0 {
		return errDryRun
	}
	return c.update(ctx, obj, "")
}

func (c *simClient) update(ctx context.Context, obj client.Object, subresource string) error {
	gvk, err := c.kindOf(obj)
	if err != nil {
		return err
	}
	req := Request{Verb: VerbUpdate, Kind: gvk, Namespace: obj.GetNamespace(), Name: obj.GetName(), Subresource: subresource}
	if err := c.begin(ctx, req); err != nil {
		return err
	}
	in, err := c.decodeIn(obj, gvk)
	if err != nil {
		return err
	}
	stored, err := c.s.update(ctx, &req, gvk, in, subresource)
	if err := c.end(ctx, req, err); err != nil {
		return err
	}
	return c.fill(obj, stored, gvk)
}

func (c *simClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if len((&client.PatchOptions{}).ApplyOptions(opts).DryRun) > 0 {
		return errDryRun
	}
	return c.patch(ctx, obj, patch, "")
}

func (c *simClient) patch(ctx context.Context, obj client.Object, patch client.Patch, subresource string) error {
	gvk, err := c.kindOf(obj)
	if err != nil {
		return err
	}
	req := Request{Verb: VerbPatch, Kind: gvk, Namespace: obj.GetNamespace(), Name: obj.GetName(), Subresource: subresource}
	if err := c.begin(ctx, req); err != nil {
		return err
	}
	data, err := patch.Data(obj)
	if err != nil {
		return fmt.Errorf("patch data: %w", err)
	}
	stored, err := c.s.patch(ctx, &req, gvk, obj.GetNamespace(), obj.GetName(), patch.Type(), data, subresource)
	if err := c.end(ctx, req, err); err != nil {
		return err
	}
	return c.fill(obj, stored, gvk)
}

func (c *simClient) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return errApplyNotModelled
}

func (c *simClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	do := (&client.DeleteOptions{}).ApplyOptions(opts)
	if len(do.DryRun) > 0 {
		return errDryRun
	}
	gvk, err := c.kindOf(obj)
	if err != nil {
		return err
	}
	req := Request{Verb: VerbDelete, Kind: gvk, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if err := c.begin(ctx, req); err != nil {
		return err
	}
	_, err = c.s.del(ctx, &req, gvk, obj.GetNamespace(), obj.GetName(), do.Preconditions)
	return c.end(ctx, req, err)
}

func (c *simClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	do := (&client.DeleteAllOfOptions{}).ApplyOptions(opts)
	if len(do.DryRun) > 0 {
		return errDryRun
	}
	gvk, err := c.kindOf(obj)
	if err != nil {
		return err
	}
	req := Request{Verb: VerbDeleteAllOf, Kind: gvk, Namespace: do.Namespace}
	if err := c.begin(ctx, req); err != nil {
		return err
	}
	f, err := newFilter(&do.ListOptions)
	if err != nil {
		return err
	}
	objs, _, err := c.s.list(gvk, f)
	if err != nil {
		return err
	}
	for _, o := range objs {
		one := Request{Verb: VerbDelete, Kind: gvk, Namespace: o.GetNamespace(), Name: o.GetName()}
		if _, err := c.s.del(ctx, &one, gvk, o.GetNamespace(), o.GetName(), do.Preconditions); err != nil && !apierrors.IsNotFound(err) {
			return c.end(ctx, req, err)
		}
	}
	return c.end(ctx, req, nil)
}

func (c *simClient) Watch(ctx context.Context, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
	gvk, err := c.kindOf(list)
	if err != nil {
		return nil, err
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	if err := c.begin(ctx, Request{Verb: VerbWatch, Kind: gvk, Namespace: lo.Namespace}); err != nil {
		return nil, err
	}
	f, err := newFilter(lo)
	if err != nil {
		return nil, err
	}
	rv := ""
	if lo.Raw != nil {
		rv = lo.Raw.ResourceVersion
	}
	var itemType reflect.Type
	switch list.(type) {
	case *unstructured.UnstructuredList:
		itemType = reflect.TypeFor[*unstructured.Unstructured]()
	case *metav1.PartialObjectMetadataList:
		itemType = reflect.TypeFor[*metav1.PartialObjectMetadata]()
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	r, err := c.s.resourceFor(gvk)
	if err != nil {
		return nil, err
	}
	t := itemType
	if t == nil {
		t = reflect.PointerTo(r.typ)
	}
	format := func(o client.Object) (runtime.Object, error) { return convertOut(o, gvk, t) }
	return c.s.watch(ctx, r, f, rv, format)
}

func (c *simClient) Status() client.SubResourceWriter { return &subClient{c: c, name: "status"} }

func (c *simClient) SubResource(name string) client.SubResourceClient {
	return &subClient{c: c, name: name}
}

// subClient serves the status subresource; other subresources are not modelled.
type subClient struct {
	c    *simClient
	name string
}

func (s *subClient) supported() error {
	if s.name != "status" {
		return apierrors.NewBadRequest(fmt.Sprintf("subresource %q is not modelled by test/sim/apiserver", s.name))
	}
	return nil
}

func (s *subClient) Get(ctx context.Context, obj, _ client.Object, _ ...client.SubResourceGetOption) error {
	if err := s.supported(); err != nil {
		return err
	}
	return s.c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
}

func (s *subClient) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	return apierrors.NewBadRequest(fmt.Sprintf("create on subresource %q is not modelled by test/sim/apiserver", s.name))
}

func (s *subClient) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := s.supported(); err != nil {
		return err
	}
	if len((&client.SubResourceUpdateOptions{}).ApplyOptions(opts).DryRun) > 0 {
		return errDryRun
	}
	return s.c.update(ctx, obj, s.name)
}

func (s *subClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := s.supported(); err != nil {
		return err
	}
	if len((&client.SubResourcePatchOptions{}).ApplyOptions(opts).DryRun) > 0 {
		return errDryRun
	}
	return s.c.patch(ctx, obj, patch, s.name)
}

func (s *subClient) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return errApplyNotModelled
}
