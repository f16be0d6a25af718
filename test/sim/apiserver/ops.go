package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// errModified is the cause the real server gives a stale resourceVersion.
var errModified = errors.New("the object has been modified; please apply your changes to the latest version and try again")

// maxGenerateNameAttempts is how often a create with generateName retries a taken name
// (kube-apiserver's RetryGenerateName behaviour).
const maxGenerateNameAttempts = 8

// create stores a new object (in is a normalised private copy the store may keep). With req
// not nil the admission chain (Options.Mutate, Options.Validate) judges it; New creates the
// initial namespaces without.
func (s *Store) create(ctx context.Context, req *Request, gvk schema.GroupVersionKind, in client.Object) (client.Object, error) {
	if req != nil && s.opts.Mutate != nil {
		if err := s.opts.Mutate(ctx, &Admission{Request: *req, Object: in}); err != nil {
			return nil, err
		}
	}
	validate := req != nil && s.opts.Validate != nil
	for {
		s.mu.Lock()
		r, cand, generate, err := s.prepareCreate(gvk, in)
		if err != nil || !validate {
			var out client.Object
			if err == nil {
				out, err = s.commit(r, cand, watch.Added)
			}
			s.mu.Unlock()
			return out, err
		}
		s.mu.Unlock()
		a := Admission{Request: *req, Object: cand}
		a.Namespace, a.Name = cand.GetNamespace(), cand.GetName()
		if err := s.opts.Validate(ctx, a); err != nil {
			return nil, err
		}
		s.mu.Lock()
		if _, taken := r.objects[objKey(cand.GetNamespace(), cand.GetName())]; taken {
			s.mu.Unlock()
			if generate {
				continue // another create took the generated name meanwhile: generate again
			}
			return nil, apierrors.NewAlreadyExists(r.gr, cand.GetName())
		}
		out, err := s.commit(r, cand, watch.Added)
		s.mu.Unlock()
		return out, err
	}
}

// prepareCreate is the create strategy on a copy of in: the object create would commit, and
// whether its name was generated. The caller holds s.mu.
func (s *Store) prepareCreate(gvk schema.GroupVersionKind, in client.Object) (*resource, client.Object, bool, error) {
	r, err := s.resourceFor(gvk)
	if err != nil {
		return nil, nil, false, err
	}
	in, _ = in.DeepCopyObject().(client.Object)
	if in.GetResourceVersion() != "" {
		// etcd3's store refuses it with a plain error, which the server reports as a 500.
		return nil, nil, false, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonUnknown,
			Message: "resourceVersion should not be set on objects to be created",
		}}
	}
	if r.policy.ClusterScoped {
		in.SetNamespace("")
	} else if err := s.namespaceAdmits(in.GetNamespace()); err != nil {
		return nil, nil, false, err
	}
	in.SetDeletionTimestamp(nil)
	in.SetDeletionGracePeriodSeconds(nil)
	if r.policy.StatusSubresource {
		setField(in, "Status", reflect.Zero(fieldType(r.typ, "Status")))
	}
	if r.policy.Generation != GenerationNone {
		in.SetGeneration(1)
	}
	in.SetUID(types.UID(s.nextUID()))
	in.SetCreationTimestamp(metav1.NewTime(s.clock.Now()))
	generate := in.GetName() == "" && in.GetGenerateName() != ""
	for attempt := 0; ; attempt++ {
		if generate {
			in.SetName(in.GetGenerateName() + s.generateNameSuffix())
		}
		errs := apivalidation.ValidateObjectMetaAccessor(in, !r.policy.ClusterScoped, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
		if len(errs) > 0 {
			return nil, nil, false, apierrors.NewInvalid(gvk.GroupKind(), in.GetName(), errs)
		}
		if _, taken := r.objects[objKey(in.GetNamespace(), in.GetName())]; !taken {
			return r, in, generate, nil
		}
		if !generate || attempt+1 >= maxGenerateNameAttempts {
			return nil, nil, false, apierrors.NewAlreadyExists(r.gr, in.GetName())
		}
	}
}

// namespaceAdmits applies the NamespaceLifecycle admission plugin's rule: a namespaced object
// may be created only in a namespace that exists and is not terminating. The caller holds s.mu.
func (s *Store) namespaceAdmits(ns string) error {
	nsGVK := schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
	if ns == "" || !s.scheme.Recognizes(nsGVK) {
		return nil // without corev1 in the scheme there are no namespaces to check
	}
	nsr, err := s.resourceFor(nsGVK)
	if err != nil {
		return err
	}
	e, ok := nsr.objects[objKey("", ns)]
	if !ok {
		return apierrors.NewNotFound(nsr.gr, ns)
	}
	if e.obj.GetDeletionTimestamp() != nil {
		return apierrors.NewForbidden(nsr.gr, ns, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns))
	}
	return nil
}

// update replaces an object (subresource "" or "status"); cand is a normalised private copy.
func (s *Store) update(ctx context.Context, req *Request, gvk schema.GroupVersionKind, cand client.Object, subresource string) (client.Object, error) {
	return s.write(ctx, req, gvk, cand.GetNamespace(), cand.GetName(), subresource, true,
		func(*resource, client.Object) (client.Object, error) {
			out, _ := cand.DeepCopyObject().(client.Object)
			return out, nil
		})
}

// write is the update path update and patch share, as the real server's GuaranteedUpdate: read
// the stored object, build the candidate from it (candFor), run the mutating chain, the kind's
// strategy and the validating chain outside the lock, and commit only if the stored object is
// still the one read; otherwise start again from the new state. A patch enters without the uid
// precondition an update carries (a patch that changes the uid is Invalid instead).
func (s *Store) write(ctx context.Context, req *Request, gvk schema.GroupVersionKind, ns, name, subresource string, uidPrecondition bool,
	candFor func(r *resource, old client.Object) (client.Object, error)) (client.Object, error) {
	for {
		s.mu.Lock()
		r, k, cur, err := s.lookupLocked(gvk, ns, name)
		s.mu.Unlock()
		if r != nil && subresource == "status" && !r.policy.StatusSubresource {
			return nil, apierrors.NewNotFound(r.gr, name)
		}
		if err != nil {
			return nil, err
		}
		cand, err := candFor(r, cur.obj)
		if err != nil {
			return nil, err
		}
		if req != nil && s.opts.Mutate != nil {
			if err := s.opts.Mutate(ctx, &Admission{Request: *req, Object: cand, OldObject: cur.obj}); err != nil {
				return nil, err
			}
		}
		cand, del, err := judgeUpdate(r, cand, cur.obj, subresource, uidPrecondition)
		if err != nil {
			return nil, err
		}
		if req != nil && s.opts.Validate != nil {
			if err := s.opts.Validate(ctx, Admission{Request: *req, Object: cand, OldObject: cur.obj}); err != nil {
				return nil, err
			}
		}
		s.mu.Lock()
		if r.objects[k] != cur {
			s.mu.Unlock()
			continue // written meanwhile: judge again against the new state
		}
		var out client.Object
		if del {
			out = s.remove(r, k)
		} else {
			out, err = s.commit(r, cand, watch.Modified)
		}
		s.mu.Unlock()
		return out, err
	}
}

// judgeUpdate applies the kind's update strategy to cand against the stored old: the
// resourceVersion and uid preconditions, the status subresource, generation, the fields an
// update cannot change, and metadata validation. It reports whether the write deletes the
// object (the last finalizer of a deleting object is gone, the real server's
// ShouldDeleteDuringUpdate). It reads only r's immutable policy.
func judgeUpdate(r *resource, cand, old client.Object, subresource string, uidPrecondition bool) (client.Object, bool, error) {
	if r.policy.ClusterScoped {
		cand.SetNamespace("")
	}
	if uidPrecondition && cand.GetUID() != "" && cand.GetUID() != old.GetUID() {
		// An update names the object's uid as a storage precondition.
		return nil, false, apierrors.NewConflict(r.gr, cand.GetName(), fmt.Errorf("precondition failed: UID in precondition: %v, UID in object meta: %v", cand.GetUID(), old.GetUID()))
	}
	switch rv := cand.GetResourceVersion(); {
	case rv == "" && !r.policy.UnconditionalUpdate:
		// The real server names the resource where the kind belongs (see its store.Update).
		qualified := schema.GroupKind{Group: r.gr.Group, Kind: r.gr.Resource}
		return nil, false, apierrors.NewInvalid(qualified, cand.GetName(), field.ErrorList{
			field.Invalid(field.NewPath("metadata").Child("resourceVersion"), int64(0), "must be specified for an update")})
	case rv != "" && rv != old.GetResourceVersion():
		return nil, false, apierrors.NewConflict(r.gr, cand.GetName(), errModified)
	case rv == "":
		// An unconditional update is validated as if it named the stored resourceVersion.
		cand.SetResourceVersion(old.GetResourceVersion())
	}
	if subresource == "status" {
		cand = prepareStatusUpdate(r, cand, old)
	} else {
		prepareUpdate(r, cand, old)
	}
	beforeUpdate(cand, old)
	if errs := apivalidation.ValidateObjectMetaAccessorUpdate(cand, old, field.NewPath("metadata")); len(errs) > 0 {
		return nil, false, apierrors.NewInvalid(r.gvk.GroupKind(), cand.GetName(), errs)
	}
	del := len(cand.GetFinalizers()) == 0 && len(old.GetFinalizers()) > 0 &&
		old.GetDeletionGracePeriodSeconds() != nil && *old.GetDeletionGracePeriodSeconds() == 0
	return cand, del, nil
}

// prepareUpdate is the kind's strategy for a write to the main resource: status is kept (with
// a status subresource) and generation moves as the kind's policy says.
func prepareUpdate(r *resource, cand, old client.Object) {
	if r.policy.StatusSubresource {
		setField(cand, "Status", getField(old, "Status"))
	}
	cand.SetGeneration(old.GetGeneration())
	switch r.policy.Generation {
	case GenerationSpec:
		if !apiequality.Semantic.DeepEqual(getField(cand, "Spec").Interface(), getField(old, "Spec").Interface()) {
			cand.SetGeneration(old.GetGeneration() + 1)
		}
	case GenerationNonMetadata:
		if !nonMetadataEqual(cand, old) {
			cand.SetGeneration(old.GetGeneration() + 1)
		}
	case GenerationNone:
	}
}

// prepareStatusUpdate is the kind's strategy for a write to the status subresource: a custom
// resource keeps everything but status from the stored object (metadata included); a built-in
// keeps everything but metadata and status, and a Pod also keeps its ownerReferences.
func prepareStatusUpdate(r *resource, cand, old client.Object) client.Object {
	if r.policy.Custom {
		out, _ := old.DeepCopyObject().(client.Object)
		setField(out, "Status", getField(cand, "Status"))
		return out
	}
	v, o := reflect.ValueOf(cand).Elem(), reflect.ValueOf(old).Elem()
	for i := range v.NumField() {
		switch v.Type().Field(i).Name {
		case "TypeMeta", "ObjectMeta", "Status":
		default:
			v.Field(i).Set(o.Field(i))
		}
	}
	if r.gvk.Group == "" && r.gvk.Kind == "Pod" {
		cand.SetOwnerReferences(old.GetOwnerReferences())
		cand.SetDeletionTimestamp(nil)
	}
	cand.SetGeneration(old.GetGeneration())
	return cand
}

// beforeUpdate is rest.BeforeUpdate's part every kind shares: an update cannot change the uid
// (when it names none), the creation timestamp, or remove the deletion timestamp and grace period.
func beforeUpdate(cand, old client.Object) {
	if cand.GetUID() == "" {
		cand.SetUID(old.GetUID())
	}
	if ts := old.GetCreationTimestamp(); !ts.IsZero() {
		cand.SetCreationTimestamp(ts)
	}
	if old.GetDeletionTimestamp() != nil {
		cand.SetDeletionTimestamp(old.GetDeletionTimestamp())
	}
	if old.GetDeletionGracePeriodSeconds() != nil && cand.GetDeletionGracePeriodSeconds() == nil {
		cand.SetDeletionGracePeriodSeconds(old.GetDeletionGracePeriodSeconds())
	}
	cand.SetManagedFields(old.GetManagedFields())
}

// del deletes an object: at once without finalizers; with finalizers it marks it (deletion
// timestamp now, grace period 0, generation+1 the first time) and leaves it until an update
// empties them (the real store's markAsDeleting). With req not nil the validating chain judges
// the deletion first, against the state it deletes.
func (s *Store) del(ctx context.Context, req *Request, gvk schema.GroupVersionKind, ns, name string, pre *metav1.Preconditions) (client.Object, error) {
	if gvk.Group == "" && gvk.Kind == "Namespace" {
		s.mu.Lock()
		r, err := s.resourceFor(gvk)
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return nil, apierrors.NewMethodNotSupported(r.gr, "delete (namespace deletion is not modelled by test/sim/apiserver)")
	}
	for {
		s.mu.Lock()
		r, k, cur, err := s.lookupLocked(gvk, ns, name)
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		old := cur.obj
		if pre != nil && pre.UID != nil && *pre.UID != old.GetUID() {
			return nil, apierrors.NewConflict(r.gr, name, fmt.Errorf("precondition failed: UID in precondition: %v, UID in object meta: %v", *pre.UID, old.GetUID()))
		}
		if pre != nil && pre.ResourceVersion != nil && *pre.ResourceVersion != old.GetResourceVersion() {
			return nil, apierrors.NewConflict(r.gr, name, fmt.Errorf("precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *pre.ResourceVersion, old.GetResourceVersion()))
		}
		if req != nil && s.opts.Validate != nil {
			a := Admission{Request: *req, OldObject: old}
			a.Namespace, a.Name = old.GetNamespace(), old.GetName()
			if err := s.opts.Validate(ctx, a); err != nil {
				return nil, err
			}
		}
		s.mu.Lock()
		if r.objects[k] != cur {
			s.mu.Unlock()
			continue // written meanwhile: judge again against the new state
		}
		out, err := s.deleteLocked(r, k, old)
		s.mu.Unlock()
		return out, err
	}
}

// deleteLocked deletes or marks the stored object old of key k. The caller holds s.mu.
func (s *Store) deleteLocked(r *resource, k string, old client.Object) (client.Object, error) {
	if len(old.GetFinalizers()) == 0 {
		return s.remove(r, k), nil
	}
	cand, _ := old.DeepCopyObject().(client.Object)
	now := metav1.NewTime(s.clock.Now())
	if cand.GetDeletionTimestamp() == nil && cand.GetGeneration() > 0 {
		cand.SetGeneration(cand.GetGeneration() + 1)
	}
	if dt := cand.GetDeletionTimestamp(); dt == nil || dt.After(now.Time) {
		cand.SetDeletionTimestamp(&now)
	}
	zero := int64(0)
	cand.SetDeletionGracePeriodSeconds(&zero)
	return s.commit(r, cand, watch.Modified)
}

// get returns the stored object (callers copy it).
func (s *Store) get(gvk schema.GroupVersionKind, ns, name string) (client.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _, e, err := s.lookupLocked(gvk, ns, name)
	if err != nil {
		return nil, err
	}
	return e.obj, nil
}

// list returns the stored objects a filter selects, in key order, and the list's resourceVersion.
func (s *Store) list(gvk schema.GroupVersionKind, f filter) ([]client.Object, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.resourceFor(gvk)
	if err != nil {
		return nil, 0, err
	}
	var out []client.Object
	for _, k := range r.sortedKeys() {
		if o := r.objects[k].obj; f.matches(o) {
			out = append(out, o)
		}
	}
	return out, s.rv, nil
}

// nonMetadataEqual compares every top-level field but TypeMeta and ObjectMeta.
func nonMetadataEqual(a, b client.Object) bool {
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	for i := range va.NumField() {
		switch va.Type().Field(i).Name {
		case "TypeMeta", "ObjectMeta":
			continue
		}
		if !apiequality.Semantic.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			return false
		}
	}
	return true
}

// getField returns obj's top-level field name (the zero Value when there is none).
func getField(obj client.Object, name string) reflect.Value {
	return reflect.ValueOf(obj).Elem().FieldByName(name)
}

// setField sets obj's top-level field name to v when both exist.
func setField(obj client.Object, name string, v reflect.Value) {
	f := reflect.ValueOf(obj).Elem().FieldByName(name)
	if f.IsValid() && v.IsValid() && f.CanSet() {
		f.Set(v)
	}
}

// fieldType returns the type of t's field name.
func fieldType(t reflect.Type, name string) reflect.Type {
	f, _ := t.FieldByName(name)
	return f.Type
}
