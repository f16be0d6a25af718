package e2e_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// follower is a running `kubectl logs -f` (or `kubectl captf logs -f`): each line of its stdout
// arrives on lines as it is printed; done receives its exit code once it ended.
type follower struct {
	lines chan string
	done  chan int
	mu    sync.Mutex
	out   strings.Builder
}

// startFollower starts a command (a binary and its arguments) that follows a log against sb.
func startFollower(sb target, binary string, args ...string) *follower {
	GinkgoHelper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+sb.Kubeconfig())
	cmd.Stderr = GinkgoWriter
	stdout, err := cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	Expect(cmd.Start()).To(Succeed())
	fmt.Fprintf(GinkgoWriter, "$ %s %s &\n", filepath.Base(binary), strings.Join(args, " "))
	f := &follower{lines: make(chan string, 10000), done: make(chan int, 1)}
	DeferCleanup(func() { _ = cmd.Process.Kill() }) // no-op once it ended
	go func() {
		defer GinkgoRecover()
		br := bufio.NewReaderSize(stdout, 64*1024)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				f.mu.Lock()
				f.out.WriteString(line)
				f.mu.Unlock()
				f.lines <- strings.TrimSuffix(line, "\n")
			}
			if err != nil {
				break
			}
		}
		close(f.lines)
		err := cmd.Wait()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			f.done <- exit.ExitCode()
		case err != nil:
			f.done <- -1
		default:
			f.done <- 0
		}
	}()
	return f
}

// output is everything the follower printed so far.
func (f *follower) output() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.out.String()
}

// awaitLine waits for a line matching re, skipping the others, and returns it.
func (f *follower) awaitLine(re *regexp.Regexp) string {
	GinkgoHelper()
	var found string
	Eventually(func() bool {
		for {
			select {
			case l, ok := <-f.lines:
				if !ok {
					return false
				}
				if re.MatchString(l) {
					found = l
					return true
				}
			default:
				return false
			}
		}
	}).Should(BeTrue(), "a line matching %s", re)
	return found
}

// podPhase is the phase of the Job's only pod.
func podPhase(sb target, job *batchv1.Job) corev1.PodPhase {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(sb.Client().List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name})).To(Succeed())
	Expect(pods.Items).To(HaveLen(1))
	return pods.Items[0].Status.Phase
}

// The runner's line before the apply step, and terraform's before the slow provisioner sleeps.
var (
	runningApply = regexp.MustCompile(`msg=running .*command="?(terraform|tofu) apply`)
	provisioning = regexp.MustCompile(`terraform_data\.slow.*Provisioning with 'local-exec'`)
)

var _ = Describe("container logs on the sandbox, as on a cluster", func() {
	It("kubectl logs -f and kubectl captf logs -f show a running apply's lines as they are written; kubectl logs of a finished pod returns the whole log", func() {
		const ns, name = "logs", "logged"
		sb := shared
		createNamespace(sb, ns)
		applyFixture(sb, ns, "cluster.yaml", name, 20)
		job := eventuallyRunning(sb, infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)

		By("kubectl logs -f of the Job: the runner's and terraform's early lines arrive while the pod still runs")
		f := startFollower(sb, filepath.Join(binDir, "kubectl"), "logs", "-f", "-n", ns, "job/"+job.Name)
		f.awaitLine(runningApply)
		f.awaitLine(provisioning)
		Expect(podPhase(sb, job)).To(Equal(corev1.PodRunning), "the lines came before the container ended")
		Consistently(f.done).ShouldNot(Receive(), "the follower waits for more while the container runs")

		By("the follower ends by itself once the container ended, with the whole log")
		Eventually(f.done, "3m").Should(Receive(Equal(0)))
		followed := f.output()
		Expect(followed).To(ContainSubstring("Apply complete!"))
		finished := eventuallyFinished(sb, job)
		Expect(podPhase(sb, finished)).To(Equal(corev1.PodSucceeded))

		By("kubectl logs of the finished pod returns the same whole log")
		whole, err := exec.Command(filepath.Join(binDir, "kubectl"), "--kubeconfig", sb.Kubeconfig(), "logs", "-n", ns, "job/"+job.Name).Output()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(whole)).To(Equal(followed))
		lines := strings.Split(strings.TrimSuffix(followed, "\n"), "\n")
		Expect(kubectl(sb, "logs", "-n", ns, "job/"+job.Name, "--tail", "1")).To(Equal(lines[len(lines)-1]+"\n"), "--tail 1: the last line")

		By("kubectl captf logs -f of the object follows its next apply the same way")
		kubectl(sb, "patch", "-n", ns, "terraformcluster", name, "--type=merge", "-p", `{"spec":{"variables":{"generation":2}}}`)
		Eventually(func() []batchv1.Job {
			return jobsOf(sb, infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)
		}).Should(ContainElement(HaveField("Name", Not(Equal(job.Name)))))
		next := eventuallyRunning(sb, infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)
		Expect(next.Name).NotTo(Equal(job.Name))
		p := startFollower(sb, filepath.Join(buildPlugin(), "kubectl-captf"), "--kubeconfig", sb.Kubeconfig(), "-n", ns,
			"logs", "-f", "terraformcluster/"+name)
		p.awaitLine(runningApply)
		p.awaitLine(provisioning)
		Expect(podPhase(sb, next)).To(Equal(corev1.PodRunning), "the lines came before the container ended")
		Eventually(p.done, "3m").Should(Receive(Equal(0)))
		Expect(p.output()).To(ContainSubstring("Apply complete!"))
	})
})
