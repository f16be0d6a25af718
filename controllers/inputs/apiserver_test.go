package inputs

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// TestSecretsAgainstAPIServer checks the builders against a real kube-apiserver: a per-run
// Secret at exactly MaxRunSecretBytes is accepted (the limit is not too generous), and both
// Secrets' owner references and labels are valid.
func TestSecretsAgainstAPIServer(t *testing.T) {
	env, err := envtest.Start(envtest.Options{})
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	t.Log(env.Describe())
	ctx := context.Background()
	c, err := client.New(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: naming.JobName(suffix, 1), Namespace: ns, Labels: naming.OwnerLabels(infrav1.TerraformMachineKind, "m1", "c1")},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "runner", Image: "runner:dev"}},
		}}},
	}
	if err := c.Create(ctx, job); err != nil {
		t.Fatal(err)
	}

	// Fill variables so the whole per-run Secret is exactly the limit.
	probe := &Inputs{Variables: []byte(`{"blob":""}`), Hash: "v1-x"}
	size, err := runSecretSize(probe, ns, suffix, nil)
	if err != nil {
		t.Fatal(err)
	}
	vars := []byte(`{"blob":"` + strings.Repeat("y", MaxRunSecretBytes-size) + `"}`)
	full := &Inputs{Variables: vars, Hash: HashVariables(vars)}
	run, err := RunSecret(job, ns, suffix, full, nil)
	if err != nil {
		t.Fatalf("build a per-run Secret at the limit: %v", err)
	}
	if got := dataSize(run.Data); got != MaxRunSecretBytes {
		t.Fatalf("test setup: size %d, want %d", got, MaxRunSecretBytes)
	}
	if err := c.Create(ctx, run); err != nil {
		t.Fatalf("the API server refused a per-run Secret of exactly MaxRunSecretBytes: %v", err)
	}

	m := &infrav1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: ns, Labels: map[string]string{infrav1.ClusterNameLabel: "c1"}}}
	m.Spec.Module.Image = "example.com/module:1"
	if err := c.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	durable, err := DurableSecret(m, infrav1.GroupVersion.WithKind(infrav1.TerraformMachineKind), suffix, full)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, durable); err != nil {
		t.Fatalf("the API server refused the durable inputs Secret: %v", err)
	}
	var got corev1.Secret
	if err := c.Get(ctx, client.ObjectKeyFromObject(durable), &got); err != nil {
		t.Fatal(err)
	}
	back, err := FromDurableSecret(&got)
	if err != nil {
		t.Fatalf("read the stored durable Secret back: %v", err)
	}
	if back.Hash != full.Hash {
		t.Fatalf("hash changed through the API server: %s != %s", back.Hash, full.Hash)
	}
}
