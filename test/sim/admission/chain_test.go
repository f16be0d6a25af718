package admission_test

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
	"github.com/captf/cluster-api-provider-terraform/test/sim/admission"
	"github.com/captf/cluster-api-provider-terraform/test/sim/apiserver"
	"github.com/captf/cluster-api-provider-terraform/test/sim/kcm"
)

// newStore returns a store whose writes go through CAPTF's webhooks.
func newStore(t *testing.T) *apiserver.Store {
	t.Helper()
	scheme, err := setup.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	chain := admission.New(scheme, admission.Options{})
	s, err := apiserver.New(scheme, apiserver.Options{Mutate: chain.Mutate, Validate: chain.Validate})
	if err != nil {
		t.Fatal(err)
	}
	chain.Bind(s.Client())
	return s
}

func hasFinalizer(o client.Object) bool { return slices.Contains(o.GetFinalizers(), infrav1.Finalizer) }

// refused requires err to be the guard's denial as a real server returns it.
func refused(t *testing.T, what string, err error, webhook string) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `admission webhook "`+webhook+`" denied the request`) {
		t.Errorf("%s: got %v, want a denial by %s", what, err, webhook)
	}
}

// TestGuardInWritePath runs the guard, the Lease guard and the defaulter in the store's write
// path: a user's removal of block-move and of the finalizer, and deletion of the run lease,
// are refused while the manager's run lease may still create its Job (inside the grace); once
// the grace has passed without a Job, the same block-move removal is allowed, and so is
// the finalizer's (the object never applied, so it owns no infrastructure).
func TestGuardInWritePath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t)
		ctx := t.Context()
		user := s.Client()
		mgr := admission.As(s.Client(), admission.Manager(admission.DefaultManager))

		m := objects.Machine("default", "m1").Obj()
		m.SetAnnotations(map[string]string{infrav1.BlockMoveAnnotation: ""})
		if err := user.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		if !hasFinalizer(m) {
			t.Fatalf("the defaulter did not add the finalizer: %v", m.Finalizers)
		}

		leases := runlease.New(mgr, s.Client(), runlease.DefaultOptions())
		res, err := leases.Acquire(ctx, runlease.Request{
			Owner:  runlease.Owner{Namespace: "default", Kind: infrav1.TerraformMachineKind, Name: "m1", Cluster: "m1"},
			Holder: "m1-apply-1", Operation: infrav1.OperationApply,
		})
		if err != nil || !res.Acquired {
			t.Fatalf("acquire: %+v, %v", res, err)
		}

		rv := s.ResourceVersion()
		removeBlockMove := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+infrav1.BlockMoveAnnotation+`":null}}}`))
		refused(t, "block-move removal while the lease may create its Job", user.Patch(ctx, m.DeepCopy(), removeBlockMove), "guard.captf.io")
		noFinalizer := m.DeepCopy()
		noFinalizer.Finalizers = nil
		refused(t, "finalizer removal while the lease may create its Job", user.Update(ctx, noFinalizer), "guard.captf.io")
		ls := &coordinationv1.LeaseList{}
		if err := s.Client().List(ctx, ls, client.InNamespace("default"), client.MatchingLabels{infrav1.LeaseLabel: "run"}); err != nil || len(ls.Items) != 1 {
			t.Fatalf("run leases: %d, %v", len(ls.Items), err)
		}
		refused(t, "run lease deletion while live", user.Delete(ctx, &ls.Items[0]), "lease-guard.captf.io")
		if s.ResourceVersion() != rv {
			t.Errorf("refused writes changed the store: resourceVersion %d -> %d", rv, s.ResourceVersion())
		}

		// A write that removes nothing guarded is allowed while the lease is held.
		labelled := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`))
		if err := user.Patch(ctx, m.DeepCopy(), labelled); err != nil {
			t.Errorf("an unguarded change was refused: %v", err)
		}

		time.Sleep(runlease.DefaultOptions().Grace + time.Second) // the Job was never created
		if err := user.Patch(ctx, m.DeepCopy(), removeBlockMove); err != nil {
			t.Errorf("block-move removal after the grace, with no Job: %v", err)
		}
		got := m.DeepCopy()
		if err := s.Client().Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
			t.Fatal(err)
		}
		if _, ok := got.Annotations[infrav1.BlockMoveAnnotation]; ok {
			t.Error("block-move is still there after an allowed removal")
		}
		got.Finalizers = nil
		if err := user.Update(ctx, got); err != nil {
			t.Errorf("finalizer removal with nothing running, of an object that never applied: %v", err)
		}
	})
}

// TestSpecValidation refuses the create of an object whose spec the validator refuses (a
// reserved environment variable) and of a template that would stamp a manager's record, with
// the validators' Invalid status, and admits valid ones.
func TestSpecValidation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t)
		bad := objects.Machine("default", "bad").Obj()
		bad.Spec.Job.Env = []corev1.EnvVar{{Name: "TF_WORKSPACE", Value: "elsewhere"}}
		err := s.Client().Create(t.Context(), bad)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `admission webhook "validate.terraformmachine.captf.io" denied the request`) {
			t.Errorf("create with TF_WORKSPACE: %v, want Invalid from validate.terraformmachine.captf.io", err)
		}
		if err := s.Client().Create(t.Context(), objects.Machine("default", "good").Obj()); err != nil {
			t.Errorf("a valid create: %v", err)
		}
		tmpl := &infrav1.TerraformMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "default"}}
		tmpl.Spec.Template.Spec.Module = infrav1.ModuleSource{Image: objects.DefaultModule}
		tmpl.Spec.Template.ObjectMeta.Annotations = map[string]string{infrav1.AppliedHashAnnotation: "forged"}
		err = s.Client().Create(t.Context(), tmpl)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `admission webhook "validate.terraformmachinetemplate.captf.io" denied the request`) {
			t.Errorf("a template that stamps a record: %v, want Invalid from validate.terraformmachinetemplate.captf.io", err)
		}
		tmpl.Spec.Template.ObjectMeta.Annotations = nil
		if err := s.Client().Create(t.Context(), tmpl); err != nil {
			t.Errorf("a valid template: %v", err)
		}
	})
}

// TestJobGuardAndGarbageCollector runs the Job guard in the write path with the garbage
// collector model: a user's removal of a managed Job's controller owner reference is refused;
// when that owner is deleted, the collector (writing as its own ServiceAccount) drops the
// dangling reference and keeps the Job, which its other owner still holds.
func TestJobGuardAndGarbageCollector(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t)
		ctx := t.Context()
		api := s.Client()
		gcUser := authenticationv1.UserInfo{Username: kcm.GarbageCollectorUser}
		var collected []kcm.Collected
		gc := kcm.StartGarbageCollector(admission.As(api, gcUser), kcm.GCOptions{
			Kinds:   []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}, {Group: "batch", Version: "v1", Kind: "Job"}},
			Observe: func(c kcm.Collected) { collected = append(collected, c) },
		})
		defer gc.Stop()
		a := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default"}}
		b := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "default"}}
		for _, o := range []client.Object{a, b} {
			if err := api.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		job := objects.Job("default", "j").With(func(j *batchv1.Job) {
			j.Labels = map[string]string{infrav1.ManagedLabel: "true"}
			j.OwnerReferences = []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "ConfigMap", Name: "a", UID: a.UID, Controller: ptr.To(true)},
				{APIVersion: "v1", Kind: "ConfigMap", Name: "b", UID: b.UID},
			}
		}).Obj()
		if err := api.Create(ctx, job); err != nil {
			t.Fatal(err)
		}
		dropController := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"b","uid":"`+string(b.UID)+`"}]}}`))
		refused(t, "a user's removal of the controller reference", api.Patch(ctx, job.DeepCopy(), dropController), "job-guard.captf.io")
		if err := api.Delete(ctx, a); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		got := &batchv1.Job{}
		if err := api.Get(ctx, client.ObjectKeyFromObject(job), got); err != nil {
			t.Fatalf("the Job with a live owner was deleted: %v", err)
		}
		if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != b.UID {
			t.Errorf("owner references %v, want only b's (collected %v)", got.OwnerReferences, collected)
		}
	})
}
