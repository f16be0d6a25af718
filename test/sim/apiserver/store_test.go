package apiserver_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	testenv "github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/sim/apiserver"
)

func newStore(tb testing.TB, opts apiserver.Options) (*apiserver.Store, *runtime.Scheme) {
	tb.Helper()
	scheme, err := setup.NewScheme()
	if err != nil {
		tb.Fatal(err)
	}
	s, err := apiserver.New(scheme, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return s, scheme
}

// TestInBubble runs the store inside a synctest bubble: timestamps come from the bubble's fake
// clock, a Deliver hook delays watch events on that clock, and the watch goroutine ends with
// the watch (synctest.Test fails if a goroutine of the bubble is left behind).
func TestInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var delivered []string
		s, _ := newStore(t, apiserver.Options{Deliver: func(_ context.Context, d apiserver.Delivery) error {
			time.Sleep(time.Second)
			delivered = append(delivered, fmt.Sprintf("%s %s rv=%d", d.Type, d.Name, d.ResourceVersion))
			return nil
		}})
		c := s.Client()
		w, err := c.Watch(t.Context(), &corev1.ConfigMapList{}, client.InNamespace("default"))
		if err != nil {
			t.Fatal(err)
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default", Finalizers: []string{"example.com/f"}}}
		if err := c.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
		if !cm.CreationTimestamp.Time.Equal(start) {
			t.Errorf("creationTimestamp %v, want the bubble's time %v", cm.CreationTimestamp, start)
		}
		time.Sleep(time.Hour)
		if err := c.Delete(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(cm), cm); err != nil {
			t.Fatal(err)
		}
		if cm.DeletionTimestamp == nil || !cm.DeletionTimestamp.Time.Equal(start.Add(time.Hour)) {
			t.Errorf("deletionTimestamp %v, want %v", cm.DeletionTimestamp, start.Add(time.Hour))
		}
		var got []watch.EventType
		for range 2 {
			ev := <-w.ResultChan()
			got = append(got, ev.Type)
		}
		if want := []watch.EventType{watch.Added, watch.Modified}; !slices.Equal(got, want) {
			t.Errorf("events %v, want %v", got, want)
		}
		// The Added event waited one fake second from the watch's start, the Modified one a
		// second after it was committed an hour later.
		if elapsed := time.Since(start); elapsed != time.Hour+time.Second {
			t.Errorf("events arrived after %v of fake time, want 1h0m1s", elapsed)
		}
		w.Stop()
		synctest.Wait()
		if len(delivered) != 2 {
			t.Errorf("Deliver saw %v, want 2 events", delivered)
		}
	})
}

// TestSeedDeterminesRun runs the same writes twice and requires the same names, uids and
// resourceVersions; a different seed generates different names.
func TestSeedDeterminesRun(t *testing.T) {
	trace := func(seed uint64) []string {
		s, _ := newStore(t, apiserver.Options{Seed: seed})
		c := s.Client()
		var out []string
		for range 3 {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "g-", Namespace: "default"}}
			if err := c.Create(t.Context(), cm); err != nil {
				t.Fatal(err)
			}
			out = append(out, cm.Name, string(cm.UID), cm.ResourceVersion)
		}
		return out
	}
	a, b := trace(7), trace(7)
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different runs:\n%v\n%v", a, b)
	}
	if c := trace(8); slices.Equal(a[:1], c[:1]) {
		t.Errorf("seeds 7 and 8 generated the same name %s", a[0])
	}
}

// TestReadsAreCopies mutates what Get and List return and requires the store unchanged.
func TestReadsAreCopies(t *testing.T) {
	s, _ := newStore(t, apiserver.Options{})
	c := s.Client()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default", Labels: map[string]string{"a": "1"}}, Data: map[string]string{"k": "v"}}
	if err := c.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["k"] = "mutated-after-create"
	got := &corev1.ConfigMap{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(cm), got); err != nil {
		t.Fatal(err)
	}
	got.Data["k"] = "mutated-after-get"
	l := &corev1.ConfigMapList{}
	if err := c.List(t.Context(), l, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	l.Items[0].Labels["a"] = "mutated-after-list"
	again := &corev1.ConfigMap{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(cm), again); err != nil {
		t.Fatal(err)
	}
	if again.Data["k"] != "v" || again.Labels["a"] != "1" {
		t.Errorf("the store changed with its results: data %v labels %v", again.Data, again.Labels)
	}
}

// TestHooks checks that Intercept refuses a request untouched and AfterWrite can hide a
// committed write (a lost response).
func TestHooks(t *testing.T) {
	timeout := apierrors.NewServerTimeout(schema.GroupResource{Resource: "configmaps"}, "create", 1)
	s, _ := newStore(t, apiserver.Options{
		Intercept: func(_ context.Context, r apiserver.Request) error {
			if r.Verb == apiserver.VerbCreate && r.Name == "refused" {
				return timeout
			}
			return nil
		},
		AfterWrite: func(_ context.Context, r apiserver.Request, err error) error {
			if err == nil && r.Name == "lost" {
				return timeout
			}
			return err
		},
	})
	c := s.Client()
	rv := s.ResourceVersion()
	err := c.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "refused", Namespace: "default"}})
	if !apierrors.IsServerTimeout(err) || s.ResourceVersion() != rv {
		t.Errorf("intercepted create: %v, resourceVersion %d -> %d", err, rv, s.ResourceVersion())
	}
	err = c.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "lost", Namespace: "default"}})
	if !errors.Is(err, timeout) {
		t.Errorf("lost response: %v", err)
	}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "lost"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("the write behind a lost response is missing: %v", err)
	}
}

// TestDefaultKindsMatchCRDs checks the store's default policy of each CAPTF kind (scope, status
// subresource) against the CRDs in config/crd/bases.
func TestDefaultKindsMatchCRDs(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs found: %v", err)
	}
	_, scheme := newStore(t, apiserver.Options{})
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range crd.Spec.Versions {
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			typ, ok := scheme.AllKnownTypes()[gvk]
			if !ok {
				t.Errorf("%s: %s is not in the manager's scheme", f, gvk)
				continue
			}
			p := apiserver.DefaultKinds(gvk.GroupKind(), typ)
			hasStatus := v.Subresources != nil && v.Subresources.Status != nil
			if p.StatusSubresource != hasStatus || p.ClusterScoped != (crd.Spec.Scope == apiextensionsv1.ClusterScoped) || !p.Custom {
				t.Errorf("%s: policy %+v, CRD has status subresource %t and scope %s", gvk.Kind, p, hasStatus, crd.Spec.Scope)
			}
		}
	}
}

// BenchmarkCreateUpdateGet measures one create, one update and one get of a ConfigMap and of a
// TerraformMachine (status subresource, generation), the base for later throughput targets.
func BenchmarkCreateUpdateGet(b *testing.B) {
	s, _ := newStore(b, apiserver.Options{})
	c := s.Client()
	ctx := context.Background()
	n := 0 // names stay unique across the runs b.Run makes with growing b.N
	b.Run("ConfigMap", func(b *testing.B) {
		for range b.N {
			n++
			i := n
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Namespace: "default"}, Data: map[string]string{"k": "v"}}
			if err := c.Create(ctx, cm); err != nil {
				b.Fatal(err)
			}
			cm.Data["k"] = "w"
			if err := c.Update(ctx, cm); err != nil {
				b.Fatal(err)
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("TerraformMachine", func(b *testing.B) {
		for range b.N {
			n++
			i := n
			m := &infrav1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("m-%d", i), Namespace: "default", Finalizers: []string{"example.com/f"}}}
			m.Spec.Module.Image = "registry.example/module:1"
			if err := c.Create(ctx, m); err != nil {
				b.Fatal(err)
			}
			m.Status.FailureDomain = "fd"
			if err := c.Status().Update(ctx, m); err != nil {
				b.Fatal(err)
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestAdmissionHooks checks Mutate and Validate: Mutate's change is stored; Validate's refusal
// (of a delete too) leaves the store unchanged; a write whose object changed while Validate ran
// starts again from the new state (a patch then applies on top of it), or fails with Conflict
// when it named the resourceVersion it read.
func TestAdmissionHooks(t *testing.T) {
	refusal := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "keep", errors.New("refused"))
	var s *apiserver.Store
	var validated []string
	interleave := map[string]bool{"patched": true, "updated": true}
	s, _ = newStore(t, apiserver.Options{
		Mutate: func(_ context.Context, a *apiserver.Admission) error {
			if a.Verb == apiserver.VerbCreate {
				a.Object.SetLabels(map[string]string{"mutated": "yes"})
			}
			return nil
		},
		Validate: func(ctx context.Context, a apiserver.Admission) error {
			old := ""
			if a.OldObject != nil {
				old = a.OldObject.(*corev1.ConfigMap).Data["k"]
			}
			validated = append(validated, fmt.Sprintf("%s %s old=%s", a.Verb, a.Name, old))
			if a.Name == "keep" && a.Verb == apiserver.VerbDelete {
				return refusal
			}
			if interleave[a.Name] && a.Verb != apiserver.VerbCreate {
				interleave[a.Name] = false
				cur := &corev1.ConfigMap{}
				if err := s.Client().Get(ctx, client.ObjectKey{Namespace: "default", Name: a.Name}, cur); err != nil {
					return err
				}
				cur.Data["k"] = "interleaved"
				return s.Client().Update(ctx, cur)
			}
			return nil
		},
	})
	c := s.Client()
	ctx := t.Context()
	for _, name := range []string{"keep", "patched", "updated"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Data: map[string]string{"k": "v"}}
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		if cm.Labels["mutated"] != "yes" {
			t.Errorf("%s: Mutate's label was not stored: %v", name, cm.Labels)
		}
	}
	rv := s.ResourceVersion()
	if err := c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "keep", Namespace: "default"}}); !errors.Is(err, refusal) {
		t.Errorf("refused delete: %v", err)
	}
	if s.ResourceVersion() != rv {
		t.Errorf("a refused delete changed the store")
	}
	patched := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "patched", Namespace: "default"}}
	if err := c.Patch(ctx, patched, client.RawPatch(types.MergePatchType, []byte(`{"data":{"p":"1"}}`))); err != nil {
		t.Fatal(err)
	}
	if patched.Data["k"] != "interleaved" || patched.Data["p"] != "1" {
		t.Errorf("the patch did not apply on top of the interleaved write: %v", patched.Data)
	}
	updated := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "updated"}, updated); err != nil {
		t.Fatal(err)
	}
	updated.Data["u"] = "1"
	if err := c.Update(ctx, updated); !apierrors.IsConflict(err) {
		t.Errorf("an update naming a resourceVersion overtaken while it was validated: %v, want Conflict", err)
	}
	want := []string{
		"create keep old=", "create patched old=", "create updated old=",
		"delete keep old=v",
		"patch patched old=v", "update patched old=v", "patch patched old=interleaved",
		"update updated old=v", "update updated old=v",
	}
	if !slices.Equal(validated, want) {
		t.Errorf("Validate saw\n%q\nwant\n%q", validated, want)
	}
}
