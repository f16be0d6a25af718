package webhooks_test

// The template-immutability policy of config/policy, as config/default renders it, in the
// suite's kube-apiserver: a CAPTF template's spec.template.spec cannot change, except in the
// dry runs Cluster API's topology controller makes to find out whether a ClusterClass template
// changed (docs/cluster-api.md, "Rolling out a change").

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// topologyDryRunAnnotation is Cluster API's mark on the objects of its topology dry runs
// (clusterv1.TopologyDryRunAnnotation).
const topologyDryRunAnnotation = "topology.cluster.x-k8s.io/dry-run"

// deniedByTemplatePolicy reports whether err is the template-immutability policy's refusal.
func deniedByTemplatePolicy(err error) bool {
	return err != nil && apierrors.IsInvalid(err) &&
		strings.Contains(err.Error(), "ValidatingAdmissionPolicy") && strings.Contains(err.Error(), "template-immutability")
}

var _ = Describe("the template-immutability policy", func() {
	It("refuses an edit of a template's spec with what to do instead; lets a label change and Cluster API's topology dry runs through", func() {
		ns := newNamespace()
		module := func(image string) infrav1.TerraformSpec {
			return infrav1.TerraformSpec{Module: infrav1.ModuleSource{Image: image}}
		}
		mt := &infrav1.TerraformMachineTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "mt", Namespace: ns},
			Spec: infrav1.TerraformMachineTemplateSpec{Template: infrav1.TerraformMachineTemplateResource{
				Spec: infrav1.TerraformMachineSpec{TerraformSpec: module("registry.example/modules/vm:1.0")}}},
		}
		ct := &infrav1.TerraformClusterTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "ct", Namespace: ns},
			Spec: infrav1.TerraformClusterTemplateSpec{Template: infrav1.TerraformClusterTemplateResource{
				Spec: infrav1.TerraformClusterSpec{TerraformSpec: module("registry.example/modules/net:1.0")}}},
		}
		pt := &infrav1.TerraformMachinePoolTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "pt", Namespace: ns},
			Spec: infrav1.TerraformMachinePoolTemplateSpec{Template: infrav1.TerraformMachinePoolTemplateResource{
				Spec: infrav1.TerraformMachinePoolSpec{TerraformSpec: module("registry.example/modules/pool:1.0")}}},
		}
		for _, c := range []struct {
			kind string
			obj  client.Object
			edit func()
			want string
		}{
			{"TerraformMachineTemplate", mt, func() { mt.Spec.Template.Spec.Module.Image = "registry.example/modules/vm:2.0" },
				"Create a new TerraformMachineTemplate with the change and point the MachineDeployment (spec.template.spec.infrastructureRef.name) or the ClusterClass at it"},
			{"TerraformClusterTemplate", ct, func() { ct.Spec.Template.Spec.Module.Image = "registry.example/modules/net:2.0" },
				"Create a new TerraformClusterTemplate with the change and point the ClusterClass at it"},
			{"TerraformMachinePoolTemplate", pt, func() { pt.Spec.Template.Spec.Module.Image = "registry.example/modules/pool:2.0" },
				"Create a new TerraformMachinePoolTemplate with the change and point the ClusterClass at it"},
		} {
			Expect(admin.Create(ctx, c.obj)).To(Succeed())
			kind := c.kind
			original := c.obj.DeepCopyObject().(client.Object)
			c.edit()
			edited := c.obj.DeepCopyObject().(client.Object)

			// The API server loads a new policy asynchronously: wait for its refusal with dry
			// runs, which change nothing while it is not loaded yet.
			var err error
			Eventually(func() bool {
				err = admin.Update(ctx, edited.DeepCopyObject().(client.Object), client.DryRunAll)
				return deniedByTemplatePolicy(err)
			}).Should(BeTrue(), "the template-immutability policy never refused an edit of %s (last answer: %v)", kind, err)
			Expect(err.Error()).To(ContainSubstring(c.want))

			By(kind + ": the edit itself is refused, and the template keeps its spec")
			err = admin.Update(ctx, edited.DeepCopyObject().(client.Object))
			Expect(deniedByTemplatePolicy(err)).To(BeTrue(), "%v", err)
			Expect(admin.Get(ctx, client.ObjectKeyFromObject(c.obj), c.obj)).To(Succeed())
			Expect(c.obj.GetResourceVersion()).To(Equal(original.GetResourceVersion()))

			By(kind + ": Cluster API's topology dry run (dry run and its annotation) goes through; the annotation alone does not")
			marked := edited.DeepCopyObject().(client.Object)
			marked.SetAnnotations(map[string]string{topologyDryRunAnnotation: ""})
			Expect(admin.Update(ctx, marked.DeepCopyObject().(client.Object), client.DryRunAll)).To(Succeed())
			Expect(deniedByTemplatePolicy(admin.Update(ctx, marked.DeepCopyObject().(client.Object)))).To(BeTrue(),
				"the annotation on a real update lets nothing through")
			Expect(admin.Get(ctx, client.ObjectKeyFromObject(c.obj), c.obj)).To(Succeed())
			Expect(c.obj.GetResourceVersion()).To(Equal(original.GetResourceVersion()), "the dry run persisted nothing")

			By(kind + ": metadata is not the template's spec")
			c.obj.SetLabels(map[string]string{"team": "a"})
			Expect(admin.Update(ctx, c.obj)).To(Succeed())
		}
	})
})
