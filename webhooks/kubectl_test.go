package webhooks_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrlenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// writeKubeconfig writes a kubeconfig for a new envtest user in groups and returns its path.
func writeKubeconfig(user string, groups ...string) string {
	GinkgoHelper()
	u, err := env.AddUser(ctrlenvtest.User{Name: user, Groups: groups}, nil)
	Expect(err).NotTo(HaveOccurred())
	kc, err := u.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(os.WriteFile(path, kc, 0o600)).To(Succeed())
	return path
}

// runKubectl runs the source-built kubectl and returns what the user sees (stdout and stderr).
func runKubectl(kubeconfig string, args ...string) (string, error) {
	cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

var _ = Describe("A real kubectl, built from source", func() {
	It("shows the user the guard's denial for `annotate block-move-` and a JSON patch removing the finalizer", func() {
		kc := writeKubeconfig("kubectl-admin", "system:masters")
		ns := newNamespace()
		create(infrav1.TerraformClusterKind, ns, "prod")
		r, err := startRun(ctx, admin, infrav1.TerraformClusterKind, ns, "prod", 4)
		Expect(err).NotTo(HaveOccurred())
		Expect(ensureMark(ctx, admin, infrav1.TerraformClusterKind, ns, "prod", markBlockMove, "")).To(Succeed())

		annotate := []string{"-n", ns, "annotate", "terraformcluster", "prod", infrav1.BlockMoveAnnotation + "-"}
		patch := []string{"-n", ns, "patch", "terraformcluster", "prod", "--type=json",
			"-p", `[{"op":"remove","path":"/metadata/finalizers/0"}]`}

		out, err := runKubectl(kc, annotate...)
		Expect(err).To(HaveOccurred(), "kubectl annotate must fail while the Job runs:\n%s", out)
		fmt.Printf("\n$ kubectl %s\n%s", strings.Join(annotate, " "), out)
		Expect(out).To(ContainSubstring(`admission webhook "guard.captf.io" denied the request`))
		Expect(out).To(ContainSubstring("Job " + r.job.Name + " (Apply) of this object runs"))
		Expect(out).To(ContainSubstring("kubectl -n " + ns + " delete job " + r.job.Name))

		out, err = runKubectl(kc, patch...)
		Expect(err).To(HaveOccurred(), "kubectl patch must fail while the Job runs:\n%s", out)
		fmt.Printf("\n$ kubectl %s\n%s\n", strings.Join(patch, " "), out)
		Expect(out).To(ContainSubstring("removes the finalizer " + infrav1.Finalizer))
		Expect(hasMark(ctx, admin, infrav1.TerraformClusterKind, ns, "prod", markBlockMove)).To(BeTrue())
		Expect(hasMark(ctx, admin, infrav1.TerraformClusterKind, ns, "prod", markFinalizer)).To(BeTrue())

		By("once the Job has finished, the same commands pass")
		Expect(r.finish(ctx, admin)).To(Succeed())
		out, err = runKubectl(kc, annotate...)
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = runKubectl(kc, patch...)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(hasMark(ctx, admin, infrav1.TerraformClusterKind, ns, "prod", markFinalizer)).To(BeFalse())
	})
})
