package jobs

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

var (
	env *envtest.Env
	k8s client.Client
	ctx context.Context
)

func TestJobsAgainstAPIServer(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "jobs (envtest)")
}

var _ = envtest.RegisterSuite(envtest.SuiteOptions{}, func(s *envtest.Suite) {
	env, k8s, ctx = s.Env, s.Client, s.Ctx
})

// restrictedNamespace creates a namespace that enforces the restricted Pod Security Standard,
// with the service accounts the Jobs name.
func restrictedNamespace() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "jobs-", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	for _, sa := range []string{"captf-runner", "infra-runner"} {
		Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: sa}})).To(Succeed())
	}
	return ns.Name
}

// ownedParams points params at a real object in the namespace.
func ownedParams(ns string, p Params) Params {
	kind := p.Owner.Kind
	if kind != infrav1.TerraformClusterKind {
		kind = infrav1.TerraformMachineKind
	}
	obj := objects.OfKind(kind, ns, p.Owner.Name).Module("example.com/m:1").Obj()
	if err := k8s.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	p.Owner.Namespace, p.Owner.UID = ns, obj.GetUID()
	p.Suffix = naming.StateSuffix(ns, p.Owner.Kind, p.Owner.Name)
	return p
}

var _ = Describe("Jobs built by Build", func() {
	It("are accepted by the API server as built, for every operation and module kind", func() {
		ns := restrictedNamespace()
		// Every operation of both module kinds, and the apply of a saved plan.
		savedPlan := func(infrav1.Operation) Params { return savedPlanParams() }
		for i, op := range append(allOperations, infrav1.OperationApply) {
			kinds := []func(infrav1.Operation) Params{imageParams, configMapParams}
			if i == len(allOperations) {
				kinds = []func(infrav1.Operation) Params{savedPlan}
			}
			for _, params := range kinds {
				p := ownedParams(ns, params(op))
				p.Seq = int64(i) // distinct names per operation
				built, err := Build(p)
				Expect(err).NotTo(HaveOccurred())
				job := built.DeepCopy()
				Expect(k8s.Create(ctx, job)).To(Succeed(), "%s/%s", p.Owner.Kind, op)

				got := &batchv1.Job{}
				Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), got)).To(Succeed())
				// Everything Build set survives the API server's defaulting and validation.
				Expect(equality.Semantic.DeepDerivative(built.Spec.Template.Spec, got.Spec.Template.Spec)).To(BeTrue(),
					"pod spec changed by the server:\nbuilt %+v\ngot   %+v", built.Spec.Template.Spec, got.Spec.Template.Spec)
				Expect(equality.Semantic.DeepDerivative(built.Labels, got.Labels)).To(BeTrue())
				Expect(equality.Semantic.DeepDerivative(built.Spec.Template.Labels, got.Spec.Template.Labels)).To(BeTrue())
				Expect(*got.Spec.BackoffLimit).To(BeZero())
				Expect(*got.Spec.PodReplacementPolicy).To(Equal(batchv1.Failed))
				Expect(got.OwnerReferences).To(Equal(built.OwnerReferences))
				Expect(got.Annotations).To(HaveKeyWithValue(infrav1.InputsHashAnnotation, p.InputsHash))
				Expect(got.Annotations).To(Equal(built.Annotations))

				// The same params rebuild the same name: a second create cannot start a second Job.
				again, err := Build(p)
				Expect(err).NotTo(HaveOccurred())
				Expect(apierrors.IsAlreadyExists(k8s.Create(ctx, again))).To(BeTrue())
			}
		}
	})

	It("make pods that the restricted Pod Security Standard admits", func() {
		ns := restrictedNamespace()
		for _, params := range []func(infrav1.Operation) Params{imageParams, configMapParams} {
			p := ownedParams(ns, params(infrav1.OperationApply))
			job, err := Build(p)
			Expect(err).NotTo(HaveOccurred())
			// The API server runs Pod Security admission on pods; a Job only draws warnings.
			pod := objects.PodOf(job, job.Name+"-pod").AsBuilt().Obj()
			Expect(k8s.Create(ctx, pod)).To(Succeed(), "%s pod refused", p.Owner.Kind)

			// Proof that the namespace enforces: the same pod with root allowed is refused.
			root := pod.DeepCopy()
			root.Name += "-root"
			root.ResourceVersion = ""
			root.Spec.SecurityContext.RunAsNonRoot = nil
			root.Spec.SecurityContext.RunAsUser = nil
			err = k8s.Create(ctx, root)
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
			Expect(strings.Contains(err.Error(), "restricted")).To(BeTrue(), err.Error())
		}
	})
})
