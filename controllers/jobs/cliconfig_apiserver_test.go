package jobs

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var _ = Describe("Jobs with a CLI configuration", func() {
	// TF_TOKEN_<host>:<port> holds a colon: the API server must accept such a variable name,
	// or a registry on a port other than 443 could not get its token.
	It("are accepted by the API server with TF_TOKEN_ names, a port among them, and the file's volume", func() {
		ns := restrictedNamespace()
		p := ownedParams(ns, cliConfigParams())
		built, err := Build(p)
		Expect(err).NotTo(HaveOccurred())
		Expect(k8s.Create(ctx, built.DeepCopy())).To(Succeed())
		got := &batchv1.Job{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(built), got)).To(Succeed())
		Expect(equality.Semantic.DeepDerivative(built.Spec.Template.Spec, got.Spec.Template.Spec)).To(BeTrue(),
			"pod spec changed by the server:\nbuilt %+v\ngot   %+v", built.Spec.Template.Spec, got.Spec.Template.Spec)
		Expect(got.Spec.Template.Spec.Containers[0].Env).To(ContainElement(HaveField("Name", "TF_TOKEN_127_0_0_1:8443")))
	})
})
