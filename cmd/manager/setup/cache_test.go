package setup

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/engine"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// controlPlane is the package's one kube-apiserver for its cache tests: the first test that
// needs it starts it, TestMain stops it.
var controlPlane envtest.Shared

// TestMain stops the control plane a test started, if any (envtest.Shared.Main).
func TestMain(m *testing.M) { controlPlane.Main(m) }

// lastApplied is what kubectl apply leaves on an object: a whole copy of it.
const lastApplied = `{"apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha1","kind":"TerraformMachine","metadata":{"name":"m1"},"spec":{"module":{"configMap":{"name":"m"}}}}`

// TestCachedObjectsKeepNoLastAppliedConfiguration: the manager's cache (CacheOptions, against
// a real API server) holds no kubectl last-applied-configuration annotation and no pod
// template of a Job, keeps every other annotation, and a merge patch from the cached copy (how
// the manager writes what it read from the cache) leaves both on the server.
func TestCachedObjectsKeepNoLastAppliedConfiguration(t *testing.T) {
	env, c := controlPlane.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := "cache-slimmed"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	tm := objects.Machine(ns, "m1").Annotation(corev1.LastAppliedConfigAnnotation, lastApplied).Annotation("example.com/kept", "v").
		Spec(func(s *infrav1.TerraformSpec) {
			s.Module = infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "m"}}
		}).Obj()
	job := objects.Job(ns, "j1").Annotation(corev1.LastAppliedConfigAnnotation, lastApplied).Annotation("example.com/kept", "v").
		Label(infrav1.ManagedLabel, "true").Suspend().Obj()
	for _, o := range []client.Object{tm, job} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	co := CacheOptions(Options{})
	co.Scheme = env.Scheme
	ca, err := cache.New(env.Config, co)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{&infrav1.TerraformMachine{}, &batchv1.Job{}} {
		if _, err := ca.GetInformer(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}

	cachedTM, cachedJob := &infrav1.TerraformMachine{}, &batchv1.Job{}
	for _, o := range []client.Object{cachedTM, cachedJob} {
		key := client.ObjectKey{Namespace: ns, Name: tm.Name}
		if _, isJob := o.(*batchv1.Job); isJob {
			key.Name = job.Name
		}
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			return ca.Get(ctx, key, o) == nil, nil
		}); err != nil {
			t.Fatalf("%T %s never reached the cache: %v", o, key, err)
		}
		if _, ok := o.GetAnnotations()[corev1.LastAppliedConfigAnnotation]; ok {
			t.Errorf("the cached %T keeps the last-applied-configuration annotation", o)
		}
		if o.GetAnnotations()["example.com/kept"] != "v" {
			t.Errorf("the cached %T lost its other annotations: %v", o, o.GetAnnotations())
		}
	}
	if n := len(cachedJob.Spec.Template.Spec.Containers); n != 0 {
		t.Errorf("the cached Job keeps its pod template (%d containers)", n)
	}

	// The manager's way of writing what it read from the cache: a merge patch of the cached copy.
	patchedTM := cachedTM.DeepCopy()
	patchedTM.Annotations["example.com/patched"] = "yes"
	if err := c.Patch(ctx, patchedTM, client.MergeFrom(cachedTM)); err != nil {
		t.Fatal(err)
	}
	patchedJob := cachedJob.DeepCopy()
	patchedJob.Labels["example.com/patched"] = "yes"
	if err := c.Patch(ctx, patchedJob, client.MergeFrom(cachedJob)); err != nil {
		t.Fatal(err)
	}
	liveTM, liveJob := &infrav1.TerraformMachine{}, &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(tm), liveTM); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(job), liveJob); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{liveTM, liveJob} {
		if o.GetAnnotations()[corev1.LastAppliedConfigAnnotation] != lastApplied {
			t.Errorf("a merge patch from the cached %T changed its last-applied-configuration on the server: %v", o, o.GetAnnotations())
		}
	}
	if liveTM.Annotations["example.com/patched"] != "yes" || liveJob.Labels["example.com/patched"] != "yes" {
		t.Errorf("the merge patches from the cached copies were not applied: %v, %v", liveTM.Annotations, liveJob.Labels)
	}
	if n := len(liveJob.Spec.Template.Spec.Containers); n != 1 {
		t.Errorf("a merge patch from the cached Job left it %d containers on the server, want 1", n)
	}
}

// TestBootstrapCacheHoldsNoMemberSecrets: the bootstrap data metadata cache
// (BootstrapCacheOptions, against a real API server) shows a bootstrap data Secret and a
// TerraformCluster's state Secret, whose resourceVersions the machines and pools read
// (engine.SecretVersion), and not the Secrets CAPTF made for a machine or a pool, though they
// carry the cluster-name label too.
func TestBootstrapCacheHoldsNoMemberSecrets(t *testing.T) {
	env, c := controlPlane.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := "bootstrap-cache"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	secret := func(name string, labels map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
	}
	shown := []*corev1.Secret{
		secret("m1-bootstrap", map[string]string{infrav1.ClusterNameLabel: "c1"}),
		secret("tfstate-c1", naming.OwnerLabels(infrav1.TerraformClusterKind, "c1", "c1", "")),
	}
	hidden := []*corev1.Secret{
		secret("tfstate-m1", naming.OwnerLabels(infrav1.TerraformMachineKind, "m1", "c1", "")),
		secret("tfstate-p1", naming.OwnerLabels(infrav1.TerraformMachinePoolKind, "p1", "c1", "")),
	}
	for _, s := range append(append([]*corev1.Secret{}, shown...), hidden...) {
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	mgr, err := manager.New(env.Config, manager.Options{Scheme: env.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	bo, err := BootstrapCacheOptions(Options{}, mgr)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := cache.New(env.Config, bo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.GetInformer(ctx, engine.SecretMetadata()); err != nil {
		t.Fatal(err)
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	for _, s := range shown {
		var rv string
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			v, ok, err := engine.SecretVersion(ctx, ca, ns, s.Name)
			rv = v
			return ok, err
		}); err != nil {
			t.Fatalf("the bootstrap data cache never showed secret %s: %v", s.Name, err)
		}
		if rv != s.ResourceVersion {
			t.Errorf("secret %s: the cache shows resourceVersion %s, the server wrote %s", s.Name, rv, s.ResourceVersion)
		}
	}
	// The initial list held every Secret, and the cache has synced: what it lacks now, it left out.
	for _, s := range hidden {
		if _, ok, err := engine.SecretVersion(ctx, ca, ns, s.Name); err != nil || ok {
			t.Errorf("the bootstrap data cache holds %s, a Secret CAPTF made for a machine or pool (err %v)", s.Name, err)
		}
	}
}
