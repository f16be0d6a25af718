package e2e_test

import (
	"fmt"
	"path/filepath"
	"sort"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox"
)

// retainedAdopters is the override group of the sandbox this spec starts; retainedEditors may
// edit TerraformClusters but is in no override group.
const (
	retainedAdopters = "captf:adopters"
	retainedEditors  = "captf:editors"
)

// resourceIDs lists the IDs of the resource instances a state tracks, sorted.
func resourceIDs(st *tfState) []string {
	var ids []string
	for _, r := range st.Resources {
		for _, in := range r.Instances {
			ids = append(ids, fmt.Sprintf("%s.%s=%v", r.Type, r.Name, in.Attributes["id"]))
		}
	}
	sort.Strings(ids)
	return ids
}

// docs/state.md, "Whose state it is", with real Terraform through the state channel.
var _ = Describe("A retained state, with real Terraform", Ordered, func() {
	It("holds a re-created object on the state its Retain deletion left; with the opt-in it applies on top of it, creating nothing twice", func() {
		const ns, name = "retained", "rt"
		sb, err := sandbox.Start(ctx, sandbox.Options{
			Name: "retained", RepoRoot: repo, BinDir: binDir,
			ManagerBinary: filepath.Join(built, "manager"), RunnerBinary: filepath.Join(built, "runner"),
			TerraformBinary: tf, WorkDir: filepath.Join(GinkgoT().TempDir(), "retained"),
			ManagerArgs:   []string{"--guard-override-groups=" + retainedAdopters},
			ManagerOutput: GinkgoWriter, JobOutput: GinkgoWriter, Log: ctrl.Log.WithName("retained"),
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(sb.Stop()).To(Succeed()) })
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "retained-editor"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{infrav1.GroupVersion.Group}, Resources: []string{"terraformclusters"}, Verbs: []string{"get", "list", "patch", "update"}}}}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "retained-editor"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: retainedEditors},
				{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: retainedAdopters}}}
		Expect(sb.Client().Create(ctx, role)).To(Succeed())
		Expect(sb.Client().Create(ctx, binding)).To(Succeed())

		createNamespace(sb, ns)
		applyFixture(sb, ns, "cluster.yaml", name, 0)
		o := tc(ns, name)
		eventuallyReady(sb, o)
		first := stateOf(sb, infrav1.TerraformClusterKind, ns, name)
		Expect(resourceIDs(first)).NotTo(BeEmpty())
		Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		Expect(o.Annotations).To(HaveKeyWithValue(infrav1.StateLineageAnnotation, first.Lineage))

		By("deleted with deletionPolicy Retain: the state stays")
		kubectl(sb, "patch", "-n", ns, "terraformcluster", name, "--type=merge", "-p", `{"spec":{"deletionPolicy":"Retain"}}`)
		kubectl(sb, "delete", "-n", ns, "cluster", name, "--wait=false")
		Eventually(func() error { return sb.Client().Get(ctx, client.ObjectKeyFromObject(o), &infrav1.TerraformCluster{}) }).Should(Satisfy(apierrors.IsNotFound))
		// Cluster API removes the Cluster's finalizer after its infrastructure object went: a
		// Cluster applied again before that would be the one being deleted.
		Eventually(func() error {
			return sb.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &clusterv1.Cluster{})
		}).Should(Satisfy(apierrors.IsNotFound))

		By("re-created with the same name: it holds with RetainedStateFound and runs nothing")
		applyFixture(sb, ns, "cluster.yaml", name, 0)
		again := tc(ns, name)
		Eventually(func() *metav1.Condition { return conditionOf(sb, again, infrav1.StateReadableCondition) }).Should(
			And(Not(BeNil()), HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.RetainedStateFoundReason),
				HaveField("Message", ContainSubstring(first.Lineage))))
		fmt.Fprintf(GinkgoWriter, "RetainedStateFound: %s\n", conditionOf(sb, again, infrav1.StateReadableCondition).Message)
		seq := runSeqOf(sb, again)
		Consistently(func() string { return runSeqOf(sb, again) }, 5*time.Second).Should(Equal(seq), "no Job runs against a state it never wrote")
		Expect(stateOf(sb, infrav1.TerraformClusterKind, ns, name).Serial).To(Equal(first.Serial))

		By("the opt-in from an editor outside the override groups is refused")
		adopt := []string{"annotate", "-n", ns, "terraformcluster", name, infrav1.AdoptStateAnnotation + "=" + first.Lineage}
		out, err := run(sb.Kubeconfig(), "kubectl", append([]string{"--as=dev", "--as-group=" + retainedEditors}, adopt...)...)
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("only members of the override groups may adopt a state"))

		By("the opt-in from an override group member: it applies on top of the old state, creating nothing twice")
		kubectl(sb, append([]string{"--as=alice", "--as-group=" + retainedAdopters}, adopt...)...)
		eventuallyReady(sb, again)
		final := stateOf(sb, infrav1.TerraformClusterKind, ns, name)
		Expect(final.Lineage).To(Equal(first.Lineage), "the old state, not a new one")
		Expect(final.Serial).To(BeNumerically(">=", first.Serial))
		Expect(resourceIDs(final)).To(Equal(resourceIDs(first)), "no resource was created a second time")
		Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(again), again)).To(Succeed())
		Expect(again.Annotations).To(HaveKeyWithValue(infrav1.StateLineageAnnotation, first.Lineage))
	})
})
