package e2e_test

import (
	"fmt"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/test/doccmd"
)

// backupsOf reads status.stateBackups, newest first.
func backupsOf(sb target, o *infrav1.TerraformCluster) []infrav1.StateBackup {
	GinkgoHelper()
	Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
	return o.Status.StateBackups
}

// conditionOf returns condition t of a TerraformCluster, read afresh.
func conditionOf(sb target, o *infrav1.TerraformCluster, t string) *metav1.Condition {
	if err := sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
		return nil
	}
	return meta.FindStatusCondition(o.Status.Conditions, t)
}

// runSeqOf reads the object's run sequence: it moves on with every Job the object starts
// (Jobs themselves are pruned to a short history).
func runSeqOf(sb target, o *infrav1.TerraformCluster) string {
	GinkgoHelper()
	Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
	return o.Annotations[infrav1.RunSeqAnnotation]
}

// describeState prints the state and the backups, with their serials and lineages.
func describeState(sb target, ns, name, when string) {
	st := stateOf(sb, infrav1.TerraformClusterKind, ns, name)
	var list corev1.SecretList
	_ = sb.Client().List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{infrav1.SecretRoleLabel: infrav1.SecretRoleStateBackup})
	fmt.Fprintf(GinkgoWriter, "STATE %s: ", when)
	if st != nil {
		fmt.Fprintf(GinkgoWriter, "serial %d lineage %s generation %v;", st.Serial, st.Lineage, generationIn(st))
	}
	for _, b := range list.Items {
		fmt.Fprintf(GinkgoWriter, " backup %s serial %s lineage %s;", b.Name, b.Annotations[infrav1.BackupSerialAnnotation], b.Annotations[infrav1.BackupLineageAnnotation])
	}
	fmt.Fprintln(GinkgoWriter)
}

// managedResources counts the resources a state tracks.
func managedResources(st *tfState) int {
	n := 0
	for _, r := range st.Resources {
		n += len(r.Instances)
	}
	return n
}

// The state safety promises of docs/state.md, with real Terraform through the state channel.
var _ = Describe(doccmd.SpecState, func() {
	It("backs up every apply, restores a backup, recovers a lost state by a restore, and lets a Retain deletion go", func() {
		const ns, name = "state", "st"
		sb := shared
		createNamespace(sb, ns)
		applyFixture(sb, ns, "cluster.yaml", name, 0)
		o := tc(ns, name)
		eventuallyReady(sb, o)
		suffix := naming.StateSuffix(ns, infrav1.TerraformClusterKind, name)

		By("apply, change the inputs, apply again: two backups")
		first := stateOf(sb, infrav1.TerraformClusterKind, ns, name)
		kubectl(sb, "patch", "-n", ns, "terraformcluster", name, "--type=merge", "-p", `{"spec":{"variables":{"generation":2}}}`)
		Eventually(func() any { return generationIn(stateOf(sb, infrav1.TerraformClusterKind, ns, name)) }).Should(Equal(float64(2)))
		Eventually(func() []infrav1.StateBackup { return backupsOf(sb, o) }).Should(HaveLen(2))
		backups := backupsOf(sb, o)
		Expect(backups[0].Serial).To(BeNumerically(">", backups[1].Serial))
		Expect(backups[1].Serial).To(BeEquivalentTo(first.Serial))
		fmt.Fprintf(GinkgoWriter, "%s", kubectl(sb, "get", "-n", ns, "secrets", "-l", "captf.io/secret-role=state-backup"))
		// docs/state.md's listing, as a person working in the namespace runs it: serial, Secret
		// and time, newest first.
		docs := namespacedShell(sb, ns)
		listed := docs.ok("docs/state.md", "kubectl get terraformcluster demo -o jsonpath='{range .status.stateBackups", "demo", name)
		Expect(listed).To(MatchRegexp(fmt.Sprintf(`^%d\t%s\t\d{4}-\d\d-\d\dT[0-9:]+Z\n%d\t%s\t\d{4}-\d\d-\d\dT[0-9:]+Z\n$`,
			backups[0].Serial, backups[0].Secret, backups[1].Serial, backups[1].Secret)))
		eventuallyReady(sb, o)

		describeState(sb, ns, name, "after two applies")
		By("restore the first serial: the state equals that backup, with a newer serial; nothing else runs")
		latest := stateOf(sb, infrav1.TerraformClusterKind, ns, name)
		restores := jobsOf(sb, infrav1.TerraformClusterKind, ns, name, infrav1.OperationRestore)
		kubectl(sb, "annotate", "-n", ns, "terraformcluster", name, fmt.Sprintf("captf.io/restore-state=%d", backups[1].Serial))
		restore := eventuallyNew(sb, infrav1.TerraformClusterKind, ns, name, infrav1.OperationRestore, restores)
		Expect(eventuallyFinished(sb, restore).Status.Succeeded).To(Equal(int32(1)))
		Eventually(func() map[string]string {
			Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			return o.Annotations
		}).ShouldNot(HaveKey(infrav1.RestoreStateAnnotation))
		restored := stateOf(sb, infrav1.TerraformClusterKind, ns, name)
		Expect(restored.Lineage).To(Equal(first.Lineage))
		Expect(restored.Serial).To(BeNumerically(">", latest.Serial), "the restored state is the newest serial")
		Expect(generationIn(restored)).To(Equal(float64(1)), "the state is the first backup's")
		Expect(managedResources(restored)).To(Equal(managedResources(first)))
		seq := runSeqOf(sb, o)
		Consistently(func() string { return runSeqOf(sb, o) }, 5*time.Second).Should(Equal(seq), "after the restore, the next pass starts no Job")

		describeState(sb, ns, name, "after the first restore")
		By("the state Secret is deleted: held by its finalizer")
		stateSecret := types.NamespacedName{Namespace: ns, Name: naming.StateSecretName(suffix)}
		kubectl(sb, "delete", "secret", "-n", ns, stateSecret.Name, "--wait=false")
		Consistently(func() error { return sb.Client().Get(ctx, stateSecret, &corev1.Secret{}) }, 3*time.Second).Should(Succeed())

		By("its finalizer forced off: StateLost, and an input change starts nothing")
		kubectl(sb, "patch", "-n", ns, "secret", stateSecret.Name, "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)
		Eventually(func() error { return sb.Client().Get(ctx, stateSecret, &corev1.Secret{}) }).Should(Satisfy(apierrors.IsNotFound))
		Eventually(func() *metav1.Condition { return conditionOf(sb, o, infrav1.StateReadableCondition) }).Should(
			And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.StateLostReason)))
		fmt.Fprintf(GinkgoWriter, "StateLost: %s\n", conditionOf(sb, o, infrav1.StateReadableCondition).Message)
		// docs/state.md's command shows what the docs show.
		shown := docs.ok("docs/state.md", `kubectl get terraformcluster demo -o jsonpath='{.status.conditions[?(@.type=="StateReadable")]}'`, "demo", name)
		Expect(shown).To(And(ContainSubstring(`"type":"StateReadable"`), ContainSubstring(`"status":"False"`), ContainSubstring(`"reason":"StateLost"`),
			ContainSubstring(`"message":"the object applied before but its Terraform state Secret is gone; nothing runs`)))
		Expect(conditionOf(sb, o, infrav1.ReadyCondition)).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.StateLostReason)),
			"docs/state.md: Ready is False with the reason StateLost")
		kubectl(sb, "patch", "-n", ns, "terraformcluster", name, "--type=merge", "-p", `{"spec":{"variables":{"generation":3}}}`)
		Consistently(func() string { return runSeqOf(sb, o) }, 5*time.Second).Should(Equal(seq), "no Job runs against a lost state")

		By("recovered by a restore of the newest backup; the pending change then applies, creating nothing twice")
		newest := backupsOf(sb, o)[0]
		restores = jobsOf(sb, infrav1.TerraformClusterKind, ns, name, infrav1.OperationRestore)
		kubectl(sb, "annotate", "-n", ns, "terraformcluster", name, "captf.io/restore-state="+strconv.FormatInt(newest.Serial, 10))
		recovery := eventuallyNew(sb, infrav1.TerraformClusterKind, ns, name, infrav1.OperationRestore, restores)
		Expect(eventuallyFinished(sb, recovery).Status.Succeeded).To(Equal(int32(1)))
		Eventually(func() any { return generationIn(stateOf(sb, infrav1.TerraformClusterKind, ns, name)) }).Should(Equal(float64(3)))
		eventuallyReady(sb, o)
		describeState(sb, ns, name, "after the recovery")
		final := stateOf(sb, infrav1.TerraformClusterKind, ns, name)
		Expect(final.Lineage).To(Equal(first.Lineage))
		Expect(managedResources(final)).To(Equal(managedResources(first)), "no resource was created a second time")

		By("a user outside the override groups may not abandon it")
		Expect(sb.Client().Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dev-edit"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{infrav1.GroupVersion.Group}, Resources: []string{"terraformclusters"},
				Verbs: []string{"get", "patch", "update"}}}})).To(Succeed())
		Expect(sb.Client().Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dev-edit"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "dev-edit"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "devs"}}})).To(Succeed())
		out, err := run(sb.Kubeconfig(), "kubectl", "annotate", "-n", ns, "terraformcluster", name, "--as=dev", "--as-group=devs",
			"captf.io/abandon-infrastructure="+string(o.UID))
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("only members of the override groups may abandon infrastructure"))

		By("deletionPolicy Retain: the object goes with no destroy; state, inputs and backups stay")
		kubectl(sb, "patch", "-n", ns, "terraformcluster", name, "--type=merge", "-p", `{"spec":{"deletionPolicy":"Retain"}}`)
		kubectl(sb, "delete", "-n", ns, "cluster", name, "--wait=false")
		Eventually(func() error { return sb.Client().Get(ctx, client.ObjectKeyFromObject(o), &infrav1.TerraformCluster{}) }).Should(Satisfy(apierrors.IsNotFound))
		Expect(jobsOf(sb, infrav1.TerraformClusterKind, ns, name, infrav1.OperationDestroy)).To(BeEmpty())
		retained := []string{stateSecret.Name, naming.InputsSecretName(suffix)}
		for _, b := range backups {
			retained = append(retained, b.Secret)
		}
		for _, s := range retained {
			sec := &corev1.Secret{}
			Expect(sb.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: s}, sec)).To(Succeed(), s)
			Expect(sec.Annotations).To(HaveKeyWithValue(infrav1.RetainedAnnotation, "true"), s)
		}
		Expect(managedResources(stateOf(sb, infrav1.TerraformClusterKind, ns, name))).To(Equal(managedResources(first)))
	})
})
