package e2e_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// T24 of docs/threat-model.md, as the tenant on the sandbox: a pod the tenant creates that names
// a running Plan Job as its controller (the API server does not check that) and whose
// termination message reports forged digests. Were it read, the real plan would be held as
// corrupt (the forged digests match nothing) or a forgery judged; the manager reads a Plan
// Job's result only from a pod that runs the Job's own template.
var _ = Describe("A tenant's pod posing as a Plan Job's", func() {
	It("names the running Plan Job as its controller and reports forged digests: the manager reads the Job's own pod, and the real plan waits", func() {
		sb := shared
		t := asTenant(sb, "tenant-forged-pod")
		ns, name := t.Namespace, "tfp"
		planFixture(sb, ns, name, "applyPolicy: Manual")
		o := tc(ns, name)
		eventuallyReady(sb, o)

		By("a change of the inputs starts a Plan Job")
		setVariables(sb, ns, name, `{"generation":2,"extra":1}`)
		var plan batchv1.Job
		Eventually(func(g Gomega) {
			js := jobsOf(sb, infrav1.TerraformClusterKind, ns, name, infrav1.OperationPlan)
			g.Expect(js).To(HaveLen(1))
			plan = js[0]
		}, time.Minute, 10*time.Millisecond).Should(Succeed())

		By("the tenant creates a pod controlled by that Job, sorted before the Job's own, whose main container reports forged digests")
		forgedDigests := runnerapi.PlanDigests{File: strings.Repeat("a", 64), Record: strings.Repeat("b", 64), JSON: strings.Repeat("c", 64), Text: strings.Repeat("d", 64)}
		yes := true
		forgedID := strings.Repeat("f", runnerapi.PlanIDLength)
		result := runnerapi.Result{Operation: string(infrav1.OperationPlan), Outcome: runnerapi.OutcomeSucceeded, Steps: []runnerapi.Step{}, Changes: &yes,
			Summary: &runnerapi.PlanSummary{}, SavedPlan: &runnerapi.PlanRef{ID: forgedID, FileSHA256: strings.Repeat("e", 64), Digests: &forgedDigests}}
		// The sandbox's node runs a pod's program only from the pod's own volumes (it has no
		// container runtime for the tenant's image): the forger's script comes in a ConfigMap.
		script := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forger"},
			Data: map[string]string{"forge.sh": "#!/bin/sh\nprintf '%s' \"$FORGED\" > \"$TERM_FILE\"\n"}}
		Expect(t.Client().Create(ctx, script)).To(Succeed())
		mode := int32(0o755)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: plan.Name + "-a-forged",
			Labels:          map[string]string{"batch.kubernetes.io/job-name": plan.Name, "job-name": plan.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&plan, batchv1.SchemeGroupVersion.WithKind("Job"))}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
				Name: jobs.MainContainer, Image: "tenant.example/forger:v1",
				Command:      []string{"/forger/forge.sh"},
				VolumeMounts: []corev1.VolumeMount{{Name: "forger", MountPath: "/forger"}},
				Env: []corev1.EnvVar{{Name: "FORGED", Value: string(runnerapi.Encode(result))},
					{Name: "TERM_FILE", Value: corev1.TerminationMessagePathDefault}},
			}},
				Volumes: []corev1.Volume{{Name: "forger", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: script.Name}, DefaultMode: &mode}}}}}}
		Expect(t.Client().Create(ctx, pod)).To(Succeed(), "the API server admits a pod naming the tenant's Job as its controller")
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(pod.Status.ContainerStatuses).To(HaveLen(1))
			term := pod.Status.ContainerStatuses[0].State.Terminated
			g.Expect(term).NotTo(BeNil(), "the forged pod has not ended")
			g.Expect(term.Message).To(ContainSubstring(forgedID))
		}, time.Minute).Should(Succeed())

		By("the Plan Job ends after the forged pod did, so its bookkeeping saw both pods")
		fin := eventuallyFinished(sb, &plan)
		Expect(fin.Status.CompletionTime).NotTo(BeNil())
		Expect(pod.Status.ContainerStatuses[0].State.Terminated.FinishedAt.Time).To(BeTemporally("<=", fin.Status.CompletionTime.Time),
			"the forged pod must end before the Plan Job for the attack to reach the bookkeeping")

		By("the real plan waits for an approver, bound to the digests its own pod reported, not held as corrupt")
		p := eventuallyWaiting(sb, o, "")
		Expect(p.ID).NotTo(Equal(forgedID))
		Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		rec := infrav1.ParsePlanRecord(o.Annotations[infrav1.PendingPlanAnnotation])
		Expect(rec).NotTo(BeNil())
		Expect(rec.IsCorrupt()).To(BeFalse(), "the plan was held as corrupt: %s", rec.Corrupt)
		Expect(rec.Digests).NotTo(BeNil())
		Expect(rec.Digests.Record).NotTo(Equal(forgedDigests.Record))
		Expect(rec.Replace).To(Equal(int32(1)), "the real plan replaces terraform_data.node")
	})
})
