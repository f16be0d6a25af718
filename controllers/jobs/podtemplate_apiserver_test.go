package jobs

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

var _ = Describe("Jobs with a pod template", func() {
	It("are accepted by the API server as built, and their pods by the restricted Pod Security Standard", func() {
		ns := restrictedNamespace()
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "infra-critical"}, Value: 1000}
		if err := k8s.Create(ctx, pc); err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		p := ownedParams(ns, imageParams(infrav1.OperationApply))
		p.Spec.Job.PodTemplate = &infrav1.RunnerPodTemplate{}
		for _, set := range podTemplateFamilies {
			set(p.Spec.Job.PodTemplate)
		}
		built, err := Build(p)
		Expect(err).NotTo(HaveOccurred())
		Expect(k8s.Create(ctx, built.DeepCopy())).To(Succeed())
		got := &batchv1.Job{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(built), got)).To(Succeed())
		Expect(equality.Semantic.DeepDerivative(built.Spec.Template.Spec, got.Spec.Template.Spec)).To(BeTrue(),
			"pod spec changed by the server:\nbuilt %+v\ngot   %+v", built.Spec.Template.Spec, got.Spec.Template.Spec)
		Expect(equality.Semantic.DeepDerivative(built.Spec.Template.ObjectMeta, got.Spec.Template.ObjectMeta)).To(BeTrue())

		pod := objects.PodOf(built, built.Name+"-pod").AsBuilt().Obj()
		Expect(k8s.Create(ctx, pod)).To(Succeed())
	})
})
