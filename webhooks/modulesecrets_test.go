package webhooks_test

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// secretRefs names secret through each kind of reference that hands a Secret to module code.
var secretRefs = map[string]func(s *infrav1.TerraformSpec, secret string) string{
	"spec.job.env": func(s *infrav1.TerraformSpec, secret string) string {
		s.Job.Env = []corev1.EnvVar{{Name: "CLOUD_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: "token"}}}}
		return "spec.job.env[0].valueFrom.secretKeyRef.name"
	},
	"a pod template volume": func(s *infrav1.TerraformSpec, secret string) string {
		s.Job.PodTemplate = &infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{secretVolume("creds", "/etc/creds", secret)}}
		return "spec.job.podTemplate.volumes[0].secret.name"
	},
	"a registry credential": func(s *infrav1.TerraformSpec, secret string) string {
		s.Job.CLIConfig = &infrav1.CLIConfig{Credentials: []infrav1.RegistryCredential{{Host: "registry.example.com",
			SecretKeyRef: infrav1.CLIConfigKeyRef{Name: secret, Key: "token"}}}}
		return "spec.job.cliConfig.credentials[0].secretKeyRef.name"
	},
	"the CLI configuration file": func(s *infrav1.TerraformSpec, secret string) string {
		s.Job.CLIConfig = &infrav1.CLIConfig{SecretRef: &infrav1.CLIConfigKeyRef{Name: secret, Key: "token"}}
		return "spec.job.cliConfig.secretRef.name"
	},
	"a variables source": func(s *infrav1.TerraformSpec, secret string) string {
		s.VariablesFrom = []infrav1.VariablesSource{{SecretRef: &infrav1.LocalObjectReference{Name: secret}}}
		return "spec.variablesFrom[0].secretRef.name"
	},
}

var _ = Describe("Secrets that reach module code, at admission", func() {
	It("refuses a ServiceAccount token and a Secret without the opt-in label through every reference, admits a labelled one, and warns about a missing one", func() {
		warnings := &warningRecorder{}
		cfg := rest.CopyConfig(env.Config)
		cfg.WarningHandler = warnings
		c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
		ns := newNamespace()
		labelled := map[string]string{infrav1.VariablesLabel: "true"}
		Expect(admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "normal", Labels: labelled},
			StringData: map[string]string{"token": "n0rmal-value"}})).To(Succeed())
		Expect(admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unlabelled"},
			StringData: map[string]string{"token": "unl4belled-value"}})).To(Succeed())
		Expect(admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token-type", Labels: labelled,
			Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}}, Type: corev1.SecretTypeServiceAccountToken})).To(Succeed())
		Expect(admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token-annotation", Labels: labelled,
			Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}}, StringData: map[string]string{"token": "x"}})).To(Succeed())

		n := 0
		for ref, set := range secretRefs {
			for _, kind := range guardedKinds {
				n++
				name := func(what string) string { return fmt.Sprintf("%s-%s-%d", strings.ToLower(kind), what, n) }
				with := func(what, secret string) (client.Object, string) {
					o := newObject(kind, ns, name(what))
					return o, set(o.(interface{ GetTerraformSpec() *infrav1.TerraformSpec }).GetTerraformSpec(), secret)
				}

				By(kind + ", " + ref + ": a ServiceAccount token Secret is refused, with what to do")
				o, path := with("type", "token-type")
				expectForbidden(c.Create(ctx, o), path+": Forbidden", "ServiceAccount token", "name a Secret of another type")
				o, path = with("annotation", "token-annotation")
				expectForbidden(c.Create(ctx, o), path+": Forbidden", corev1.ServiceAccountNameKey)

				By(kind + ", " + ref + ": a Secret without the opt-in label is refused, naming the command, never its value")
				o, path = with("unlabelled", "unlabelled")
				err := c.Create(ctx, o)
				expectForbidden(err, path+": Forbidden", "kubectl label secret unlabelled -n "+ns+" captf.io/variables=true")
				Expect(err.Error()).NotTo(ContainSubstring("unl4belled-value"))

				By(kind + ", " + ref + ": a labelled Secret is admitted without a warning")
				warnings.take()
				o, _ = with("normal", "normal")
				Expect(c.Create(ctx, o)).To(Succeed())
				Expect(warnings.take()).To(BeEmpty())

				By(kind + ", " + ref + ": an update that names the token Secret is refused")
				path = set(o.(interface{ GetTerraformSpec() *infrav1.TerraformSpec }).GetTerraformSpec(), "token-type")
				expectForbidden(c.Update(ctx, o), path+": Forbidden", "ServiceAccount token")

				By(kind + ", " + ref + ": a missing Secret is admitted with a warning")
				o, path = with("later", "later")
				Expect(c.Create(ctx, o)).To(Succeed())
				Expect(warnings.take()).To(ContainElement(And(ContainSubstring(path+" (later)"), ContainSubstring("do not exist yet"))))
			}
		}
	})

	It("judges a template's Secrets as the stamped objects' (TemplateValidator with the API reader)", func() {
		ns := newNamespace()
		Expect(admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "runner-token",
			Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}}, Type: corev1.SecretTypeServiceAccountToken})).To(Succeed())
		Expect(admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "normal",
			Labels: map[string]string{infrav1.VariablesLabel: "true"}}, StringData: map[string]string{"token": "x"}})).To(Succeed())
		v := webhooks.TemplateValidator[*infrav1.TerraformMachineTemplate]{Kind: "TerraformMachineTemplate", Secrets: admin,
			Spec: func(t *infrav1.TerraformMachineTemplate) *infrav1.TerraformSpec {
				return &t.Spec.Template.Spec.TerraformSpec
			}}
		tmpl := func(secret string) *infrav1.TerraformMachineTemplate {
			t := &infrav1.TerraformMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "t"}}
			t.Spec.Template.Spec.Module.Image = "example.com/module:1"
			secretRefs["spec.job.env"](&t.Spec.Template.Spec.TerraformSpec, secret)
			return t
		}
		_, err := v.ValidateCreate(ctx, tmpl("runner-token"))
		expectForbidden(err, "spec.template.spec.job.env[0].valueFrom.secretKeyRef.name: Forbidden", "ServiceAccount token")
		_, err = v.ValidateCreate(ctx, tmpl("normal"))
		Expect(err).NotTo(HaveOccurred())
		_, err = v.ValidateUpdate(ctx, tmpl("normal"), tmpl("runner-token"))
		expectForbidden(err, "spec.template.spec.job.env[0].valueFrom.secretKeyRef.name: Forbidden", "ServiceAccount token")
	})
})
