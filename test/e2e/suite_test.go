package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	testenv "github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox"
)

var (
	ctx    context.Context
	cancel context.CancelFunc
	// repo is the repository root; binDir its bin/ (control plane, kubectl, clusterctl, kustomize).
	repo, binDir string
	// built holds the manager, runner and sandbox built from this checkout.
	built string
	// tf is the terraform or tofu the Jobs run.
	tf string
	// shared is the sandbox most specs share.
	shared *sandbox.Sandbox
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "End to end: sandbox, real terraform, kubectl, clusterctl move")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(2 * time.Minute)
	SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	ctx, cancel = context.WithCancel(context.Background())

	var err error
	repo, err = testenv.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	binDir = filepath.Join(repo, "bin")
	for _, tool := range []string{"etcd", "kube-apiserver", "kubectl", "clusterctl", "kustomize"} {
		_, err := os.Stat(filepath.Join(binDir, tool))
		Expect(err).NotTo(HaveOccurred(), "%s is missing from bin/: run 'make test-bins' (it builds it from source)", tool)
	}
	tf, err = sandbox.FindTerraform(binDir)
	Expect(err).NotTo(HaveOccurred())

	began := time.Now()
	built = GinkgoT().TempDir()
	cmd := exec.Command("go", "build", "-o", built+string(os.PathSeparator), "./cmd/manager", "./cmd/runner", "./cmd/sandbox")
	cmd.Dir = repo
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "build the binaries: %s", out)
	fmt.Fprintf(GinkgoWriter, "built manager, runner and sandbox in %s; Jobs run %s\n", time.Since(began).Round(time.Millisecond), tf)

	began = time.Now()
	shared = startSandbox("main")
	AddReportEntry("sandbox start (control plane, CRDs, webhooks, manager ready)", time.Since(began).Round(time.Millisecond).String())
})

var _ = AfterSuite(func() {
	if shared != nil {
		Expect(shared.Stop()).To(Succeed())
	}
	if cancel != nil {
		cancel()
	}
})

// startSandbox starts a sandbox running this checkout's manager and runner; the spec (or the
// suite) that starts it stops it.
func startSandbox(name string) *sandbox.Sandbox {
	GinkgoHelper()
	return startSandboxWith(name, tf)
}

// startSandboxWith is startSandbox with the terraform or tofu binary the Jobs run.
func startSandboxWith(name, terraformBinary string) *sandbox.Sandbox {
	GinkgoHelper()
	return startSandboxWithManager(name, terraformBinary, filepath.Join(built, "manager"))
}

// startSandboxWithManager is startSandboxWith with another manager binary (the runner is still
// this checkout's); each of more changes the sandbox's options before it starts.
func startSandboxWithManager(name, terraformBinary, managerBinary string, more ...func(*sandbox.Options)) *sandbox.Sandbox {
	GinkgoHelper()
	out := GinkgoWriter
	opts := sandbox.Options{
		Name: name, RepoRoot: repo, BinDir: binDir,
		ManagerBinary: managerBinary, RunnerBinary: filepath.Join(built, "runner"),
		TerraformBinary: terraformBinary, WorkDir: filepath.Join(GinkgoT().TempDir(), name),
		ManagerOutput: out, JobOutput: out, Log: ctrl.Log.WithName(name),
	}
	for _, m := range more {
		m(&opts)
	}
	sb, err := sandbox.Start(ctx, opts)
	Expect(err).NotTo(HaveOccurred())
	return sb
}

// unsafeAudienceTag builds a manager whose identity token audience check is off
// (jobs.UnsafeNoAudienceCheckTag, controllers/jobs/identity_check_unsafe.go).
const unsafeAudienceTag = jobs.UnsafeNoAudienceCheckTag

// buildManagerWithTags builds this checkout's manager with build tags into a folder of the
// spec's own, and returns its path. Called lazily by the one spec that needs it, so a run that
// does not focus on it pays nothing; the packages the tag does not touch come from the build
// cache BeforeSuite filled.
func buildManagerWithTags(tags string) string {
	GinkgoHelper()
	began := time.Now()
	dir := GinkgoT().TempDir()
	cmd := exec.Command("go", "build", "-tags", tags, "-o", dir+string(os.PathSeparator), "./cmd/manager")
	cmd.Dir = repo
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "build the manager with -tags %s: %s", tags, out)
	took := time.Since(began).Round(time.Millisecond)
	fmt.Fprintf(GinkgoWriter, "built the manager with -tags %s in %s\n", tags, took)
	AddReportEntry("manager build with -tags "+tags, took.String())
	return filepath.Join(dir, "manager")
}
