package webhooks_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// withPodTemplate is a new object of kind whose spec.job.podTemplate is t.
func withPodTemplate(kind, ns, name string, t infrav1.RunnerPodTemplate) client.Object {
	o := newObject(kind, ns, name)
	o.(interface{ GetTerraformSpec() *infrav1.TerraformSpec }).GetTerraformSpec().Job.PodTemplate = &t
	return o
}

func configMapVolume(name, mountPath string) infrav1.RunnerVolume {
	return infrav1.RunnerVolume{Name: name, MountPath: mountPath, ConfigMap: &infrav1.RunnerVolumeSource{Name: "corporate-ca"}}
}

func secretVolume(name, mountPath, secret string) infrav1.RunnerVolume {
	return infrav1.RunnerVolume{Name: name, MountPath: mountPath, Secret: &infrav1.RunnerVolumeSource{Name: secret}}
}

// expectForbidden asserts a 422 whose message names field and carries every want.
func expectForbidden(err error, field string, want ...string) {
	GinkgoHelper()
	Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want 422 Invalid, got %v", err)
	Expect(err.Error()).To(ContainSubstring(field))
	for _, w := range want {
		Expect(err.Error()).To(ContainSubstring(w))
	}
}

var _ = Describe("spec.job.podTemplate at admission", func() {
	It("refuses CAPTF's labels, annotations, volume names and folders, with what to do instead, on objects, updates and templates", func() {
		ns := newNamespace()
		cases := []struct {
			name  string
			tmpl  infrav1.RunnerPodTemplate
			field string
			want  []string
		}{
			{"captf-label", infrav1.RunnerPodTemplate{Metadata: infrav1.RunnerPodMetadata{Labels: map[string]string{infrav1.ManagedLabel: "false"}}},
				"spec.job.podTemplate.metadata.labels[captf.io/managed]: Forbidden", []string{"choose a key outside captf.io/"}},
			{"owner-label", infrav1.RunnerPodTemplate{Metadata: infrav1.RunnerPodMetadata{Labels: map[string]string{infrav1.ClusterNameLabel: "other"}}},
				"spec.job.podTemplate.metadata.labels[cluster.x-k8s.io/cluster-name]: Forbidden", []string{"find, own and select the Job's pod"}},
			{"default-container", infrav1.RunnerPodTemplate{Metadata: infrav1.RunnerPodMetadata{Annotations: map[string]string{"kubectl.kubernetes.io/default-container": "state-channel"}}},
				"spec.job.podTemplate.metadata.annotations[kubectl.kubernetes.io/default-container]: Forbidden", []string{"choose a key"}},
			{"apparmor", infrav1.RunnerPodTemplate{Metadata: infrav1.RunnerPodMetadata{Annotations: map[string]string{"container.apparmor.security.beta.kubernetes.io/terraform": "unconfined"}}},
				"spec.job.podTemplate.metadata.annotations[container.apparmor.security.beta.kubernetes.io/terraform]: Forbidden", []string{"AppArmor or seccomp profile", "remove it"}},
			{"captf-annotation", infrav1.RunnerPodTemplate{Metadata: infrav1.RunnerPodMetadata{Annotations: map[string]string{"captf.io/plan-id": "x"}}},
				"spec.job.podTemplate.metadata.annotations[captf.io/plan-id]: Forbidden", []string{"choose a key"}},
			{"volume-name", infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{configMapVolume("channel", "/etc/ssl/custom")}},
				"spec.job.podTemplate.volumes[0].name: Forbidden", []string{"volume name channel is CAPTF's", "rename the volume"}},
			{"volume-prefix", infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{configMapVolume("captf-serviceaccount", "/etc/ssl/custom")}},
				"spec.job.podTemplate.volumes[0].name: Forbidden", []string{"rename the volume"}},
			{"mount-under", infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{configMapVolume("ca", "/captf/work/.terraform")}},
				"spec.job.podTemplate.volumes[0].mountPath: Forbidden", []string{"under or above /captf", "mount the volume elsewhere"}},
			{"mount-above", infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{configMapVolume("ca", "/var/run/secrets")}},
				"spec.job.podTemplate.volumes[0].mountPath: Forbidden", []string{"/var/run/secrets/captf.io", "mount the volume elsewhere"}},
			{"mount-token", infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{configMapVolume("ca", "/var/run/secrets/kubernetes.io/serviceaccount")}},
				"spec.job.podTemplate.volumes[0].mountPath: Forbidden", []string{"/var/run/secrets/kubernetes.io"}},
		}
		for _, kind := range guardedKinds {
			for _, c := range cases {
				By(kind + ": " + c.name)
				err := admin.Create(ctx, withPodTemplate(kind, ns, strings.ToLower(kind)+"-"+c.name, c.tmpl))
				expectForbidden(err, c.field, c.want...)
			}
		}
		fmt.Fprintf(GinkgoWriter, "a refused pod template: %v\n", admin.Create(ctx, withPodTemplate(infrav1.TerraformClusterKind, ns, "shown", cases[7].tmpl)))

		By("a template that keeps clear of CAPTF's names is admitted, and an update that takes one of them is refused")
		good := infrav1.RunnerPodTemplate{
			Metadata:     infrav1.RunnerPodMetadata{Labels: map[string]string{"team": "platform"}, Annotations: map[string]string{"example.com/audit": "yes"}},
			NodeSelector: map[string]string{"node-role.example.com/infra": ""},
			Tolerations:  []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "terraform", Effect: corev1.TaintEffectNoSchedule}},
			Volumes:      []infrav1.RunnerVolume{configMapVolume("ca", "/etc/ssl/custom")},
		}
		o := withPodTemplate(infrav1.TerraformMachineKind, ns, "good", good)
		Expect(admin.Create(ctx, o)).To(Succeed())
		o.(interface{ GetTerraformSpec() *infrav1.TerraformSpec }).GetTerraformSpec().Job.PodTemplate.Volumes[0].MountPath = "/captf"
		expectForbidden(admin.Update(ctx, o), "spec.job.podTemplate.volumes[0].mountPath: Forbidden", "at, under or above /captf")

		By("a template kind is held to the same rule")
		tmpl := &infrav1.TerraformMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "t"}}
		tmpl.Spec.Template.Spec.Module.Image = "example.com/module:1"
		tmpl.Spec.Template.Spec.Job.PodTemplate = &infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{configMapVolume("inputs", "/etc/x")}}
		expectForbidden(admin.Create(ctx, tmpl), "spec.template.spec.job.podTemplate.volumes[0].name: Forbidden", "rename the volume")

		By("the schema refuses a volume with both sources or none")
		both := good.DeepCopy()
		both.Volumes[0].Secret = &infrav1.RunnerVolumeSource{Name: "s"}
		err := admin.Create(ctx, withPodTemplate(infrav1.TerraformMachineKind, ns, "both", *both))
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("set exactly one of configMap and secret"))
	})
})

// A Secret volume whose Secret cannot be read is admitted with a warning: the controller reads
// it again before every Job and holds the object if it is a ServiceAccount token.
func TestAnUnreadablePodTemplateSecretIsAWarningNotARefusal(t *testing.T) {
	v := webhooks.Validator[*infrav1.TerraformMachine]{Kind: infrav1.TerraformMachineKind, Secrets: unreadable{}}
	m := objects.Machine("prod", "m").Module("example.com/module:1").Spec(func(s *infrav1.TerraformSpec) {
		s.Job.PodTemplate = &infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{secretVolume("registry", "/etc/registry", "registry")}}
	}).Obj()
	warnings, err := v.ValidateCreate(context.Background(), m)
	if err != nil {
		t.Fatalf("refused although the Secret could not be read: %v", err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "could not read the Secrets the spec hands to module code") ||
		!strings.Contains(warnings[0], "connection refused") {
		t.Fatalf("warnings %q, want one saying the Secrets could not be read and why", warnings)
	}
}
