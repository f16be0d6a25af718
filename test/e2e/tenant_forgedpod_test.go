package e2e_test

import (
	"encoding/json"
	"os"
	"path/filepath"
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
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// T24 of docs/threat-model.md, as the tenant on the sandbox: a pod the tenant creates that names
// a running Plan Job as its controller (the API server does not check that), listed before the
// Job's own pod, whose termination message reports forged digests. Were it read, the real plan
// would be held as corrupt (the forged digests match nothing). On a cluster the Job controller
// releases such a pod (it does not match the Job's selector, so its owner reference goes) and the
// manager reads the Job's own pod: the real plan waits. The manager's own rule (a Plan Job's
// result only from a pod that runs the Job's template) is what holds a pod that also carries the
// selector's labels; the engine spec "trusts a Plan Job's result only from a pod the Job controls"
// plays that one against the API server.
var _ = Describe("A tenant's pod posing as a Plan Job's", func() {
	It("names the running Plan Job as its controller and reports forged digests: the manager reads the Job's own pod, and the real plan waits", func() {
		sb := shared
		t := asTenant(sb, "tenant-forged-pod")
		ns, name := t.Namespace, "tfp"
		planFixture(sb, ns, name, "applyPolicy: Manual")
		o := tc(ns, name)
		eventuallyReady(sb, o)

		// The sandbox's node runs a pod's program only from the pod's own volumes (it has no
		// container runtime for the tenant's image): the forger's script comes in a ConfigMap.
		script := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forger"},
			Data: map[string]string{"forge.sh": "#!/bin/sh\nprintf '%s' \"$FORGED\" > \"$TERM_FILE\"\n"}}
		Expect(t.Client().Create(ctx, script)).To(Succeed())
		By("a change of the inputs starts a Plan Job")
		setVariables(sb, ns, name, `{"generation":2,"extra":1}`)
		var plan batchv1.Job
		Eventually(func(g Gomega) {
			js := jobsOf(sb, infrav1.TerraformClusterKind, ns, name, infrav1.OperationPlan)
			g.Expect(js).To(HaveLen(1))
			plan = js[0]
		}, time.Minute, 10*time.Millisecond).Should(Succeed())

		By("the Job controller creates the Job's own pod")
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(sb.Client().List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"batch.kubernetes.io/job-name": plan.Name})).To(Succeed())
			g.Expect(pods.Items).NotTo(BeEmpty())
		}, time.Minute, 10*time.Millisecond).Should(Succeed())

		By("the tenant creates a pod controlled by that Job, as new as the Job's own or newer and listed before it, whose main container reports forged digests")
		forgedDigests := runnerapi.PlanDigests{File: strings.Repeat("a", 64), Record: strings.Repeat("b", 64), JSON: strings.Repeat("c", 64), Text: strings.Repeat("d", 64)}
		yes := true
		forgedID := strings.Repeat("f", runnerapi.PlanIDLength)
		result := runnerapi.Result{Operation: string(infrav1.OperationPlan), Outcome: runnerapi.OutcomeSucceeded, Steps: []runnerapi.Step{}, Changes: &yes,
			Summary: &runnerapi.PlanSummary{}, SavedPlan: &runnerapi.PlanRef{ID: forgedID, FileSHA256: strings.Repeat("e", 64), Digests: &forgedDigests}}
		mode := int32(0o755)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: plan.Name + "-0-forged",
			Labels: map[string]string{"batch.kubernetes.io/job-name": plan.Name, "job-name": plan.Name},
			// A controller reference without blockOwnerDeletion: the sandbox's API server runs
			// OwnerReferencesPermissionEnforcement, which refuses blockOwnerDeletion to a tenant
			// that may not update the Job's finalizers, and a controller reference needs none.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job",
				Name: plan.Name, UID: plan.UID, Controller: &yes}}},
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

		By("the Job controller released the tenant's pod: it does not match the Job's selector, so the owner reference goes")
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(metav1.GetControllerOf(pod)).To(BeNil())
		}).Should(Succeed())

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

	// T23 before the plan is judged: the tenant rewrites summary.json and plan.json the moment
	// the channel stores them, racing the bookkeeping that judges them.
	It("rewrites a fresh plan's summary and JSON plan before it is judged: no policy or guard judges the forgery, and nothing applies", func() {
		sb := shared
		t := asTenant(sb, "tenant-forged-summary")
		ns, name := t.Namespace, "tfs"
		kubectl(sb, "label", "namespace", ns, "captf-e2e-policy=tfs")
		raw, err := os.ReadFile(filepath.Join("testdata", "planpolicy.yaml"))
		Expect(err).NotTo(HaveOccurred())
		f := filepath.Join(GinkgoT().TempDir(), "policy.yaml")
		Expect(os.WriteFile(f, []byte(strings.ReplaceAll(string(raw), "LABEL", "tfs")), 0o600)).To(Succeed())
		kubectl(sb, "apply", "-f", f)
		DeferCleanup(func() { kubectl(sb, "delete", "--ignore-not-found", "terraformplanpolicy", "e2e-tfs") })
		planFixture(sb, ns, name, "applyPolicy: Automatic")
		o := tc(ns, name)
		eventuallyReady(sb, o)
		Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		firstPlan := o.Annotations[infrav1.AppliedPlanAnnotation]
		applies := countRuns(sb, ns, name, infrav1.OperationApply)

		By("a change that replaces terraform_data.node (the policy forbids it); the tenant rewrites the stored plan to one that changes nothing, as soon as it appears")
		setVariables(sb, ns, name, `{"generation":2,"extra":0}`)
		secret := naming.PlanSecretName(naming.StateSuffix(ns, infrav1.TerraformClusterKind, name))
		var forgedID string
		Eventually(func(g Gomega) {
			sec := &corev1.Secret{}
			g.Expect(t.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: secret}, sec)).To(Succeed())
			var rec runnerapi.PlanRecord
			g.Expect(json.Unmarshal(sec.Data[runnerapi.PlanRecordKey], &rec)).To(Succeed())
			g.Expect(rec.ID).NotTo(Equal(firstPlan), "the new plan is not stored yet")
			rec.PlanSummary = runnerapi.PlanSummary{}
			forged, err := json.Marshal(rec)
			g.Expect(err).NotTo(HaveOccurred())
			sec.Data[runnerapi.PlanRecordKey] = forged
			sec.Data[runnerapi.PlanJSONKey] = []byte(`{"format_version":"1.2","resource_changes":[]}`)
			g.Expect(t.Client().Update(ctx, sec)).To(Succeed())
			forgedID = rec.ID
		}, 2*time.Minute, 5*time.Millisecond).Should(Succeed())

		By("the plan waits: held as corrupt if the bookkeeping saw the rewrite, else judged on the real plan, which breaks the rule")
		var rec *infrav1.PlanRecord
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			rec = infrav1.ParsePlanRecord(o.Annotations[infrav1.PendingPlanAnnotation])
			g.Expect(rec).NotTo(BeNil())
			g.Expect(rec.ID).To(Equal(forgedID))
		}, 2*time.Minute).Should(Succeed())
		if rec.IsCorrupt() {
			Expect(rec.Violations).To(BeEmpty(), "a corrupt plan is judged by no policy")
			AddReportEntry("T23 before judging: the bookkeeping saw the rewrite", rec.Corrupt)
		} else {
			Expect(rec.Violations).To(ConsistOf(ContainSubstring("no-data-deletes")), "the policy judged the real plan, not the forgery")
			Expect(rec.Replace).To(Equal(int32(1)))
			AddReportEntry("T23 before judging: the bookkeeping came first and judged the real plan", strings.Join(rec.Violations, "; "))
		}

		By("an approver approves it: the artifacts are checked again, nothing applies, and the plan is held as corrupt")
		kubectl(sb, "annotate", "-n", ns, "terraformcluster", name, "--overwrite", infrav1.ApprovePlanAnnotation+"="+forgedID)
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			r := infrav1.ParsePlanRecord(o.Annotations[infrav1.PendingPlanAnnotation])
			g.Expect(r).NotTo(BeNil())
			g.Expect(r.IsCorrupt()).To(BeTrue())
		}).Should(Succeed())
		Consistently(func() int { return countRuns(sb, ns, name, infrav1.OperationApply) }, 5*time.Second).Should(Equal(applies), "the forged plan never applies")
		Expect(nodeGeneration(stateOf(sb, infrav1.TerraformClusterKind, ns, name))).To(Equal(float64(1)))
	})
})
