package e2e_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/executor"
)

// Jobs built by jobs.Build, as the controller builds them, but created by the test: the
// deadline is below what the CRD allows, and only the real Job controller, the garbage collector
// and the node act on them.
var _ = Describe("the real Job controller and the node", func() {
	It("stops a Job at its deadline and a deleted Job at once, through SIGTERM the runner forwards to terraform", func() {
		const ns = "executor"
		createNamespace(shared, ns)
		c := shared.Client()
		const sa = "e2e-runner"
		Expect(c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})).To(Succeed())
		// What the controller prepares before an object's first Job (controllers/engine/rbac.go):
		// the state channel's Role, and the empty state Secret, lock Lease and run lease it
		// reads and writes (it may create nothing).
		prepare := func(name, job string) {
			GinkgoHelper()
			suffix := naming.StateSuffix(ns, "E2E", name)
			Expect(c.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa + "-" + name}, Rules: jobs.RunnerPolicyRules(suffix)})).To(Succeed())
			Expect(c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa + "-" + name},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa + "-" + name},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}})).To(Succeed())
			Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: naming.StateSecretName(suffix),
				Labels: runnerapi.StateLabels(suffix)}})).To(Succeed())
			Expect(c.Create(ctx, objects.Lease(ns, naming.StateLockLeaseName(suffix)).Labels(runnerapi.StateLabels(suffix)).Obj())).To(Succeed())
			Expect(c.Create(ctx, objects.Lease(ns, naming.RunLeaseName(suffix)).Holder(job).Obj())).To(Succeed())
		}

		// The module, which also owns the Jobs (the garbage collector keeps them while it
		// exists); no CAPTF object is involved, so the controller leaves these Jobs alone.
		module := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slow-module"}, Data: map[string]string{"main.tf": slowModule}}
		Expect(c.Create(ctx, module)).To(Succeed())

		start := func(name string, deadline int64) *batchv1.Job {
			GinkgoHelper()
			suffix := naming.StateSuffix(ns, "E2E", name)
			job, err := jobs.Build(jobs.Params{
				Owner:  jobs.Owner{APIVersion: "v1", Kind: "ConfigMap", Name: module.Name, Namespace: ns, UID: module.UID},
				Suffix: suffix, Seq: 1, Operation: infrav1.OperationApply, InputsHash: "e2e-" + name,
				Spec: infrav1.TerraformSpec{
					Module: infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: module.Name}},
					Job:    infrav1.JobPolicy{ActiveDeadlineSeconds: ptr.To(deadline), ServiceAccountName: sa},
				},
				Defaults: jobs.Defaults{RunnerImage: "captf/manager:e2e"},
			})
			Expect(err).NotTo(HaveOccurred())
			prepare(name, job.Name)
			job.Labels[infrav1.OwnerNameLabel] = name
			job.Spec.Template.Labels[infrav1.OwnerNameLabel] = name
			// Bounded, so a terraform that does not stop cannot hold the spec for CAPTF's 600 s.
			job.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](60)
			Expect(c.Create(ctx, job)).To(Succeed())
			vars, err := json.Marshal(map[string]any{
				"captf":         map[string]any{"namespace": ns, "cluster_name": name},
				"sleep_seconds": 300, "generation": 1,
			})
			Expect(err).NotTo(HaveOccurred())
			backend, err := json.Marshal(runnerapi.Backend{Namespace: ns, SecretSuffix: suffix})
			Expect(err).NotTo(HaveOccurred())
			Expect(c.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: naming.RunSecretName(job.Name), OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}},
				Data: map[string][]byte{runnerapi.KeyVariables: vars, runnerapi.KeyBackend: backend, runnerapi.KeyRedact: []byte("[]")},
			})).To(Succeed())
			return job
		}
		deadlined := start("deadline", 15)
		deleted := start("deleted", 3600)

		By("both run; terraform waits for the slow resource's provisioner")
		for _, j := range []*batchv1.Job{deadlined, deleted} {
			Eventually(func(g Gomega) {
				pods := podsOf(j)
				g.Expect(pods).To(HaveLen(1))
				g.Expect(pods[0].Status.Phase).To(Equal(corev1.PodRunning))
				g.Expect(provisionerRunning(filepath.Join(shared.WorkDir(), "pods", ns, pods[0].Name))).To(BeTrue())
			}).Should(Succeed())
		}
		kubectl(shared, "delete", "job", "-n", ns, deleted.Name, "--wait=false")

		By("the deadline: FailureTarget first, Failed once the pod stopped")
		var failed *batchv1.Job
		Eventually(func(g Gomega) {
			failed = &batchv1.Job{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(deadlined), failed)).To(Succeed())
			g.Expect(condition(failed, batchv1.JobFailed)).NotTo(BeNil())
		}).Should(Succeed())
		target, fail := condition(failed, batchv1.JobFailureTarget), condition(failed, batchv1.JobFailed)
		Expect(target).NotTo(BeNil())
		Expect(target.Reason).To(Equal(batchv1.JobReasonDeadlineExceeded))
		Expect(fail.Reason).To(Equal(batchv1.JobReasonDeadlineExceeded))
		Expect(failed.Status.Failed).To(Equal(int32(1)))
		Expect(failed.Status.Active).To(BeZero())
		stopped := fail.LastTransitionTime.Sub(target.LastTransitionTime.Time)
		AddReportEntry("deadline: FailureTarget to Failed (SIGTERM, terraform stops, pod terminal)", stopped.String())
		Expect(stopped).To(BeNumerically("<", time.Minute), "terraform stopped on SIGTERM, long before the 600s grace")
		Expect(jobs.OutcomeOf(failed, podsOf(failed)).Outcome).To(Equal(infrav1.RunInterrupted))

		By("the deleted Job's pod and per-run Secret are gone")
		Eventually(func(g Gomega) {
			g.Expect(podsOf(deleted)).To(BeEmpty())
			err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: naming.RunSecretName(deleted.Name)}, &corev1.Secret{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the per-run secret of a deleted Job goes with it: %v", err)
		}).Should(Succeed())

		By("both runners were interrupted (exit 13, SIGTERM, not SIGKILL), and terraform released the state lock")
		for _, j := range []*batchv1.Job{deadlined, deleted} {
			var run *executor.Run
			for _, r := range shared.Executor().Runs() {
				if r.Job == j.Name {
					r := r
					run = &r
				}
			}
			Expect(run).NotTo(BeNil(), "job %s", j.Name)
			Expect(run.ExitCode).To(Equal(int32(runnerapi.ExitInterrupted)), "job %s", j.Name)
			Expect(run.Reason).To(Equal("Terminated"), "job %s", j.Name)
			Expect(run.Phase).To(Equal(corev1.PodFailed))
			lock := &coordinationv1.Lease{}
			Expect(c.Get(ctx, types.NamespacedName{Namespace: ns, Name: naming.StateLockLeaseName(naming.StateSuffix(ns, "E2E", j.Labels[infrav1.OwnerNameLabel]))}, lock)).To(Succeed())
			Expect(ptr.Deref(lock.Spec.HolderIdentity, "")).To(BeEmpty(), "the lock of %s is released", j.Name)
			result := filepath.Join(shared.WorkDir(), "pods", ns, run.Pod, "termination-log")
			b, err := os.ReadFile(result)
			Expect(err).NotTo(HaveOccurred())
			Expect(strings.Contains(string(b), `"outcome":"Interrupted"`)).To(BeTrue(), "result of %s: %s", j.Name, b)
		}
	})
})

func podsOf(job *batchv1.Job) []corev1.Pod {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(shared.Client().List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name})).To(Succeed())
	return pods.Items
}

func condition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if c := &job.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// slowModule waits in a provisioner for as long as it is told (the executor's Jobs pass 300 s).
const slowModule = `
variable "captf" {
  type = any
}

variable "sleep_seconds" {
  type = number
}

variable "generation" {
  type = number
}

resource "terraform_data" "slow" {
  triggers_replace = [var.generation]
  provisioner "local-exec" {
    command = "exec sleep ${var.sleep_seconds}"
  }
}
`

// provisionerRunning reports whether terraform's local-exec provisioner process (the sleep) runs
// in the Pod's folder.
func provisionerRunning(podDir string) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.HasPrefix(string(cmdline), "sleep\x00") {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && strings.HasPrefix(cwd, podDir+"/") {
			return true
		}
	}
	return false
}
