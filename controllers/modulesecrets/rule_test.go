package modulesecrets

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

func secret(name string, labelled bool, mutate ...func(*corev1.Secret)) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"token": []byte("s3cr3t-" + name), "other": []byte("other-" + name)}}
	if labelled {
		s.Labels = map[string]string{Label: LabelValue}
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func tokenType(s *corev1.Secret) { s.Type = corev1.SecretTypeServiceAccountToken }
func tokenAnnotation(s *corev1.Secret) {
	s.Annotations = map[string]string{TokenAnnotation: "captf-runner"}
}

// TestJudge is the rule's table: the opt-in label is required for every kind but an
// identity's Secret, and a ServiceAccount token (by type or by the token controller's
// annotation) is refused for every kind, labelled or not.
func TestJudge(t *testing.T) {
	path := field.NewPath("spec", "job", "env").Index(0)
	for _, tc := range []struct {
		name   string
		kind   Kind
		secret *corev1.Secret
		reason string
		says   string
	}{
		{"labelled env", Env, secret("a", true), "", ""},
		{"unlabelled env", Env, secret("a", false), infrav1.VariablesSourceNotOptedInReason, "kubectl label secret a -n team-a captf.io/variables=true"},
		{"label with another value", Volume, secret("a", false, func(s *corev1.Secret) { s.Labels = map[string]string{Label: "yes"} }),
			infrav1.VariablesSourceNotOptedInReason, "--overwrite"},
		{"labelled token type", Env, secret("a", true, tokenType), infrav1.ModuleSecretRefusedReason, "ServiceAccount token"},
		{"unlabelled token type", Credential, secret("a", false, tokenType), infrav1.ModuleSecretRefusedReason, "name a Secret of another type"},
		{"labelled token annotation", Volume, secret("a", true, tokenAnnotation), infrav1.ModuleSecretRefusedReason, TokenAnnotation},
		{"cli config token", CLIConfigFile, secret("a", true, tokenType), infrav1.ModuleSecretRefusedReason, "ServiceAccount token"},
		{"variables token", Variables, secret("a", true, tokenAnnotation), infrav1.ModuleSecretRefusedReason, "ServiceAccount token"},
		{"unlabelled variables", Variables, secret("a", false), infrav1.VariablesSourceNotOptedInReason, "not labelled"},
		{"unlabelled identity", Identity, secret("a", false), "", ""},
		{"identity token type", Identity, secret("a", false, tokenType), infrav1.ModuleSecretRefusedReason, "ServiceAccount token"},
		{"identity token annotation", Identity, secret("a", false, tokenAnnotation), infrav1.ModuleSecretRefusedReason, "ServiceAccount token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason, errs := Judge(Ref{Kind: tc.kind, Path: path, Name: tc.secret.Name}, tc.secret)
			if reason != tc.reason {
				t.Errorf("reason %q, want %q (%v)", reason, tc.reason, errs)
			}
			if (len(errs) == 0) != (tc.reason == "") {
				t.Fatalf("errors %v", errs)
			}
			if tc.says != "" && !strings.Contains(errs.ToAggregate().Error(), tc.says) {
				t.Errorf("message %q does not say %q", errs.ToAggregate().Error(), tc.says)
			}
			for _, v := range tc.secret.Data {
				if len(errs) > 0 && strings.Contains(errs.ToAggregate().Error(), string(v)) {
					t.Errorf("message carries a value: %v", errs)
				}
			}
		})
	}
}

// fullSpec names a Secret through every kind of reference.
func fullSpec() *infrav1.TerraformSpec {
	return &infrav1.TerraformSpec{
		VariablesFrom: []infrav1.VariablesSource{{SecretRef: &infrav1.LocalObjectReference{Name: "vars"}}, {ConfigMapRef: &infrav1.LocalObjectReference{Name: "cm"}}},
		Job: infrav1.JobPolicy{
			Env: []corev1.EnvVar{
				{Name: "PLAIN", Value: "x"},
				{Name: "AWS_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "aws"}, Key: "token"}}},
				{Name: "OPT", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Key: "token", Optional: ptr.To(true)}}},
				{Name: "FROM_CM", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "k"}}},
			},
			CLIConfig: &infrav1.CLIConfig{
				SecretRef:   &infrav1.CLIConfigKeyRef{Name: "cli", Key: "token"},
				Credentials: []infrav1.RegistryCredential{{Host: "registry.example.com", SecretKeyRef: infrav1.CLIConfigKeyRef{Name: "registry", Key: "token"}}},
			},
			PodTemplate: &infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{
				{Name: "ca", MountPath: "/etc/ca", ConfigMap: &infrav1.RunnerVolumeSource{Name: "cm"}},
				{Name: "whole", MountPath: "/etc/whole", Secret: &infrav1.RunnerVolumeSource{Name: "vol"}},
				{Name: "one", MountPath: "/etc/one", Secret: &infrav1.RunnerVolumeSource{Name: "aws", Items: []corev1.KeyToPath{{Key: "other", Path: "o"}}}},
			}},
		},
	}
}

// TestRefs: every kind of reference that hands a Secret to module code is listed, at its field,
// with the keys module code receives; ConfigMaps and plain values are not.
func TestRefs(t *testing.T) {
	var got []string
	for _, r := range Refs(field.NewPath("spec"), fullSpec()) {
		got = append(got, string(r.Kind)+" "+r.Path.String()+" "+r.Name+" "+strings.Join(r.Keys, ",")+map[bool]string{true: " optional"}[r.Optional])
	}
	want := []string{
		"variablesFrom spec.variablesFrom[0].secretRef.name vars ",
		"env spec.job.env[1].valueFrom.secretKeyRef.name aws token",
		"env spec.job.env[2].valueFrom.secretKeyRef.name absent token optional",
		"cliConfig spec.job.cliConfig.secretRef.name cli token",
		"credential spec.job.cliConfig.credentials[0].secretKeyRef.name registry token",
		"volume spec.job.podTemplate.volumes[1].secret.name vol ",
		"volume spec.job.podTemplate.volumes[2].secret.name aws other",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Refs =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	id := &infrav1.TerraformIdentity{Spec: infrav1.TerraformIdentitySpec{Env: []infrav1.IdentityEnvVar{{Name: "A", SecretKeyRef: infrav1.IdentitySecretKeyRef{Name: "cloud", Key: "k"}}}}}
	if r := IdentityRefs(id); len(r) != 1 || r[0].Kind != Identity || r[0].Name != "cloud" || r[0].RequiresLabel() {
		t.Errorf("IdentityRefs = %+v", r)
	}
}

// TestRenamePodCoversRefs: after RenamePod, every pod-facing reference names one of the Job's
// per-run copies, in PodSecretNames order, and variablesFrom is untouched (the engine copies
// its values into the variables).
func TestRenamePodCoversRefs(t *testing.T) {
	spec := fullSpec()
	names := PodSecretNames(spec)
	if want := []string{"absent", "aws", "cli", "registry", "vol"}; !slices.Equal(names, want) {
		t.Fatalf("PodSecretNames = %v, want %v", names, want)
	}
	renamed := RenamePod(spec, "captf-x-1")
	before, after := Refs(field.NewPath("spec"), spec), Refs(field.NewPath("spec"), renamed)
	for i, r := range after {
		switch {
		case !r.Kind.Pod() && r.Name != before[i].Name:
			t.Errorf("%s renamed to %s", r.Path, r.Name)
		case r.Kind.Pod() && r.Name != naming.RunModuleSecretName("captf-x-1", slices.Index(names, before[i].Name)):
			t.Errorf("%s names %s, not the copy of %s", r.Path, r.Name, before[i].Name)
		}
	}
	if spec.Job.Env[1].ValueFrom.SecretKeyRef.Name != "aws" {
		t.Error("RenamePod changed its argument")
	}
}

// TestCheckAndCopies: Check reads each Secret once and judges the read; a refused Secret is
// never offered for copying; a missing Secret is Missing unless its reference is optional; a
// missing key of a non-optional reference is Missing; Copies carries only the keys module code
// receives, and Values every one of them.
func TestCheckAndCopies(t *testing.T) {
	ctx := context.Background()
	spec := fullSpec()
	var pod []Ref
	for _, r := range Refs(field.NewPath("spec"), spec) {
		if r.Kind.Pod() {
			pod = append(pod, r)
		}
	}
	c := fake.NewClientBuilder().WithObjects(secret("aws", true), secret("cli", true), secret("registry", true), secret("vol", true)).Build()
	res, err := Check(ctx, c, "team-a", pod)
	if err != nil || len(res.Errs) > 0 || len(res.Missing) > 0 {
		t.Fatalf("Check = %+v, %v", res, err)
	}
	copies := Copies(spec, res.Secrets)
	if got := copies["aws"]; len(got) != 2 || string(got["token"]) != "s3cr3t-aws" || string(got["other"]) != "other-aws" {
		t.Errorf("copy of aws = %v", got)
	}
	if got := copies["registry"]; len(got) != 1 || string(got["token"]) != "s3cr3t-registry" {
		t.Errorf("copy of registry = %v (only the named key)", got)
	}
	if got := copies["vol"]; len(got) != 2 {
		t.Errorf("copy of the whole-Secret volume = %v", got)
	}
	if v := Values(copies); !slices.Contains(v, "s3cr3t-registry") || !slices.Contains(v, "s3cr3t-cli") || len(v) != 6 {
		t.Errorf("Values = %v", v)
	}

	// A token among them, an unlabelled one, a missing one, a missing key.
	c = fake.NewClientBuilder().WithObjects(secret("aws", true, tokenType), secret("cli", false),
		secret("registry", true, func(s *corev1.Secret) { delete(s.Data, "token") })).Build()
	res, err = Check(ctx, c, "team-a", pod)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != infrav1.ModuleSecretRefusedReason || len(res.Errs) != 3 {
		t.Errorf("reason %q, errs %v", res.Reason, res.Errs)
	}
	if _, ok := res.Secrets["aws"]; ok {
		t.Error("a token Secret is offered for copying")
	}
	if _, ok := res.Secrets["cli"]; ok {
		t.Error("an unlabelled Secret is offered for copying")
	}
	var missing []string
	for _, m := range res.Missing {
		missing = append(missing, m.Name)
	}
	if !slices.Equal(missing, []string{"registry", "vol"}) {
		t.Errorf("missing %v, want registry (no key) and vol (absent); the optional absent one is not", missing)
	}
	if msg := res.MissingMessage("team-a"); !strings.Contains(msg, "create it") || strings.Contains(msg, "s3cr3t") {
		t.Errorf("MissingMessage = %q", msg)
	}
}
