package e2e_test

import (
	"bytes"
	"maps"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

		sourceBackups := backupsIn(source, ns)
		Expect(sourceBackups).To(HaveLen(2), "the first applies of the cluster and the machine each left a backup")

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

		By("the source keeps nothing of CAPTF's: no Secret, no Lease, no backup, and its namespace deletes cleanly")
		Eventually(func(g Gomega) {
			var secrets corev1.SecretList
			g.Expect(source.Client().List(ctx, &secrets, client.InNamespace(ns), client.HasLabels{infrav1.OwnerKindLabel})).To(Succeed())
			g.Expect(names(secrets.Items)).To(BeEmpty(), "CAPTF's Secrets left in the source")
			var leases coordinationv1.LeaseList
			g.Expect(source.Client().List(ctx, &leases, client.InNamespace(ns))).To(Succeed())
			g.Expect(names(leases.Items)).To(BeEmpty(), "Leases left in the source")
		}, time.Minute).Should(Succeed())
		kubectl(source, "delete", "namespace", ns, "--wait=false")
		Eventually(func() bool {
			return apierrors.IsNotFound(source.Client().Get(ctx, types.NamespacedName{Name: ns}, &corev1.Namespace{}))
		}, 2*time.Minute).Should(BeTrue(), "the source namespace stays Terminating")

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

		By("the target holds every backup the source had, protected, serial and lineage unchanged, and the backup of the apply that ended during the move")
		// clusterctl discovers what to move before it waits for block-move: the apply that ended
		// during the wait was counted while paused, so its backup was due, not taken, and the
		// target takes it from the moved state (docs/move.md).
		clusterLineage := stateOf(target, infrav1.TerraformClusterKind, ns, name).Lineage
		want := maps.Clone(sourceBackups)
		want[naming.StateBackupSecretName(naming.StateSuffix(ns, infrav1.TerraformClusterKind, name), 2)] = backupView{Serial: "2", Lineage: clusterLineage}
		Eventually(func() map[string]backupView { return backupsIn(target, ns) }, time.Minute).Should(Equal(want))
		var backups corev1.SecretList
		Expect(target.Client().List(ctx, &backups, client.InNamespace(ns), client.MatchingLabels{infrav1.SecretRoleLabel: infrav1.SecretRoleStateBackup})).To(Succeed())
		for _, b := range backups.Items {
			Expect(b.Finalizers).To(ContainElement(infrav1.StateProtectionFinalizer), "backup %s is not protected in the target", b.Name)
		}

		By("the target restores the oldest backup")
		oldest := sourceBackups[naming.StateBackupSecretName(naming.StateSuffix(ns, infrav1.TerraformClusterKind, name), 1)]
		Expect(oldest.Serial).To(Equal("1"))
		restores := jobsOf(target, infrav1.TerraformClusterKind, ns, name, infrav1.OperationRestore)
		kubectl(target, "annotate", "-n", ns, "terraformcluster", name, "captf.io/restore-state="+oldest.Serial)
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

// backupView is what a move must keep of a state backup: its serial and its lineage.
type backupView struct{ Serial, Lineage string }

// backupsIn lists the state backups of a namespace by name.
func backupsIn(sb target, ns string) map[string]backupView {
	GinkgoHelper()
	var l corev1.SecretList
	Expect(sb.Client().List(ctx, &l, client.InNamespace(ns), client.MatchingLabels{infrav1.SecretRoleLabel: infrav1.SecretRoleStateBackup})).To(Succeed())
	out := map[string]backupView{}
	for _, b := range l.Items {
		out[b.Name] = backupView{Serial: b.Annotations[infrav1.BackupSerialAnnotation], Lineage: b.Annotations[infrav1.BackupLineageAnnotation]}
	}
	return out
}

// names lists the names of objects.
func names[T any, PT interface {
	*T
	client.Object
}](items []T) []string {
	out := []string{}
	for i := range items {
		out = append(out, PT(&items[i]).GetName())
	}
	return out
}
