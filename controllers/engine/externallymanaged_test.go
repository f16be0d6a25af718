package engine_test

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

var _ = Describe("An externally managed cluster (cluster.x-k8s.io/managed-by)", func() {
	It("is left alone: no finalizer, no Job, no status, no Lease; once the mark is gone CAPTF takes it over", func() {
		f := newFixture()
		tc := f.terraformCluster().Obj()
		tc.Annotations = map[string]string{infrav1.ManagedByAnnotation: "another-tool"}
		Expect(k8s.Create(ctx, tc)).To(Succeed())

		By("marked: nothing is written, on the object or beside it")
		Consistently(func(g Gomega) {
			o := get(tc)
			g.Expect(o.Finalizers).To(BeEmpty())
			g.Expect(o.Status.Conditions).To(BeEmpty())
			g.Expect(o.Annotations).To(HaveLen(1), "only the mark: no run sequence, no block-move")
			g.Expect(kit.JobsOf(o, infrav1.TerraformClusterKind)).To(BeEmpty())
			g.Expect(leasesOf(f.ns)).To(BeEmpty())
		}, "3s").Should(Succeed())

		By("the mark removed: the finalizer, then the first apply")
		update(tc, func(tc *infrav1.TerraformCluster) { delete(tc.Annotations, infrav1.ManagedByAnnotation) })
		job := waitForJob(tc, infrav1.TerraformClusterKind, 1)
		Expect(operationOf(job)).To(Equal(infrav1.OperationApply))
		Expect(get(tc).Finalizers).To(ContainElement(infrav1.Finalizer))
	})

	It("holds its machines until its manager sets provisioned, then applies them with empty cluster outputs", func() {
		f := newFixture()
		tc := f.terraformCluster().Obj()
		tc.Annotations = map[string]string{infrav1.ManagedByAnnotation: "another-tool"}
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		tm := f.createMachine("m1")

		By("the machine waits for the cluster's infrastructure, as for any cluster not provisioned")
		waitForClusterInfrastructure(tm)
		Expect(kit.JobsOf(tm, infrav1.TerraformMachineKind)).To(BeEmpty())

		By("its manager sets provisioned: the machine applies, with no CAPTF state to take outputs from")
		get(tc)
		tc.Status.Initialization = &infrav1.Initialization{Provisioned: ptr.To(true)}
		Expect(k8s.Status().Update(ctx, tc)).To(Succeed())
		job := waitForJob(tm, infrav1.TerraformMachineKind, 1)
		run := &corev1.Secret{}
		Eventually(func() error {
			return k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: naming.RunSecretName(job.Name)}, run)
		}).Should(Succeed())
		var vars struct {
			Captf struct {
				ClusterOutputs map[string]any `json:"cluster_outputs"`
			} `json:"captf"`
		}
		Expect(json.Unmarshal(run.Data[runnerapi.KeyVariables], &vars)).To(Succeed())
		Expect(vars.Captf.ClusterOutputs).NotTo(BeNil())
		Expect(vars.Captf.ClusterOutputs).To(BeEmpty())
		Expect(get(tc).Status.Conditions).To(BeEmpty(), "the cluster itself is still left alone")
	})
})
