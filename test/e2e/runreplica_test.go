package e2e_test

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/doccmd"
)

// docs/sandbox.md, "A state replica that outlives the sandbox": make run REPLICA=1, twice on
// one store folder, as a person would rebuild a management cluster on their laptop.
var _ = Describe(doccmd.SpecMakeRunReplica, func() {
	It("keeps the states in a store that outlives the sandbox: a new sandbox on the same folder holds the re-applied object", func() {
		const ns, name = "default", "kept"
		work := userFolder("")
		store := filepath.Join(GinkgoT().TempDir(), "sandbox-replica")
		kubeconfig := filepath.Join(work, "bin", "sandbox.kubeconfig")
		args := makeRunReplicaArgs(kubeconfig, store)

		By("the first sandbox: a TerraformCluster applied, its version in the store, listed by kubectl captf")
		first := startMadeSandbox(work, "first", args)
		applyFixture(first, ns, "cluster.yaml", name, 0)
		o := tc(ns, name)
		eventuallyReady(first, o)
		Eventually(func() *metav1.Condition { return conditionOf(first, o, infrav1.StateReplicatedCondition) }).Should(And(Not(BeNil()),
			HaveField("Status", metav1.ConditionTrue)))
		st := stateOf(first, infrav1.TerraformClusterKind, ns, name)
		Eventually(func() string { return captfOK(first, ns, "restore", "terraformcluster/"+name) }).Should(And(
			ContainSubstring("In the replica store (as the controller last listed it):"), MatchRegexp(`(?m)^%d\t%s\t`, st.Serial, st.Lineage)))
		lineage := st.Lineage
		first.stop()

		By("a new sandbox on the same folder: the same manifest holds, naming the lineage the first one wrote")
		second := startMadeSandbox(work, "second", args)
		applyFixture(second, ns, "cluster.yaml", name, 0)
		o = tc(ns, name)
		Eventually(func() *metav1.Condition { return conditionOf(second, o, infrav1.StateReadableCondition) }, 2*time.Minute).Should(And(Not(BeNil()),
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", infrav1.ReplicaStateFoundReason), HaveField("Message", ContainSubstring(lineage))))
		Expect(stateOf(second, infrav1.TerraformClusterKind, ns, name)).To(BeNil(), "nothing ran: no state was written")
		second.stop()
	})
})

// madeSandbox is a sandbox process started as make run starts it.
type madeSandbox struct {
	*attached
	cmd    *exec.Cmd
	exited chan error
}

// startMadeSandbox starts the sandbox binary with args (its work folder under work/name) and
// waits for its ready line and the line naming the state replica's store.
func startMadeSandbox(work, name string, args []string) *madeSandbox {
	GinkgoHelper()
	dir := filepath.Join(work, name)
	cmd := exec.Command(filepath.Join(built, "sandbox"), append(slices.Clone(args), "--work-dir="+dir, "--bin-dir="+binDir, "--repo="+repo,
		"--manager-binary="+filepath.Join(built, "manager"), "--runner-binary="+filepath.Join(built, "runner"), "--terraform="+tf)...)
	cmd.Dir = repo
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, GinkgoWriter
	lines, exited := make(chan string, 1024), make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			GinkgoWriter.Println(sc.Text())
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	Expect(cmd.Start()).To(Succeed())
	go func() { exited <- cmd.Wait(); _ = pw.Close() }()
	m := &madeSandbox{cmd: cmd, exited: exited}
	DeferCleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	deadline := time.After(3 * time.Minute)
	var ready, replica bool
	for !ready || !replica {
		select {
		case l := <-lines:
			ready = ready || strings.HasPrefix(l, "sandbox ready")
			if strings.HasPrefix(l, "state replica:") {
				replica = true
				Expect(l).To(ContainSubstring("bucket captf-states at http://127.0.0.1:"))
			}
		case err := <-exited:
			Fail("the sandbox exited early: " + errString(err))
		case <-deadline:
			Fail(fmt.Sprintf("no ready line or state replica line (ready %t, replica %t)", ready, replica))
		}
	}
	var kubeconfig string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--kubeconfig="); ok {
			kubeconfig = v
		}
	}
	m.attached = attach(kubeconfig, dir)
	return m
}

// stop stops the sandbox as Ctrl-C does and waits for it to exit.
func (m *madeSandbox) stop() {
	GinkgoHelper()
	Expect(m.cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
	Eventually(m.exited, time.Minute).Should(Receive(BeNil()))
}

// makeRunReplicaArgs are the arguments `make run REPLICA=1` gives the sandbox, as make itself
// says (make -n), with the kubeconfig at kubeconfig and the store's folder at store instead of
// the checkout's bin/.
func makeRunReplicaArgs(kubeconfig, store string) []string {
	GinkgoHelper()
	for _, page := range []string{"docs/sandbox.md"} {
		recordDocRun(pageCommand(page, "make run REPLICA=1").Key(), doccmd.SpecMakeRunReplica)
	}
	cmd := exec.Command("make", "--no-print-directory", "-n", "run", "REPLICA=1")
	cmd.Dir = repo
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred(), "make -n run REPLICA=1")
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	fields := strings.Fields(lines[len(lines)-1])
	Expect(fields[0]).To(Equal(filepath.Join(binDir, "sandbox")), "make run runs bin/sandbox last: %s", out)
	var args []string
	for _, a := range fields[1:] {
		switch {
		case strings.HasPrefix(a, "--kubeconfig="):
			a = "--kubeconfig=" + kubeconfig
		case strings.HasPrefix(a, "--state-replica-dir="):
			Expect(a).To(Equal("--state-replica-dir="+filepath.Join(binDir, "sandbox-replica")), "the folder docs/sandbox.md names")
			a = "--state-replica-dir=" + store
		}
		args = append(args, a)
	}
	Expect(args).To(ContainElement(HavePrefix("--state-replica-dir=")), "REPLICA=1")
	return args
}
