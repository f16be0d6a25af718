package jobs

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// identityParams is imageParams' apply with the two variables of the identity cloud-team-a.
func identityParams() Params {
	p := imageParams(infrav1.OperationApply)
	p.Spec.Job.IdentityRef = &infrav1.TerraformIdentityRef{Name: "cloud-team-a"}
	p.IdentityEnv = []string{"AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN"}
	return p
}

// The golden Job of an object with a TerraformIdentity, and the rule it shows: the identity's
// variables are references to the per-run identity Secret, in the main container only; the
// Job holds no value.
func TestBuildPutsIdentityEnvOnlyInTheMainContainer(t *testing.T) {
	golden(t, "apply-identity-image", identityParams())

	job, err := Build(identityParams())
	if err != nil {
		t.Fatal(err)
	}
	secret := naming.RunIdentitySecretName(job.Name)
	pod := job.Spec.Template.Spec
	for _, c := range append(append([]corev1.Container(nil), pod.InitContainers...), pod.Containers...) {
		refs := map[string]bool{}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == secret {
				if e.ValueFrom.SecretKeyRef.Key != e.Name || e.Value != "" {
					t.Errorf("container %s: %s reads key %q (value %q), want the key of its name and no value", c.Name, e.Name, e.ValueFrom.SecretKeyRef.Key, e.Value)
				}
				refs[e.Name] = true
			}
		}
		for _, f := range c.EnvFrom {
			if f.SecretRef != nil && f.SecretRef.Name == secret {
				t.Errorf("container %s takes the whole identity Secret through envFrom", c.Name)
			}
		}
		want := 0
		if c.Name == MainContainer {
			want = 2
		}
		if len(refs) != want {
			t.Errorf("container %s reads %d identity variables, want %d", c.Name, len(refs), want)
		}
	}
	for _, v := range pod.Volumes {
		if v.Secret != nil && v.Secret.SecretName == secret {
			t.Errorf("volume %s mounts the identity Secret; it must reach the main container as env only", v.Name)
		}
	}
	noID, err := Build(imageParams(infrav1.OperationApply))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(mustYAML(t, noID), secret) {
		t.Error("a Job without an identity refers to an identity Secret")
	}
	if job.Annotations[infrav1.IdentityRefAnnotation] != "cloud-team-a" {
		t.Errorf("the Job's annotations %v do not name its identity", job.Annotations)
	}
	// The manager's Job cache drops pod templates: the mark must survive that.
	cached := job.DeepCopy()
	cached.Spec.Template = corev1.PodTemplateSpec{}
	if !ReadsRunIdentitySecret(cached) || ReadsRunIdentitySecret(noID) {
		t.Errorf("ReadsRunIdentitySecret: %v with an identity (cached), %v without", ReadsRunIdentitySecret(cached), ReadsRunIdentitySecret(noID))
	}
}

func mustYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestBuildRefusesReservedOrDuplicateIdentityEnv(t *testing.T) {
	for name, env := range map[string][]string{
		"reserved TF_VAR_":  {"TF_VAR_password"},
		"reserved KUBE_":    {"KUBE_TOKEN"},
		"reserved CAPTF_":   {"CAPTF_JOB_NAME"},
		"set by spec env":   {"AWS_REGION"},
		"set twice":         {"X", "X"},
		"reserved KUBECONF": {"KUBECONFIG"},
	} {
		p := imageParams(infrav1.OperationApply)
		p.IdentityEnv = env
		if _, err := Build(p); err == nil || !strings.Contains(err.Error(), env[0]) {
			t.Errorf("%s: got %v, want a refusal naming %s", name, err, env[0])
		}
	}
}

func TestNamespaceAllowed(t *testing.T) {
	team := map[string]string{"tenant": "a"}
	sel := func(l map[string]string) *metav1.LabelSelector { return &metav1.LabelSelector{MatchLabels: l} }
	cases := []struct {
		name    string
		allowed *infrav1.AllowedNamespaces
		labels  map[string]string
		want    bool
	}{
		{"unset allows none", nil, team, false},
		{"empty object allows every namespace", &infrav1.AllowedNamespaces{}, nil, true},
		{"listed", &infrav1.AllowedNamespaces{List: []string{"other", "team-a"}}, nil, true},
		{"not listed", &infrav1.AllowedNamespaces{List: []string{"team-b"}}, team, false},
		{"selector matches", &infrav1.AllowedNamespaces{Selector: sel(team)}, team, true},
		{"selector does not match", &infrav1.AllowedNamespaces{Selector: sel(map[string]string{"tenant": "b"})}, team, false},
		{"label removed", &infrav1.AllowedNamespaces{Selector: sel(team)}, nil, false},
		{"empty selector matches none", &infrav1.AllowedNamespaces{Selector: &metav1.LabelSelector{}}, team, false},
		{"list or selector", &infrav1.AllowedNamespaces{List: []string{"team-b"}, Selector: sel(team)}, team, true},
	}
	for _, c := range cases {
		got, err := NamespaceAllowed(c.allowed, "team-a", c.labels)
		if err != nil || got != c.want {
			t.Errorf("%s: got %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	bad := &infrav1.AllowedNamespaces{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tenant", Operator: "Bogus"}}}}
	if got, err := NamespaceAllowed(bad, "team-a", team); got || err == nil {
		t.Errorf("a selector that does not parse: got %v, %v; want false and an error", got, err)
	}
}

func identityScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := infrav1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func testIdentity(name string, allowed *infrav1.AllowedNamespaces, env ...string) *infrav1.TerraformIdentity {
	id := &infrav1.TerraformIdentity{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: infrav1.TerraformIdentitySpec{AllowedNamespaces: allowed}}
	for _, e := range env {
		id.Spec.Env = append(id.Spec.Env, infrav1.IdentityEnvVar{Name: e, SecretKeyRef: infrav1.IdentitySecretKeyRef{Name: "cloud", Key: strings.ToLower(e)}})
	}
	return id
}

// The rule the webhook and the engine share (both call CheckTerraformIdentity): each refusal
// with its reason, and a message that names the identity and the namespace.
func TestCheckTerraformIdentity(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"tenant": "a"}}}
	objs := []client.Object{ns,
		testIdentity("by-list", &infrav1.AllowedNamespaces{List: []string{"team-a"}}, "AWS_ACCESS_KEY_ID"),
		testIdentity("by-selector", &infrav1.AllowedNamespaces{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "a"}}}, "AWS_ACCESS_KEY_ID"),
		testIdentity("other-team", &infrav1.AllowedNamespaces{List: []string{"team-b"}}, "AWS_ACCESS_KEY_ID"),
		testIdentity("unscoped", nil, "AWS_ACCESS_KEY_ID"),
		testIdentity("reserved", &infrav1.AllowedNamespaces{}, "TF_VAR_token"),
		testIdentity("clash", &infrav1.AllowedNamespaces{}, "AWS_REGION"),
	}
	c := fake.NewClientBuilder().WithScheme(identityScheme(t)).WithObjects(objs...).Build()
	spec := func(name string) *infrav1.TerraformSpec {
		s := &infrav1.TerraformSpec{}
		s.Job.Env = []corev1.EnvVar{{Name: "AWS_REGION", Value: "eu-west-1"}}
		if name != "" {
			s.Job.IdentityRef = &infrav1.TerraformIdentityRef{Name: name}
		}
		return s
	}
	for _, tc := range []struct{ ref, reason, says string }{
		{"", "", ""},
		{"by-list", "", ""},
		{"by-selector", "", ""},
		{"missing", infrav1.IdentityNotFoundReason, "TerraformIdentity missing, which does not exist"},
		{"other-team", infrav1.IdentityNotAllowedReason, "TerraformIdentity other-team does not allow namespace team-a"},
		{"unscoped", infrav1.IdentityNotAllowedReason, "allowedNamespaces is unset, which allows no namespace"},
		{"reserved", infrav1.IdentityInvalidReason, "TF_VAR_token, which CAPTF reserves"},
		{"clash", infrav1.IdentityInvalidReason, "AWS_REGION, which spec.job.env sets too"},
	} {
		id, reason, msg, err := CheckTerraformIdentity(context.Background(), c, "team-a", spec(tc.ref))
		if err != nil {
			t.Fatalf("%s: %v", tc.ref, err)
		}
		if reason != tc.reason || !strings.Contains(msg, tc.says) {
			t.Errorf("%s: got %q %q, want %q saying %q", tc.ref, reason, msg, tc.reason, tc.says)
		}
		if (id != nil) != (tc.reason == "" && tc.ref != "") {
			t.Errorf("%s: identity returned %v with reason %q", tc.ref, id != nil, reason)
		}
	}
}

func TestIdentityValuesReadTheManagersNamespaceOnly(t *testing.T) {
	id := testIdentity("cloud", &infrav1.AllowedNamespaces{}, "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
	mine := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "captf-system", Name: "cloud"},
		Data: map[string][]byte{"aws_access_key_id": []byte("id"), "aws_secret_access_key": []byte("secret")}}
	tenants := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "cloud"},
		Data: map[string][]byte{"aws_access_key_id": []byte("tenant"), "aws_secret_access_key": []byte("tenant")}}
	c := fake.NewClientBuilder().WithScheme(identityScheme(t)).WithObjects(mine, tenants).Build()
	got, err := IdentityValues(context.Background(), c, "captf-system", id)
	if err != nil || string(got["AWS_ACCESS_KEY_ID"]) != "id" || string(got["AWS_SECRET_ACCESS_KEY"]) != "secret" || len(got) != 2 {
		t.Fatalf("got %d values, %v", len(got), err)
	}
	if _, err := IdentityValues(context.Background(), c, "elsewhere", id); !strings.Contains(errString(err), "elsewhere/cloud, which does not exist") {
		t.Errorf("missing Secret: %v", err)
	}
	id.Spec.Env[0].SecretKeyRef.Key = "nope"
	if _, err := IdentityValues(context.Background(), c, "captf-system", id); !strings.Contains(errString(err), "key nope of Secret captf-system/cloud") {
		t.Errorf("missing key: %v", err)
	}
	if _, err := IdentityValues(context.Background(), c, "", id); err == nil {
		t.Error("no manager namespace: no error")
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
