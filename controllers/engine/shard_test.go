package engine_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
)

var _ = Describe("Shards (cluster.x-k8s.io/watch-filter)", func() {
	It("labels the Jobs and Secrets of an object with its shard, so the manager of that shard caches them", func() {
		f := newFixture()
		tc := f.terraformCluster().Label(infrav1.WatchFilterLabel, "blue").Obj()
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		job := waitForJob(tc, infrav1.TerraformClusterKind, 1)
		Expect(job.Labels).To(HaveKeyWithValue(infrav1.WatchFilterLabel, "blue"), "the Job")
		st := statetest.Cluster("10.1.0.1", 6443)
		completeJob(job, &st, true, "")
		Expect(settled(tc)).NotTo(BeNil())

		suffix := suffixOf(tc, infrav1.TerraformClusterKind)
		Eventually(func(g Gomega) {
			secrets := &corev1.SecretList{}
			g.Expect(k8s.List(ctx, secrets, client.InNamespace(f.ns), client.MatchingLabels{
				infrav1.OwnerKindLabel: infrav1.TerraformClusterKind, infrav1.OwnerNameLabel: tc.Name})).To(Succeed())
			roles := map[string]string{}
			for _, s := range secrets.Items {
				roles[s.Labels[infrav1.SecretRoleLabel]] = s.Labels[infrav1.WatchFilterLabel]
			}
			// The state (made by Terraform's backend, labelled by the bookkeeping), its backup, the
			// durable inputs, the outputs and the plan Secret.
			for _, role := range []string{infrav1.SecretRoleState, infrav1.SecretRoleStateBackup, infrav1.SecretRoleInputs,
				infrav1.SecretRoleOutputs, infrav1.SecretRolePlan} {
				g.Expect(roles).To(HaveKeyWithValue(role, "blue"), "the %s Secret", role)
			}
		}).Should(Succeed())
		Expect(secretExists(f.ns, naming.StateSecretName(suffix))).To(BeTrue())
	})
})
