package apiserver_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	testenv "github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/sim/apiserver"
)

// run is one sequence's run against one server: it records what a client can observe, in a
// form that is the same for both servers when they behave the same (no absolute
// resourceVersions, uids or times).
type run struct {
	t   *testing.T
	ctx context.Context
	c   client.WithWatch
	ns  string
	obs []string
}

func (r *run) rec(format string, args ...any) { r.obs = append(r.obs, fmt.Sprintf(format, args...)) }

// outcome names an error by what callers test: its reason and HTTP code.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return fmt.Sprintf("%s/%d", st.Status().Reason, st.Status().Code)
	}
	return "error: " + err.Error()
}

// must fails the sequence on an error where both servers are expected to succeed.
func (r *run) must(err error, what string) {
	r.t.Helper()
	if err != nil {
		r.t.Fatalf("%s: %v", what, err)
	}
}

func (r *run) cm(name string, lbl map[string]string, finalizers ...string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.ns, Labels: lbl, Finalizers: finalizers},
		Data:       map[string]string{"k": "v"},
	}
}

func (r *run) machine(name string, finalizers ...string) *infrav1.TerraformMachine {
	m := &infrav1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.ns, Finalizers: finalizers}}
	m.Spec.Module = infrav1.ModuleSource{Image: "registry.example/module:1", Path: "a"}
	return m
}

// state records an object's observable state: existence, terminating, finalizers, generation.
func (r *run) state(label string, obj client.Object) {
	err := r.c.Get(r.ctx, client.ObjectKeyFromObject(obj), obj)
	if err != nil {
		r.rec("%s: get %s", label, outcome(err))
		return
	}
	grace := "nil"
	if g := obj.GetDeletionGracePeriodSeconds(); g != nil {
		grace = fmt.Sprint(*g)
	}
	r.rec("%s: exists terminating=%t grace=%s finalizers=%v generation=%d labels=%v", label,
		obj.GetDeletionTimestamp() != nil, grace, obj.GetFinalizers(), obj.GetGeneration(), obj.GetLabels())
}

// events reads a watch until the event about the object named last, and records them.
func (r *run) events(w watch.Interface, last string) {
	r.t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	prev := ""
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				r.t.Fatalf("watch closed before the event about %s", last)
			}
			o, isObj := ev.Object.(client.Object)
			if !isObj {
				r.t.Fatalf("watch event %s carries %T", ev.Type, ev.Object)
			}
			r.rec("event %s %s labels=%v finalizers=%v rv increases=%t", ev.Type, o.GetName(), o.GetLabels(), o.GetFinalizers(),
				prev == "" || (rvAtLeast(o.GetResourceVersion(), prev) && o.GetResourceVersion() != prev))
			prev = o.GetResourceVersion()
			if o.GetName() == last {
				return
			}
		case <-timeout.C:
			r.t.Fatalf("no watch event about %s within 30s", last)
		}
	}
}

// sequence is one row of the conformance table.
type sequence struct {
	name string
	run  func(r *run)
}

var sequences = []sequence{
	{"create-and-get", func(r *run) {
		o := r.cm("a", map[string]string{"app": "x"})
		r.rec("create %s", outcome(r.c.Create(r.ctx, o)))
		r.rec("uid set=%t rv set=%t created set=%t generation=%d", o.UID != "", o.ResourceVersion != "", !o.CreationTimestamp.IsZero(), o.Generation)
		got := &corev1.ConfigMap{}
		r.rec("get %s", outcome(r.c.Get(r.ctx, client.ObjectKeyFromObject(o), got)))
		r.rec("same rv=%t uid=%t data=%v", got.ResourceVersion == o.ResourceVersion, got.UID == o.UID, got.Data)
		r.rec("create again %s", outcome(r.c.Create(r.ctx, r.cm("a", nil))))
		withRV := r.cm("b", nil)
		withRV.ResourceVersion = "12345"
		r.rec("create with resourceVersion %s", outcome(r.c.Create(r.ctx, withRV)))
		gen := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "gen-", Namespace: r.ns}}
		r.rec("create generateName %s", outcome(r.c.Create(r.ctx, gen)))
		r.rec("generated name prefix=%t len=%d", strings.HasPrefix(gen.Name, "gen-"), len(gen.Name))
		r.rec("create bad name %s", outcome(r.c.Create(r.ctx, r.cm("Bad_Name", nil))))
		missing := r.cm("c", nil)
		missing.Namespace = r.ns + "-missing"
		r.rec("create in missing namespace %s", outcome(r.c.Create(r.ctx, missing)))
		r.rec("get missing %s", outcome(r.c.Get(r.ctx, client.ObjectKey{Namespace: r.ns, Name: "nope"}, &corev1.ConfigMap{})))
	}},
	{"update-resource-versions", func(r *run) {
		o := r.cm("a", nil)
		r.must(r.c.Create(r.ctx, o), "create")
		stale := o.DeepCopy()
		rv0 := o.ResourceVersion
		o.Data["k"] = "v2"
		r.rec("update %s rv changed=%t", outcome(r.c.Update(r.ctx, o)), o.ResourceVersion != rv0)
		stale.Data["k"] = "v3"
		r.rec("update stale rv %s", outcome(r.c.Update(r.ctx, stale)))
		rv1 := o.ResourceVersion
		r.rec("no-op update %s rv changed=%t", outcome(r.c.Update(r.ctx, o)), o.ResourceVersion != rv1)
		blind := r.cm("a", nil)
		blind.Data["k"] = "v4"
		r.rec("update without rv %s data=%v", outcome(r.c.Update(r.ctx, blind)), blind.Data)
		r.rec("update missing %s", outcome(r.c.Update(r.ctx, r.cm("nope", nil))))
		uid := r.cm("a", nil)
		r.must(r.c.Get(r.ctx, client.ObjectKeyFromObject(uid), uid), "get")
		uid.UID = types.UID("00000000-1111-2222-3333-444444444444")
		r.rec("update changing uid %s", outcome(r.c.Update(r.ctx, uid)))
		m := r.machine("m")
		r.must(r.c.Create(r.ctx, m), "create machine")
		m.ResourceVersion = ""
		m.Spec.Module.Path = "b"
		r.rec("custom resource update without rv %s", outcome(r.c.Update(r.ctx, m)))
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: r.ns}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a")}}
		r.must(r.c.Create(r.ctx, l), "create lease")
		l.ResourceVersion = ""
		l.Spec.HolderIdentity = ptr.To("b")
		r.rec("lease update without rv %s", outcome(r.c.Update(r.ctx, l)))
	}},
	{"custom-resource-generation-and-status", func(r *run) {
		m := r.machine("m")
		m.Status.FailureDomain = "on-create"
		r.rec("create %s generation=%d status=%q", outcome(r.c.Create(r.ctx, m)), m.Generation, m.Status.FailureDomain)
		m.Spec.Module.Path = "b"
		r.rec("spec update %s generation=%d", outcome(r.c.Update(r.ctx, m)), m.Generation)
		rv := m.ResourceVersion
		m.Labels = map[string]string{"l": "1"}
		r.rec("label update %s generation=%d rv changed=%t", outcome(r.c.Update(r.ctx, m)), m.Generation, m.ResourceVersion != rv)
		rv = m.ResourceVersion
		m.Status.FailureDomain = "via-main"
		r.rec("status via main %s generation=%d rv changed=%t status=%q", outcome(r.c.Update(r.ctx, m)), m.Generation, m.ResourceVersion != rv, m.Status.FailureDomain)
		m.Status.FailureDomain = "fd1"
		m.Spec.Module.Path = "c"
		m.Labels = map[string]string{"l": "2"}
		r.rec("status update %s generation=%d status=%q path=%q labels=%v", outcome(r.c.Status().Update(r.ctx, m)), m.Generation, m.Status.FailureDomain, m.Spec.Module.Path, m.Labels)
		stale := m.DeepCopy()
		m.Status.FailureDomain = "fd2"
		r.must(r.c.Status().Update(r.ctx, m), "status update")
		stale.Status.FailureDomain = "fd3"
		r.rec("stale status update %s", outcome(r.c.Status().Update(r.ctx, stale)))
		r.state("machine", &infrav1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: r.ns}})
		r.rec("status of a kind without it %s", outcome(r.c.Status().Update(r.ctx, r.cm("x", nil))))
	}},
	{"job-generation-and-status", func(r *run) {
		j := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: r.ns},
			Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](1), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			}}},
			Status: batchv1.JobStatus{Active: 3},
		}
		r.rec("create %s generation=%d active=%d", outcome(r.c.Create(r.ctx, j)), j.Generation, j.Status.Active)
		j.Spec.Parallelism = ptr.To[int32](2)
		r.rec("spec update %s generation=%d", outcome(r.c.Update(r.ctx, j)), j.Generation)
		j.Labels = map[string]string{"l": "1"}
		r.rec("label update %s generation=%d", outcome(r.c.Update(r.ctx, j)), j.Generation)
		now := metav1.Now()
		j.Status.StartTime = &now
		j.Spec.Parallelism = ptr.To[int32](3)
		j.Labels = map[string]string{"l": "2"}
		r.rec("status update %s generation=%d start set=%t parallelism=%d labels=%v", outcome(r.c.Status().Update(r.ctx, j)),
			j.Generation, j.Status.StartTime != nil, *j.Spec.Parallelism, j.Labels)
	}},
	{"patches", func(r *run) {
		o := r.cm("a", map[string]string{"app": "x"})
		r.must(r.c.Create(r.ctx, o), "create")
		base := o.DeepCopy()
		o.Data["k"] = "merge"
		r.rec("merge patch %s data=%v", outcome(r.c.Patch(r.ctx, o, client.MergeFrom(base))), o.Data)
		stale := base.DeepCopy()
		stale.Data["k"] = "locked"
		r.rec("merge patch with stale optimistic lock %s", outcome(r.c.Patch(r.ctx, stale, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))))
		cur := o.DeepCopy()
		o.Data["k"] = "locked"
		r.rec("merge patch with current optimistic lock %s data=%v", outcome(r.c.Patch(r.ctx, o, client.MergeFromWithOptions(cur, client.MergeFromWithOptimisticLock{}))), o.Data)
		jp := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"add","path":"/metadata/labels/extra","value":"y"}]`))
		r.rec("json patch %s labels=%v", outcome(r.c.Patch(r.ctx, o, jp)), o.Labels)
		failing := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"test","path":"/data/k","value":"other"}]`))
		r.rec("json patch failing test %s", outcome(r.c.Patch(r.ctx, o, failing)))
		r.rec("malformed json patch %s", outcome(r.c.Patch(r.ctx, o, client.RawPatch(types.JSONPatchType, []byte(`{`)))))
		smp := client.RawPatch(types.StrategicMergePatchType, []byte(`{"metadata":{"finalizers":["a/b"]},"data":{"n":"1"}}`))
		r.rec("strategic merge patch %s data=%v finalizers=%v", outcome(r.c.Patch(r.ctx, o, smp)), o.Data, o.Finalizers)
		r.rec("patch missing %s", outcome(r.c.Patch(r.ctx, r.cm("nope", nil), client.RawPatch(types.MergePatchType, []byte(`{}`)))))
		m := r.machine("m")
		r.must(r.c.Create(r.ctx, m), "create machine")
		r.rec("strategic merge patch of a custom resource %s", outcome(r.c.Patch(r.ctx, m, client.RawPatch(types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`)))))
		mb := m.DeepCopy()
		m.Status.FailureDomain = "patched"
		m.Spec.Module.Path = "patched"
		r.rec("status merge patch %s generation=%d status=%q path=%q", outcome(r.c.Status().Patch(r.ctx, m, client.MergeFrom(mb))), m.Generation, m.Status.FailureDomain, m.Spec.Module.Path)
		mb = m.DeepCopy()
		m.Spec.Module.Path = "patched"
		r.rec("spec merge patch %s generation=%d path=%q status=%q", outcome(r.c.Patch(r.ctx, m, client.MergeFrom(mb))), m.Generation, m.Spec.Module.Path, m.Status.FailureDomain)
	}},
	{"delete-with-finalizers", func(r *run) {
		o := r.cm("a", nil, "example.com/f")
		r.must(r.c.Create(r.ctx, o), "create")
		r.rec("delete %s", outcome(r.c.Delete(r.ctx, o)))
		r.state("after delete", o)
		rv := o.ResourceVersion
		r.rec("delete again %s", outcome(r.c.Delete(r.ctx, o)))
		r.must(r.c.Get(r.ctx, client.ObjectKeyFromObject(o), o), "get")
		r.rec("rv changed by second delete=%t", o.ResourceVersion != rv)
		add := o.DeepCopy()
		add.Finalizers = append(add.Finalizers, "example.com/g")
		r.rec("add finalizer while terminating %s", outcome(r.c.Update(r.ctx, add)))
		o.Labels = map[string]string{"still": "writable"}
		r.rec("label update while terminating %s", outcome(r.c.Update(r.ctx, o)))
		o.DeletionTimestamp = nil
		o.Finalizers = nil
		r.rec("remove finalizers %s", outcome(r.c.Update(r.ctx, o)))
		r.state("after finalizers removed", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: r.ns}})
		m := r.machine("m", "example.com/f")
		r.must(r.c.Create(r.ctx, m), "create machine")
		r.rec("delete machine %s", outcome(r.c.Delete(r.ctx, m)))
		r.state("machine after delete", m)
		mb := m.DeepCopy()
		m.Finalizers = nil
		r.rec("patch finalizers away %s", outcome(r.c.Patch(r.ctx, m, client.MergeFrom(mb))))
		r.state("machine after patch", m)
		p := r.cm("p", nil)
		p.Finalizers = []string{"example.com/f"}
		r.must(r.c.Create(r.ctx, p), "create p")
		r.must(r.c.Delete(r.ctx, p), "delete p")
		pb := p.DeepCopy()
		p.Finalizers = append(p.Finalizers, "example.com/g")
		r.rec("patch adding finalizer while terminating %s", outcome(r.c.Patch(r.ctx, p, client.MergeFrom(pb))))
	}},
	{"delete-preconditions", func(r *run) {
		o := r.cm("a", nil)
		r.must(r.c.Create(r.ctx, o), "create")
		r.rec("delete uid mismatch %s", outcome(r.c.Delete(r.ctx, o, client.Preconditions{UID: ptr.To(types.UID("00000000-1111-2222-3333-444444444444"))})))
		r.rec("delete rv mismatch %s", outcome(r.c.Delete(r.ctx, o, client.Preconditions{ResourceVersion: ptr.To("1")})))
		r.state("after refused deletes", o)
		r.rec("delete matching %s", outcome(r.c.Delete(r.ctx, o, client.Preconditions{UID: ptr.To(o.UID), ResourceVersion: ptr.To(o.ResourceVersion)})))
		r.state("after delete", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: r.ns}})
		r.rec("delete missing %s", outcome(r.c.Delete(r.ctx, r.cm("a", nil))))
	}},
	{"list-selectors", func(r *run) {
		for _, c := range []struct{ name, tier string }{{"d", "web"}, {"b", "db"}, {"a", "web"}, {"c", ""}} {
			lbl := map[string]string{"app": "x"}
			if c.tier != "" {
				lbl["tier"] = c.tier
			}
			r.must(r.c.Create(r.ctx, r.cm(c.name, lbl)), "create "+c.name)
		}
		last := r.cm("e", map[string]string{"app": "y"})
		r.must(r.c.Create(r.ctx, last), "create e")
		names := func(opts ...client.ListOption) string {
			l := &corev1.ConfigMapList{}
			if err := r.c.List(r.ctx, l, append([]client.ListOption{client.InNamespace(r.ns)}, opts...)...); err != nil {
				return outcome(err)
			}
			var ns []string
			for _, i := range l.Items {
				ns = append(ns, i.Name)
			}
			return fmt.Sprintf("%v listRV>=last=%t", ns, rvAtLeast(l.ResourceVersion, last.ResourceVersion))
		}
		r.rec("all %s", names())
		r.rec("app=x %s", names(client.MatchingLabels{"app": "x"}))
		sel, err := labels.Parse("tier in (web,db),app!=y")
		r.must(err, "parse selector")
		r.rec("tier in (web,db) %s", names(client.MatchingLabelsSelector{Selector: sel}))
		sel, err = labels.Parse("!tier")
		r.must(err, "parse selector")
		r.rec("!tier %s", names(client.MatchingLabelsSelector{Selector: sel}))
		r.rec("name=b %s", names(client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", "b")}))
		r.rec("namespace field %s", names(client.MatchingFields{"metadata.namespace": r.ns}))
		r.rec("unsupported field %s", names(client.MatchingFields{"data.k": "v"}))
		u := &unstructured.UnstructuredList{}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMapList")
		r.must(r.c.List(r.ctx, u, client.InNamespace(r.ns), client.MatchingLabels{"tier": "web"}), "list unstructured")
		var un []string
		for _, i := range u.Items {
			un = append(un, i.GetName()+":"+i.GetKind())
		}
		r.rec("unstructured tier=web %v", un)
	}},
	{"metadata-and-unstructured-reads", func(r *run) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: r.ns, Labels: map[string]string{"a": "b"}}, Data: map[string][]byte{"x": []byte("y")}}
		r.must(r.c.Create(r.ctx, s), "create")
		pm := &metav1.PartialObjectMetadata{}
		pm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		r.rec("get metadata %s labels=%v kind=%s", outcome(r.c.Get(r.ctx, client.ObjectKeyFromObject(s), pm)), pm.Labels, pm.Kind)
		pl := &metav1.PartialObjectMetadataList{}
		pl.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
		r.rec("list metadata %s n=%d", outcome(r.c.List(r.ctx, pl, client.InNamespace(r.ns))), len(pl.Items))
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("Secret")
		r.rec("get unstructured %s", outcome(r.c.Get(r.ctx, client.ObjectKeyFromObject(s), u)))
		d, _, _ := unstructured.NestedStringMap(u.Object, "data")
		r.rec("unstructured data=%v", d)
		mb := pm.DeepCopy()
		pm.Annotations = map[string]string{"seen": "yes"}
		r.rec("patch metadata %s annotations=%v", outcome(r.c.Patch(r.ctx, pm, client.MergeFrom(mb))), pm.Annotations)
		u.SetLabels(map[string]string{"a": "c"})
		r.rec("update unstructured %s", outcome(r.c.Update(r.ctx, u)))
		r.state("secret", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: r.ns}})
	}},
	{"watch-from-resource-version", func(r *run) {
		o := r.cm("a", map[string]string{"w": "1"}, "example.com/f")
		r.must(r.c.Create(r.ctx, o), "create")
		r.must(r.c.Create(r.ctx, r.cm("other", map[string]string{"w": "0"})), "create other")
		w, err := r.c.Watch(r.ctx, &corev1.ConfigMapList{}, client.InNamespace(r.ns), client.MatchingLabels{"w": "1"},
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: o.ResourceVersion}})
		r.must(err, "watch")
		defer w.Stop()
		o.Data["k"] = "2"
		r.must(r.c.Update(r.ctx, o), "update")
		o.Labels["w"] = "0"
		r.must(r.c.Update(r.ctx, o), "label out")
		o.Labels["w"] = "1"
		r.must(r.c.Update(r.ctx, o), "label in")
		r.must(r.c.Delete(r.ctx, o), "delete")
		r.must(r.c.Get(r.ctx, client.ObjectKeyFromObject(o), o), "get")
		o.Finalizers = nil
		r.must(r.c.Update(r.ctx, o), "remove finalizers")
		r.must(r.c.Create(r.ctx, r.cm("zz-last", map[string]string{"w": "1"})), "create last")
		r.events(w, "zz-last")
	}},
	{"watch-initial-state", func(r *run) {
		for _, n := range []string{"c", "a", "b"} {
			r.must(r.c.Create(r.ctx, r.cm(n, map[string]string{"w": "1"})), "create "+n)
		}
		m := r.machine("m")
		r.must(r.c.Create(r.ctx, m), "create machine")
		w, err := r.c.Watch(r.ctx, &corev1.ConfigMapList{}, client.InNamespace(r.ns))
		r.must(err, "watch")
		defer w.Stop()
		r.must(r.c.Delete(r.ctx, r.cm("b", nil)), "delete b")
		r.must(r.c.Create(r.ctx, r.cm("zz-last", nil)), "create last")
		r.events(w, "zz-last")
		uw, err := r.c.Watch(r.ctx, &infrav1.TerraformMachineList{}, client.InNamespace(r.ns))
		r.must(err, "watch machines")
		defer uw.Stop()
		m.Status.FailureDomain = "x"
		r.must(r.c.Status().Update(r.ctx, m), "status update")
		r.must(r.c.Create(r.ctx, r.machine("zz-last")), "create last machine")
		r.events(uw, "zz-last")
	}},
}

// rvAtLeast compares two resourceVersions as numbers (both servers use etcd-style counters).
func rvAtLeast(a, b string) bool {
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a >= b
}

// TestConformance runs every sequence against envtest's real kube-apiserver and against the
// store, and requires the same observations.
func TestConformance(t *testing.T) {
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme, err := setup.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	real, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	for i, seq := range sequences {
		t.Run(seq.name, func(t *testing.T) {
			ns := fmt.Sprintf("sim-%d", i)
			want := runOn(t, real, scheme, ns, seq)
			store, err := apiserver.New(scheme, apiserver.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := runOn(t, store.Client(), scheme, ns, seq)
			t.Logf("kube-apiserver's observations:\n  %s", strings.Join(want, "\n  "))
			if !slices.Equal(want, got) {
				t.Errorf("the store differs from kube-apiserver:\n%s", diff(want, got))
			}
		})
	}
}

// runOn runs a sequence in a new namespace of one server and returns its observations.
func runOn(t *testing.T, c client.WithWatch, _ *runtime.Scheme, ns string, seq sequence) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	r := &run{t: t, ctx: ctx, c: c, ns: ns}
	seq.run(r)
	return r.obs
}

// diff lists both observation lists line by line, marking the lines that differ.
func diff(want, got []string) string {
	var b strings.Builder
	for i := range max(len(want), len(got)) {
		var w, g string
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		mark := "  "
		if w != g {
			mark = "!="
		}
		fmt.Fprintf(&b, "%s kube-apiserver: %s\n   store:          %s\n", mark, w, g)
	}
	return b.String()
}
