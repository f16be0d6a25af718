package webhooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// The three guarded kinds.
var guardedKinds = []string{infrav1.TerraformClusterKind, infrav1.TerraformMachineKind, infrav1.TerraformMachinePoolKind}

// newObject returns a minimal valid object of kind, of the Cluster API Cluster of its own name
// (the cluster-name label, as startRun's leases and Jobs assume).
func newObject(kind, ns, name string) client.Object {
	return objects.OfKind(kind, ns, name).Obj()
}

// u returns an empty unstructured object of kind with its name, for reads and patches.
func u(kind, ns, name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	o.SetGroupVersionKind(infrav1.GroupVersion.WithKind(kind))
	o.SetNamespace(ns)
	o.SetName(name)
	return o
}

// mark is one of the three things the guard protects.
type mark string

const (
	markBlockMove mark = "block-move"
	markFinalizer mark = "finalizer"
	markActiveJob mark = "activeJob"
)

var allMarks = []mark{markBlockMove, markFinalizer, markActiveJob}

// hasMark reads the object and reports whether it carries m.
func hasMark(ctx context.Context, c client.Client, kind, ns, name string, m mark) (bool, error) {
	o := u(kind, ns, name)
	if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
		return false, err
	}
	switch m {
	case markBlockMove:
		_, ok := o.GetAnnotations()[infrav1.BlockMoveAnnotation]
		return ok, nil
	case markFinalizer:
		return slices.Contains(o.GetFinalizers(), infrav1.Finalizer), nil
	default:
		n, _, _ := unstructured.NestedString(o.Object, "status", "activeJob", "name")
		return n != "", nil
	}
}

// ensureMark puts m on the object (adding is never guarded). activeJob names job.
func ensureMark(ctx context.Context, c client.Client, kind, ns, name string, m mark, job string) error {
	has, err := hasMark(ctx, c, kind, ns, name, m)
	if err != nil || has {
		return err
	}
	if strings.HasSuffix(name, ssaSuffix) {
		return applyMarks(ctx, c, kind, ns, name, m, true, job)
	}
	o := u(kind, ns, name)
	switch m {
	case markBlockMove:
		return c.Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"clusterctl.cluster.x-k8s.io/block-move":""}}}`)))
	case markFinalizer:
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return err
		}
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{
			"finalizers": append(o.GetFinalizers(), infrav1.Finalizer), "resourceVersion": o.GetResourceVersion()}})
		return c.Patch(ctx, o, client.RawPatch(types.MergePatchType, b))
	default:
		// No startTime: server-side apply must be able to own the whole activeJob.
		return c.Status().Patch(ctx, o, client.RawPatch(types.MergePatchType,
			[]byte(fmt.Sprintf(`{"status":{"activeJob":{"name":%q,"operation":"Apply"}}}`, job))))
	}
}

// method is one way a client can write an object.
type method string

const (
	methodUpdate method = "update (PUT)"
	methodMerge  method = "JSON merge patch"
	methodJSON   method = "JSON patch remove"
	methodSMP    method = "strategic merge patch"
	methodSSA    method = "server-side apply, force"
)

var allMethods = []method{methodUpdate, methodMerge, methodJSON, methodSMP, methodSSA}

const ssaManager = "captf-test-ssa"

// ssaSuffix ends the name of an object that is written with server-side apply only.
const ssaSuffix = "-ssa"

// remove removes m from the object with method. block-move and the finalizer are written on
// the object, activeJob on its /status subresource (the API server ignores status on the
// object itself and metadata on /status).
func remove(ctx context.Context, c client.Client, kind, ns, name string, m mark, how method) error {
	o := u(kind, ns, name)
	if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
		return err
	}
	var w client.SubResourceWriter
	if m == markActiveJob {
		w = c.Status()
	}
	patch := func(pt types.PatchType, body string, opts ...client.PatchOption) error {
		if w != nil {
			var so []client.SubResourcePatchOption
			for _, op := range opts {
				so = append(so, op.(client.SubResourcePatchOption))
			}
			return w.Patch(ctx, o, client.RawPatch(pt, []byte(body)), so...)
		}
		return c.Patch(ctx, o, client.RawPatch(pt, []byte(body)), opts...)
	}
	others := slices.DeleteFunc(slices.Clone(o.GetFinalizers()), func(f string) bool { return f == infrav1.Finalizer })
	switch how {
	case methodUpdate:
		switch m {
		case markBlockMove:
			a := o.GetAnnotations()
			delete(a, infrav1.BlockMoveAnnotation)
			o.SetAnnotations(a)
		case markFinalizer:
			o.SetFinalizers(others)
		default:
			unstructured.RemoveNestedField(o.Object, "status", "activeJob")
			return w.Update(ctx, o)
		}
		return c.Update(ctx, o)
	case methodMerge:
		switch m {
		case markBlockMove:
			return patch(types.MergePatchType, `{"metadata":{"annotations":{"clusterctl.cluster.x-k8s.io/block-move":null}}}`)
		case markFinalizer:
			b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": others}})
			return patch(types.MergePatchType, string(b))
		default:
			return patch(types.MergePatchType, `{"status":{"activeJob":null}}`)
		}
	case methodJSON:
		switch m {
		case markBlockMove:
			return patch(types.JSONPatchType, `[{"op":"remove","path":"/metadata/annotations/clusterctl.cluster.x-k8s.io~1block-move"}]`)
		case markFinalizer:
			i := slices.Index(o.GetFinalizers(), infrav1.Finalizer)
			return patch(types.JSONPatchType, fmt.Sprintf(`[{"op":"test","path":"/metadata/finalizers/%d","value":%q},{"op":"remove","path":"/metadata/finalizers/%d"}]`, i, infrav1.Finalizer, i))
		default:
			return patch(types.JSONPatchType, `[{"op":"remove","path":"/status/activeJob"}]`)
		}
	case methodSMP:
		switch m {
		case markBlockMove:
			return patch(types.StrategicMergePatchType, `{"metadata":{"annotations":{"clusterctl.cluster.x-k8s.io/block-move":null}}}`)
		case markFinalizer:
			return patch(types.StrategicMergePatchType, `{"metadata":{"$deleteFromPrimitiveList/finalizers":["`+infrav1.Finalizer+`"]}}`)
		default:
			return patch(types.StrategicMergePatchType, `{"status":{"activeJob":null}}`)
		}
	default:
		job, _, _ := unstructured.NestedString(o.Object, "status", "activeJob", "name")
		return applyMarks(ctx, c, o.GetKind(), o.GetNamespace(), o.GetName(), m, false, job)
	}
}

// Server-side apply removes a field an applier stops sending only when no other manager owns
// it too. An object whose marks an applier may remove is therefore one that applier created
// and keeps writing with apply: createBySSA makes it, applyMarks writes it with the marks
// wanted, and the removal is an apply of the same configuration without the mark.

// ssaConfig is the applier's configuration of the object: the spec, and the marks wanted.
func ssaConfig(kind, ns, name string, blockMove, finalizer bool) []byte {
	meta := map[string]any{"name": name, "namespace": ns, "labels": map[string]any{infrav1.ClusterNameLabel: name}}
	if blockMove {
		meta["annotations"] = map[string]any{infrav1.BlockMoveAnnotation: ""}
	}
	if finalizer {
		meta["finalizers"] = []string{infrav1.Finalizer}
	}
	b, _ := json.Marshal(map[string]any{
		"apiVersion": infrav1.GroupVersion.String(), "kind": kind, "metadata": meta,
		"spec": map[string]any{"module": map[string]any{"image": "example.com/module:1"}},
	})
	return b
}

// ssaStatus is the applier's configuration of /status: activeJob names job, or nothing.
func ssaStatus(kind, ns, name, job string) []byte {
	// observedGeneration keeps status an object when activeJob goes (an empty status would be
	// applied as null, which the schema refuses).
	status := map[string]any{"observedGeneration": 1}
	if job != "" {
		status["activeJob"] = map[string]any{"name": job, "operation": "Apply"}
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": infrav1.GroupVersion.String(), "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns}, "status": status})
	return b
}

var ssaOpts = []client.PatchOption{client.FieldOwner(ssaManager), client.ForceOwnership}

// createBySSA creates the object with apply, carrying block-move and the finalizer.
func createBySSA(ctx context.Context, c client.Client, kind, ns, name string) error {
	return c.Patch(ctx, u(kind, ns, name), client.RawPatch(types.ApplyPatchType, ssaConfig(kind, ns, name, true, true)), ssaOpts...)
}

// applyMarks applies the configuration with the marks the object has, plus or minus m.
func applyMarks(ctx context.Context, c client.Client, kind, ns, name string, m mark, present bool, job string) error {
	o := u(kind, ns, name)
	if m == markActiveJob {
		if !present {
			job = ""
		}
		so := []client.SubResourcePatchOption{client.FieldOwner(ssaManager), client.ForceOwnership}
		return c.Status().Patch(ctx, o, client.RawPatch(types.ApplyPatchType, ssaStatus(kind, ns, name, job)), so...)
	}
	bm, err := hasMark(ctx, c, kind, ns, name, markBlockMove)
	if err != nil {
		return err
	}
	fin, err := hasMark(ctx, c, kind, ns, name, markFinalizer)
	if err != nil {
		return err
	}
	if m == markBlockMove {
		bm = present
	} else {
		fin = present
	}
	return c.Patch(ctx, o, client.RawPatch(types.ApplyPatchType, ssaConfig(kind, ns, name, bm, fin)), ssaOpts...)
}

// run is a Job of an object that runs: its run lease (taken by runlease, as the controller
// takes it), the Job, and its running pod.
type run struct {
	owner runlease.Owner
	job   *batchv1.Job
	pod   *corev1.Pod
}

// startRun takes the run lease for Job number seq of the object, creates that Job and plays
// the Job controller and kubelet to make it run.
func startRun(ctx context.Context, c client.Client, kind, ns, name string, seq int64) (*run, error) {
	r, err := takeLease(ctx, c, kind, ns, name, seq)
	if err != nil {
		return nil, err
	}
	if err := c.Create(ctx, r.job); err != nil {
		return nil, fmt.Errorf("create job: %w", err)
	}
	if r.pod, err = envtest.StartJob(ctx, c, r.job); err != nil {
		return nil, err
	}
	return r, nil
}

// takeLease takes the run lease (and, for a TerraformCluster, the cluster lease) for Job number
// seq as the manager does, and returns the Job it names, not created: the builder's labels
// and the controller owner reference to the object. c writes the leases, so it must be the
// manager's client when a lease of that name may already be held.
func takeLease(ctx context.Context, c client.Client, kind, ns, name string, seq int64) (*run, error) {
	owner := runlease.Owner{Namespace: ns, Kind: kind, Name: name, Cluster: name}
	holder := naming.JobName(owner.Suffix(), seq)
	obj := u(kind, ns, name)
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return nil, fmt.Errorf("read the Job's owner: %w", err)
	}
	res, err := runlease.New(c, c, runlease.DefaultOptions()).Acquire(ctx, runlease.Request{
		Owner: owner, Holder: holder, Operation: infrav1.OperationApply})
	if err != nil {
		return nil, err
	}
	if !res.Acquired {
		return nil, fmt.Errorf("run lease not acquired: %+v", res.Wait)
	}
	job := objects.Job(ns, holder).Of(kind, name, name).Label(infrav1.OperationLabel, string(infrav1.OperationApply)).Owner(obj).Obj()
	return &run{owner: owner, job: job}, nil
}

// finish ends the Job and its pod successfully.
func (r *run) finish(ctx context.Context, c client.Client) error {
	return envtest.FinishJob(ctx, c, r.job, r.pod, true, `{"outcome":"Succeeded"}`)
}

// ageLease moves the lease's times secs into the past, as if its holder took it then. Only the
// manager may do that to a live lease: c must be the manager's client.
func ageLease(ctx context.Context, c client.Client, ns, name string, secs int) error {
	l := &coordinationv1.Lease{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, l); err != nil {
		return err
	}
	at := metav1.NewMicroTime(time.Now().Add(-time.Duration(secs) * time.Second))
	l.Spec.AcquireTime, l.Spec.RenewTime = &at, &at
	l.Annotations[infrav1.LeaseAcquiredAtAnnotation] = at.UTC().Format(time.RFC3339)
	return c.Update(ctx, l)
}

// jobComplete are the conditions the Job controller writes when a Job succeeds.
func jobComplete() []batchv1.JobCondition {
	now := metav1.Now()
	return []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
	}
}
