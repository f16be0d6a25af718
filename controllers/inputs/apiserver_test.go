package inputs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// controlPlane is the package's one kube-apiserver for its API server tests: the first test that
// needs it starts it, TestMain stops it.
var controlPlane envtest.Shared

// TestMain stops the control plane a test started, if any (envtest.Shared.Main).
func TestMain(m *testing.M) { controlPlane.Main(m) }

// apiServer returns the package's control plane with an administrator client.
func apiServer(t *testing.T) (*envtest.Env, client.Client) {
	t.Helper()
	return controlPlane.Get(t)
}

// TestSecretsAgainstAPIServer checks the builders against a real kube-apiserver: a per-run
// Secret at exactly MaxRunSecretBytes is accepted (the limit is not too generous), and both
// Secrets' owner references and labels are valid.
func TestSecretsAgainstAPIServer(t *testing.T) {
	_, c := apiServer(t)
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}

	job := objects.Job(ns, naming.JobName(suffix, 1)).Of(infrav1.TerraformMachineKind, "m1", "c1").Obj()
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
	full := &Inputs{Variables: vars, Hash: Hash(nil, vars)}
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

	m := objects.Machine(ns, "m1").Cluster("c1").Module("example.com/module:1").Obj()
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

// TestOptInCommandAgainstAPIServer proves the refusal of an unlabelled source against a real
// kube-apiserver and that the command its message names is the fix: running it with the real
// kubectl makes the next assembly read the source. It covers a Secret without the label, a
// ConfigMap labelled with another value (the command then needs --overwrite) and an optional
// Secret without the label (refused too).
func TestOptInCommandAgainstAPIServer(t *testing.T) {
	e, c := apiServer(t)
	ctx := context.Background()
	const space = "optin"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: space}}); err != nil {
		t.Fatal(err)
	}
	admin, err := e.ControlPlane.AddUser(crenvtest.User{Name: "optin-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubectl, err := admin.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	kubectl.Path = filepath.Join(e.BinaryAssetsDirectory, "kubectl")
	if _, err := os.Stat(kubectl.Path); err != nil {
		t.Fatalf("kubectl is missing from %s: run 'make test-bins' (it builds it from source): %v", e.BinaryAssetsDirectory, err)
	}

	for _, tc := range []struct {
		name string
		obj  client.Object
		src  infrav1.VariablesSource
	}{
		{name: "Secret without the label",
			obj: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: space}, Data: map[string][]byte{"password": []byte("pw")}},
			src: infrav1.VariablesSource{SecretRef: &infrav1.LocalObjectReference{Name: "db"}}},
		{name: "ConfigMap labelled false",
			obj: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: space, Labels: map[string]string{VariablesLabel: "false"}},
				Data: map[string]string{"password": "pw"}},
			src: infrav1.VariablesSource{ConfigMapRef: &infrav1.LocalObjectReference{Name: "settings"}}},
		{name: "optional Secret without the label",
			obj: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "maybe", Namespace: space}, Data: map[string][]byte{"password": []byte("pw")}},
			src: infrav1.VariablesSource{SecretRef: &infrav1.LocalObjectReference{Name: "maybe"}, Optional: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.Create(ctx, tc.obj); err != nil {
				t.Fatal(err)
			}
			spec := &infrav1.TerraformSpec{VariablesFrom: []infrav1.VariablesSource{tc.src}}
			contract := ContractInputs{Kind: infrav1.TerraformMachineKind, Name: "m", Namespace: space, ClusterName: "c1"}
			_, err := Assemble(ctx, c, space, spec, contract)
			msg := expectReason(t, err, infrav1.VariablesSourceNotOptedInReason)
			_, command, ok := strings.Cut(msg, "run: ")
			if !ok || !strings.HasPrefix(command, "kubectl label ") {
				t.Fatalf("the message names no kubectl label command: %s", msg)
			}
			stdout, stderr, err := kubectl.Run(strings.Fields(command)[1:]...)
			if err != nil {
				t.Fatalf("%s: %v\n%s%s", command, err, stdout, stderr)
			}
			in, err := Assemble(ctx, c, space, spec, contract)
			if err != nil {
				t.Fatalf("after %q the source is still refused: %v", command, err)
			}
			if got := decodeVars(t, in)["password"]; got != "pw" {
				t.Fatalf("password = %v after opting in, want pw", got)
			}
		})
	}
}
