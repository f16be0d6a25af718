package e2e_test

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/executor"
)

// The sandbox binary as `make run SAMPLES=1` starts it, driven from outside with kubectl.
var _ = Describe("make run with the samples", Ordered, func() {
	var (
		work, kubeconfig string
		cmd              *exec.Cmd
		lines            chan string
		exited           chan error
		began            time.Time
		sb               *attached
		children         []int
	)
	const ns = "default"

	BeforeAll(func() {
		work = GinkgoT().TempDir()
		kubeconfig = filepath.Join(work, "sandbox.kubeconfig")
		cmd = exec.Command(filepath.Join(built, "sandbox"), "--apply-samples", "--kubeconfig="+kubeconfig,
			"--work-dir="+filepath.Join(work, "sandbox"), "--bin-dir="+binDir, "--repo="+repo,
			"--manager-binary="+filepath.Join(built, "manager"), "--runner-binary="+filepath.Join(built, "runner"),
			"--terraform="+tf)
		cmd.Dir = repo
		pr, pw := io.Pipe()
		cmd.Stdout, cmd.Stderr = pw, GinkgoWriter
		lines, exited = make(chan string, 1024), make(chan error, 1)
		go func() {
			sc := bufio.NewScanner(pr)
			sc.Buffer(make([]byte, 64*1024), 1024*1024)
			for sc.Scan() {
				GinkgoWriter.Println(sc.Text())
				select {
				case lines <- sc.Text():
				default:
				}
			}
		}()
		began = time.Now()
		Expect(cmd.Start()).To(Succeed())
		go func() { exited <- cmd.Wait(); _ = pw.Close() }()
		DeferCleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
			}
		})
	})

	waitLine := func(prefix string, timeout time.Duration) string {
		GinkgoHelper()
		deadline := time.After(timeout)
		for {
			select {
			case l := <-lines:
				if strings.HasPrefix(l, prefix) {
					return l
				}
			case err := <-exited:
				Fail("the sandbox exited early: " + errString(err))
			case <-deadline:
				Fail("no line starting with " + prefix)
			}
		}
	}

	It("comes up, writes the kubeconfig and brings the samples to Ready", func() {
		ready := waitLine("sandbox ready", 3*time.Minute)
		AddReportEntry("make run: sandbox ready", ready)
		_, err := os.Stat(kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		line := waitLine("samples ready", 3*time.Minute)
		AddReportEntry("make run: samples Ready (from the sandbox's start)", line)
		AddReportEntry("make run: samples Ready (from exec, measured by the test)", since(began))

		sb = attach(kubeconfig, filepath.Join(work, "sandbox"))
		kc := func(args ...string) string { GinkgoHelper(); return kubectl(sb, args...) }
		kc("wait", "-n", ns, "--for=condition=Ready", "--timeout=60s",
			"terraformcluster/sample", "terraformmachine/sample-machine-0", "terraformmachinepool/sample-pool")

		By("the contract fields come from the modules' outputs")
		Expect(kc("get", "terraformcluster", "-n", ns, "sample", "-o", "jsonpath={.spec.controlPlaneEndpoint.host}:{.spec.controlPlaneEndpoint.port}")).
			To(Equal("sample.default.example.internal:6443"))
		Expect(kc("get", "terraformcluster", "-n", ns, "sample", "-o", "jsonpath={.status.failureDomains[*].name}")).To(Equal("zone-a zone-b"))
		Expect(kc("get", "terraformcluster", "-n", ns, "sample", "-o", "jsonpath={.status.initialization.provisioned}")).To(Equal("true"))
		Expect(kc("get", "terraformmachine", "-n", ns, "sample-machine-0", "-o", "jsonpath={.spec.providerID}")).To(HavePrefix("captf://default/sample-machine-0/"))
		Expect(kc("get", "terraformmachine", "-n", ns, "sample-machine-0", "-o", "jsonpath={.status.addresses[*].type}")).To(Equal("Hostname InternalIP"))
		Expect(kc("get", "terraformmachine", "-n", ns, "sample-machine-0", "-o", "jsonpath={.status.failureDomain}")).To(Equal("zone-a"))
		Expect(strings.Fields(kc("get", "terraformmachinepool", "-n", ns, "sample-pool", "-o", "jsonpath={.spec.providerIDList[*]}"))).To(HaveLen(2))
		Expect(kc("get", "terraformmachinepool", "-n", ns, "sample-pool", "-o", "jsonpath={.status.replicas}")).To(Equal("2"))
		// The sample pool module's instances output: one entry per provider ID, each ready.
		Expect(kc("get", "terraformmachinepool", "-n", ns, "sample-pool", "-o", "jsonpath={.status.instances[*].providerID}")).
			To(Equal(kc("get", "terraformmachinepool", "-n", ns, "sample-pool", "-o", "jsonpath={.spec.providerIDList[*]}")))
		Expect(kc("get", "terraformmachinepool", "-n", ns, "sample-pool", "-o", "jsonpath={.status.instances[*].ready} {.status.readyInstances}")).
			To(Equal("true true 2"))

		By("the real Cluster API core manager copied them into the Cluster and the Machine")
		Expect(kc("get", "cluster", "-n", ns, "sample", "-o", "jsonpath={.status.initialization.infrastructureProvisioned} {.spec.controlPlaneEndpoint.host}")).
			To(Equal("true sample.default.example.internal"))
		Expect(kc("get", "machine", "-n", ns, "sample-machine-0", "-o", "jsonpath={.spec.providerID}")).
			To(Equal(kc("get", "terraformmachine", "-n", ns, "sample-machine-0", "-o", "jsonpath={.spec.providerID}")))

		By("the ClusterClass sample: the topology controller stamped it, kubeadm's providers made its control plane, CAPTF applied every machine, the Cluster is Available")
		Expect(kc("get", "cluster", "-n", ns, "sample-topology", "-o", "jsonpath={.spec.topology.classRef.name}")).To(Equal("captf"))
		kc("wait", "-n", ns, "--timeout=60s", "cluster/sample-topology", "--for=condition=Available")
		topology := "cluster.x-k8s.io/cluster-name=sample-topology"
		Expect(strings.Fields(kc("get", "terraformmachines", "-n", ns, "-l", topology, "-o",
			`jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{" "}{end}`))).To(Equal([]string{"True", "True"}),
			"the control plane machine and the worker")
		Expect(kc("get", "terraformmachinepools", "-n", ns, "-l", topology, "-o", "jsonpath={.items[*].status.replicas}")).To(Equal("2"))
		Expect(kc("get", "kubeadmcontrolplanes", "-n", ns, "-l", topology, "-o",
			`jsonpath={.items[*].status.initialization.controlPlaneInitialized} {.items[*].status.conditions[?(@.type=="Available")].status}`)).To(Equal("true True"))

		By("the state is in the sandbox API server, written by the runner under its own ServiceAccount")
		st := stateOf(sb, infrav1.TerraformClusterKind, ns, "sample")
		Expect(st).NotTo(BeNil())
		Expect(st.Labels).To(HaveKey("clusterctl.cluster.x-k8s.io/move"))
		for _, kind := range []string{infrav1.TerraformClusterKind, infrav1.TerraformMachineKind, infrav1.TerraformMachinePoolKind} {
			name := map[string]string{infrav1.TerraformClusterKind: "sample", infrav1.TerraformMachineKind: "sample-machine-0", infrav1.TerraformMachinePoolKind: "sample-pool"}[kind]
			Expect(runsOf(readHistory(sb.HistoryFile()), kind, ns, name, infrav1.OperationApply)).To(HaveLen(1), "%s %s", kind, name)
		}
	})

	It("applies an input change once more", func() {
		kc := func(args ...string) string { GinkgoHelper(); return kubectl(sb, args...) }
		began := time.Now()
		// The MachinePool's replicas reach the pool's module (var.captf.replicas): one command.
		kc("scale", "machinepool", "-n", ns, "sample-pool", "--replicas=3")
		Eventually(func(g Gomega) {
			g.Expect(strings.Fields(kc("get", "terraformmachinepool", "-n", ns, "sample-pool", "-o", "jsonpath={.spec.providerIDList[*]}"))).To(HaveLen(3))
			g.Expect(kc("get", "terraformmachinepool", "-n", ns, "sample-pool", "-o", "jsonpath={.status.replicas}")).To(Equal("3"))
			g.Expect(kc("get", "terraformmachinepool", "-n", ns, "sample-pool", "-o", "jsonpath={.status.instances[*].ready} {.status.readyInstances}")).
				To(Equal("true true true 3"))
		}).Should(Succeed())
		Expect(kc("get", "terraformmachinepool", "-n", ns, "sample-pool", "-o", "jsonpath={.status.instances[*].providerID}")).
			To(Equal(kc("get", "terraformmachinepool", "-n", ns, "sample-pool", "-o", "jsonpath={.spec.providerIDList[*]}")))
		AddReportEntry("input change applied", since(began))
		eventuallyReady(sb, &infrav1.TerraformMachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sample-pool"}})
		// Finished Jobs are pruned to the history limit, so the executor's own record counts the
		// runs.
		Consistently(func() []executor.Run {
			return runsOf(readHistory(sb.HistoryFile()), infrav1.TerraformMachinePoolKind, ns, "sample-pool", infrav1.OperationApply)
		}, 3*time.Second).Should(HaveLen(2), "one apply for the samples, one for the change")
		runs := readHistory(sb.HistoryFile())
		Expect(runsOf(runs, infrav1.TerraformClusterKind, ns, "sample", infrav1.OperationApply)).To(HaveLen(1))
		Expect(runsOf(runs, infrav1.TerraformMachineKind, ns, "sample-machine-0", infrav1.OperationApply)).To(HaveLen(1))
	})

	It("destroys everything through destroy Jobs when the Cluster is deleted, and leaves nothing behind", func() {
		kc := func(args ...string) string { GinkgoHelper(); return kubectl(sb, args...) }
		began := time.Now()
		kc("delete", "cluster", "-n", ns, "sample", "sample-topology", "--wait=false")
		Eventually(func(g Gomega) {
			for _, l := range []client.ObjectList{&clusterv1.ClusterList{}, &clusterv1.MachineList{}, &clusterv1.MachinePoolList{},
				&infrav1.TerraformClusterList{}, &infrav1.TerraformMachineList{}, &infrav1.TerraformMachinePoolList{}} {
				g.Expect(sb.Client().List(ctx, l, client.InNamespace(ns))).To(Succeed())
				g.Expect(meta.LenList(l)).To(BeZero(), "%T", l)
			}
		}).Should(Succeed())
		AddReportEntry("cluster deleted (destroy Jobs included)", since(began))

		runs := readHistory(sb.HistoryFile())
		for kind, name := range map[string]string{infrav1.TerraformClusterKind: "sample", infrav1.TerraformMachineKind: "sample-machine-0", infrav1.TerraformMachinePoolKind: "sample-pool"} {
			d := runsOf(runs, kind, ns, name, infrav1.OperationDestroy)
			Expect(d).To(HaveLen(1), "one destroy Job for %s %s", kind, name)
			Expect(d[0].Phase).To(Equal(corev1.PodSucceeded))
		}
		By("no state, inputs or per-run Secret and no CAPTF lease is left; the Jobs went with their owners")
		Eventually(func(g Gomega) {
			var secrets corev1.SecretList
			g.Expect(sb.Client().List(ctx, &secrets, client.InNamespace(ns))).To(Succeed())
			for _, s := range secrets.Items {
				g.Expect(s.Name).NotTo(Or(HavePrefix("tfstate-"), HavePrefix("captf-"), HaveSuffix("-run")), "secret %s is left", s.Name)
			}
			g.Expect(captfLeases(sb, ns)).To(BeEmpty())
			var jobs batchv1.JobList
			g.Expect(sb.Client().List(ctx, &jobs, client.InNamespace(ns))).To(Succeed())
			g.Expect(jobs.Items).To(BeEmpty())
			var pods corev1.PodList
			g.Expect(sb.Client().List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty())
		}).Should(Succeed())
		By("no state lock is held: the backend's lock Leases are unlocked, if they are still there")
		for _, kind := range []string{infrav1.TerraformClusterKind, infrav1.TerraformMachineKind, infrav1.TerraformMachinePoolKind} {
			name := map[string]string{infrav1.TerraformClusterKind: "sample", infrav1.TerraformMachineKind: "sample-machine-0", infrav1.TerraformMachinePoolKind: "sample-pool"}[kind]
			lock := &coordinationv1.Lease{}
			err := sb.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: naming.StateLockLeaseName(naming.StateSuffix(ns, kind, name))}, lock)
			if client.IgnoreNotFound(err) != nil {
				Expect(err).NotTo(HaveOccurred())
			}
			Expect(ptr.Deref(lock.Spec.HolderIdentity, "")).To(BeEmpty(), "the state lock of %s %s is held", kind, name)
		}
	})

	It("stops everything on Ctrl-C, a running Job included", func() {
		applyFixture(sb, ns, "cluster.yaml", "slow", 300)
		job := eventuallyRunning(sb, infrav1.TerraformClusterKind, ns, "slow", infrav1.OperationApply)
		children = childrenOf(cmd.Process.Pid)
		Expect(children).NotTo(BeEmpty(), "the sandbox runs etcd, kube-apiserver and the manager as children")
		Expect(cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
		interrupted := time.Now()
		Eventually(exited, time.Minute).Should(Receive(BeNil()))
		AddReportEntry("Ctrl-C to exit, with a Job running", since(interrupted))
		var run *executor.Run
		for _, r := range readHistory(sb.HistoryFile()) {
			if r.Job == job.Name {
				r := r
				run = &r
			}
		}
		Expect(run).NotTo(BeNil(), "the running Job's end was recorded")
		Expect(run.Reason).To(Equal("Terminated"), "the runner got SIGTERM and stopped within the grace")
		Expect(run.ExitCode).To(Equal(int32(runnerapi.ExitInterrupted)))
		_, err := os.Stat(kubeconfig)
		Expect(os.IsNotExist(err)).To(BeTrue(), "the kubeconfig of a stopped sandbox is removed")
		Expect(processesUnder(work)).To(BeEmpty(), "no process of the sandbox is left")
		for _, pid := range children {
			Expect(alive(pid)).To(BeFalse(), "child %d of the sandbox is still alive", pid)
		}
	})
})

func errString(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
