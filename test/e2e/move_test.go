package e2e_test

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

var _ = Describe("clusterctl move from one sandbox to another", func() {
	It("waits for a running apply, carries state and inputs over, destroys nothing, and the target applies nothing", func() {
		const ns, name = "move", "mv"
		machine := name + "-m0"
		source := shared
		began := time.Now()
		target := startSandbox("target")
		DeferCleanup(func() { Expect(target.Stop()).To(Succeed()) })
		AddReportEntry("second sandbox up", since(began))

		createNamespace(source, ns)
		applyFixture(source, ns, "cluster.yaml", name, 0)
		applyFixture(source, ns, "machine.yaml", name, 0)
		eventuallyReady(source, tc(ns, name), tm(ns, machine))

		By("the real Cluster API core manager finds the Machine's node in the workload cluster the sandbox plays, and marks the control plane initialized")
		m := &clusterv1.Machine{}
		c := &clusterv1.Cluster{}
		Eventually(func(g Gomega) {
			g.Expect(source.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: machine}, m)).To(Succeed())
			g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "the Machine has no nodeRef yet")
			g.Expect(source.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, c)).To(Succeed())
			g.Expect(c.Status.Initialization.InfrastructureProvisioned).To(HaveValue(BeTrue()))
			g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.ClusterControlPlaneInitializedCondition)).To(BeTrue(), "the control plane is not initialized yet")
		}, 2*time.Minute).Should(Succeed())

		By("a slow apply starts in the source")
		kubectl(source, "patch", "-n", ns, "terraformcluster", name, "--type=merge", "-p", `{"spec":{"variables":{"sleep_seconds":20,"generation":2}}}`)
		job := eventuallyRunning(source, infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)
		Expect(job.Name).To(HaveSuffix("-2"))

		By("clusterctl move waits for block-move while the Job runs")
		moveStarted := time.Now()
		var moveOut bytes.Buffer
		move := exec.Command(filepath.Join(binDir, "clusterctl"), "move", "-n", ns,
			"--kubeconfig", source.Kubeconfig(), "--to-kubeconfig", target.Kubeconfig(), "-v", "1")
		move.Env = append(move.Environ(), "CLUSTERCTL_DISABLE_VERSIONCHECK=true")
		move.Stdout, move.Stderr = &moveOut, &moveOut
		Expect(move.Start()).To(Succeed())
		moved := make(chan error, 1)
		go func() { moved <- move.Wait() }()
		DeferCleanup(func() {
			if move.ProcessState == nil {
				_ = move.Process.Kill()
			}
			GinkgoWriter.Printf("clusterctl move output:\n%s\n", moveOut.String())
		})
		Eventually(func(g Gomega) {
			g.Expect(source.Client().Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
			g.Expect(c.Spec.Paused).To(HaveValue(BeTrue()))
		}).Should(Succeed())
		Consistently(moved, 3*time.Second).ShouldNot(Receive(), "the move must wait for the Job")
		o := tc(ns, name)
		Expect(source.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		Expect(o.Annotations).To(HaveKey(infrav1.BlockMoveAnnotation))
		Expect(ranToEnd(job)).To(BeFalse(), "the Job still runs while the move waits")
		var targetTCs infrav1.TerraformClusterList
		Expect(target.Client().List(ctx, &targetTCs, client.InNamespace(ns))).To(Succeed())
		Expect(targetTCs.Items).To(BeEmpty(), "nothing is created in the target before the Job ended")

		By("the move completes once the Job ended")
		finished := eventuallyFinished(source, job)
		Expect(finished.Status.Succeeded).To(Equal(int32(1)))
		Eventually(moved, 3*time.Minute).Should(Receive(BeNil()), "clusterctl move failed:\n%s", &moveOut)
		AddReportEntry("clusterctl move (from its start, including the wait for the Job)", since(moveStarted))
		Expect(moveOut.String()).To(ContainSubstring("block-move"))

		By("nothing was destroyed in the source, and its objects are gone from there")
		runs := source.Executor().Runs()
		for _, kind := range []string{infrav1.TerraformClusterKind, infrav1.TerraformMachineKind} {
			n := map[string]string{infrav1.TerraformClusterKind: name, infrav1.TerraformMachineKind: machine}[kind]
			Expect(runsOf(runs, kind, ns, n, infrav1.OperationDestroy)).To(BeEmpty())
		}
		Expect(runsOf(runs, infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)).To(HaveLen(2))
		Eventually(func(g Gomega) {
			var l infrav1.TerraformClusterList
			g.Expect(source.Client().List(ctx, &l, client.InNamespace(ns))).To(Succeed())
			g.Expect(l.Items).To(BeEmpty())
		}).Should(Succeed())

		By("the state Secrets and the durable inputs arrived in the target, the state with the slow apply in it")
		st := stateOf(target, infrav1.TerraformClusterKind, ns, name)
		Expect(st).NotTo(BeNil(), "the cluster's state moved")
		Expect(generationIn(st)).To(Equal(float64(2)), "the target holds the state the apply wrote during the move")
		Expect(stateOf(target, infrav1.TerraformMachineKind, ns, machine)).NotTo(BeNil(), "the machine's state moved")
		for _, kind := range []string{infrav1.TerraformClusterKind, infrav1.TerraformMachineKind} {
			n := map[string]string{infrav1.TerraformClusterKind: name, infrav1.TerraformMachineKind: machine}[kind]
			s := &corev1.Secret{}
			Expect(target.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: naming.InputsSecretName(naming.StateSuffix(ns, kind, n))}, s)).To(Succeed())
		}

		By("the target resumes: Ready from the moved state, without a Job")
		eventuallyReady(target, tc(ns, name), tm(ns, machine))
		Consistently(func(g Gomega) {
			var jobs batchv1.JobList
			g.Expect(target.Client().List(ctx, &jobs, client.InNamespace(ns))).To(Succeed())
			g.Expect(jobs.Items).To(BeEmpty())
		}, 5*time.Second).Should(Succeed())
		Expect(target.Executor().Runs()).To(BeEmpty())
		tt := tm(ns, machine)
		Expect(target.Client().Get(ctx, client.ObjectKeyFromObject(tt), tt)).To(Succeed())
		Expect(tt.Spec.ProviderID).To(HavePrefix("captf://move/" + machine + "/"))
		Expect(target.Client().Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		Expect(ptr.Deref(c.Spec.Paused, false)).To(BeFalse(), "clusterctl unpaused the Cluster in the target")

		By("the state backups moved too, and the target restores from one")
		var backups corev1.SecretList
		Expect(target.Client().List(ctx, &backups, client.InNamespace(ns), client.MatchingLabels{
			infrav1.SecretRoleLabel: infrav1.SecretRoleStateBackup, infrav1.OwnerKindLabel: infrav1.TerraformClusterKind})).To(Succeed())
		// clusterctl discovers the objects to move before it waits for block-move, so the backup
		// of the apply that ran during the move stays in the source (docs/move.md); the state
		// Secret carries that apply's state.
		Expect(backups.Items).NotTo(BeEmpty(), "the backup of the first apply moved")
		var oldest *corev1.Secret
		serial := func(s *corev1.Secret) int64 {
			n, err := strconv.ParseInt(s.Annotations[infrav1.BackupSerialAnnotation], 10, 64)
			Expect(err).NotTo(HaveOccurred(), "backup %s", s.Name)
			return n
		}
		for i := range backups.Items {
			if oldest == nil || serial(&backups.Items[i]) < serial(oldest) {
				oldest = &backups.Items[i]
			}
		}
		restores := jobsOf(target, infrav1.TerraformClusterKind, ns, name, infrav1.OperationRestore)
		kubectl(target, "annotate", "-n", ns, "terraformcluster", name, "captf.io/restore-state="+oldest.Annotations[infrav1.BackupSerialAnnotation])
		restore := eventuallyNew(target, infrav1.TerraformClusterKind, ns, name, infrav1.OperationRestore, restores)
		Expect(eventuallyFinished(target, restore).Status.Succeeded).To(Equal(int32(1)))
		Eventually(func() any { return generationIn(stateOf(target, infrav1.TerraformClusterKind, ns, name)) }).Should(Equal(float64(1)),
			"the target holds the first apply's state again")
		AddReportEntry("move scenario", since(began))
	})
})

// generationIn reads the generation the slow resource of the cluster module was applied with:
// terraform_data keeps triggers_replace as a dynamic value, {"value": [...], "type": [...]}.
func generationIn(st *tfState) any {
	for _, r := range st.Resources {
		if r.Type != "terraform_data" || r.Name != "slow" || len(r.Instances) != 1 {
			continue
		}
		dyn, _ := r.Instances[0].Attributes["triggers_replace"].(map[string]any)
		if v, ok := dyn["value"].([]any); ok && len(v) == 1 {
			return v[0]
		}
		return r.Instances[0].Attributes["triggers_replace"]
	}
	return nil
}
