package e2e_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	"github.com/captf/cluster-api-provider-terraform/test/doccmd"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/executor"
)

// The sandbox binary as `make run SAMPLES=1` starts it, driven from outside with kubectl: what
// README.md and docs/sandbox.md tell a new user to run, run as the pages write it (test/doccmd)
// from a folder laid out as the checkout.
var _ = Describe(doccmd.SpecMakeRun, Ordered, func() {
	var (
		work, kubeconfig string
		cmd              *exec.Cmd
		lines            chan string
		exited           chan error
		began            time.Time
		sb               *attached
		children         []int
		docs             *docShell
	)
	const ns = "default"
	pages := []string{"README.md", "docs/sandbox.md"}

	BeforeAll(func() {
		work = userFolder("")
		kubeconfig = filepath.Join(work, "bin", "sandbox.kubeconfig")
		args := makeRunArgs(kubeconfig)
		cmd = exec.Command(filepath.Join(built, "sandbox"), append(args,
			"--work-dir="+filepath.Join(work, "sandbox"), "--bin-dir="+binDir, "--repo="+repo,
			"--manager-binary="+filepath.Join(built, "manager"), "--runner-binary="+filepath.Join(built, "runner"),
			"--terraform="+tf)...)
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
		docs = newDocShell(work)
		docs.ok(pages[0], "export KUBECONFIG=")
		docs.ok(pages[1], "export KUBECONFIG=")
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

		By("the pages' first commands: the objects Ready, their apply Jobs Complete")
		got := docs.ok(pages[0], "kubectl get terraformclusters,terraformmachines,terraformmachinepools")
		shown := pageCommand(pages[0], "kubectl get terraformclusters,").Output
		Expect(shown).To(HaveLen(2))
		Expect(strings.Fields(strings.SplitN(got, "\n", 2)[0])[:4]).To(Equal(strings.Fields(shown[0])[:4]), "the columns README.md shows: %s", got)
		Expect(got).To(MatchRegexp(`(?m)^`+strings.Join(strings.Fields(shown[1]), `\s+`)+`\s`), "the row README.md shows")
		docs.ok(pages[1], "kubectl get clusters,terraformclusters,terraformmachines,terraformmachinepools")
		jobs := docs.runOn("", pages, "kubectl get jobs,pods -l captf.io/managed=true")
		Expect(jobs.code).To(BeZero(), jobs.out)
		Expect(len(regexp.MustCompile(`(?m)^job\.batch/\S+\s+Complete\s`).FindAllString(jobs.out, -1))).To(BeNumerically(">=", 3),
			"one apply Job per object, Complete")
		Eventually(func(g Gomega) {
			r := docs.run("", pages[1], "kubectl get machines,nodes")
			g.Expect(r.code).To(BeZero(), r.out)
			for _, row := range pageCommand(pages[1], "kubectl get machines,nodes").Output[1:] {
				name := regexp.MustCompile(`-[a-z0-9]{5}-[a-z0-9]{5}$`).ReplaceAllString(strings.Fields(row)[0], `-\S+`)
				g.Expect(r.out).To(MatchRegexp(`(?m)^`+name+`\s+sample\s.*\sRunning\s`), "a row like %q", row)
			}
			g.Expect(r.out).To(ContainSubstring("node/captf-default-sample-machine-0-"))
		}).Should(Succeed())

		By("docs/sandbox.md's RBAC block: CAPTF's aggregated roles, and what alice, with edit in team-a, may do")
		rbac := docs.ok(pages[1], "kustomize build config/rbac | kubectl apply -f - -l rbac.authorization.k8s.io/aggregate-to-edit=true")
		Expect(rbac).To(ContainSubstring("clusterrole.rbac.authorization.k8s.io/"))
		docs.ok(pages[1], "kustomize build config/rbac | kubectl apply -f - -l rbac.authorization.k8s.io/aggregate-to-view=true")
		docs.ok(pages[1], "kubectl create namespace team-a")
		docs.ok(pages[1], "kubectl create rolebinding alice-edit")
		for _, prefix := range []string{"kubectl auth can-i create terraformclusters", "kubectl auth can-i patch terraformclusters --subresource=status"} {
			Eventually(func(g Gomega) {
				r := docs.run("", pages[1], prefix)
				g.Expect(strings.TrimSpace(r.stdout)).To(Equal(r.cmd.Comment), "the answer the page gives")
			}).Should(Succeed(), "RBAC's aggregation reaches the edit role")
		}

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
		docs.ok(pages[1], "kubectl scale machinepool sample-pool --replicas=3")
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
		kc("delete", "cluster", "-n", ns, "sample-topology", "--wait=false")
		// Both pages end with it: it waits until the destroy Jobs ran and the Cluster is gone.
		deleted := docs.runOn("", pages, "kubectl delete cluster sample")
		Expect(deleted.code).To(BeZero(), deleted.out)
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

// makeRunArgs are the arguments `make run SAMPLES=1` gives the sandbox, as make itself says
// (make -n, in the checkout), with the kubeconfig at kubeconfig instead of the checkout's
// bin/sandbox.kubeconfig (a sandbox you run may be using it).
func makeRunArgs(kubeconfig string) []string {
	GinkgoHelper()
	for _, page := range []string{"README.md", "docs/sandbox.md"} {
		c := pageCommand(page, "make run SAMPLES=1")
		recordDocRun(c.Key(), doccmd.SpecMakeRun)
	}
	cmd := exec.Command("make", "--no-print-directory", "-n", "run", "SAMPLES=1")
	cmd.Dir = repo
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred(), "make -n run SAMPLES=1")
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	fields := strings.Fields(lines[len(lines)-1])
	Expect(fields[0]).To(Equal(filepath.Join(binDir, "sandbox")), "make run runs bin/sandbox last: %s", out)
	var args []string
	for _, a := range fields[1:] {
		if strings.HasPrefix(a, "--kubeconfig=") {
			Expect(a).To(Equal("--kubeconfig="+filepath.Join(binDir, "sandbox.kubeconfig")), "where the pages' export looks")
			a = "--kubeconfig=" + kubeconfig
		}
		args = append(args, a)
	}
	Expect(args).To(ContainElement("--apply-samples"), "SAMPLES=1")
	fmt.Fprintf(GinkgoWriter, "make run SAMPLES=1 runs: %s\n", lines[len(lines)-1])
	return args
}

func errString(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
