package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/nodes"
)

// The placement the fixture testdata/placement.yaml asks for.
const (
	runnerPoolLabel = "e2e.example.com/runner-pool"
	dedicatedTaint  = "e2e.example.com/dedicated"
	// placementTolerations is the tolerations block of testdata/placement.yaml, which the
	// spec removes to apply the same object without them.
	placementTolerations = `      tolerations:
      - key: e2e.example.com/dedicated
        operator: Equal
        value: terraform
        effect: NoSchedule
`
)

// applyPlacement applies testdata/placement.yaml into ns with kubectl, naming the cluster;
// the module copies its CA bundle into reportDir. Without tolerate, the tolerations are left
// out.
func applyPlacement(sb target, ns, cluster, reportDir string, tolerate bool) {
	GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join("testdata", "placement.yaml"))
	Expect(err).NotTo(HaveOccurred())
	doc := strings.NewReplacer("CLUSTER", cluster, "REPORT_DIR", reportDir).Replace(string(raw))
	Expect(doc).To(ContainSubstring(placementTolerations))
	if !tolerate {
		doc = strings.Replace(doc, placementTolerations, "", 1)
	}
	f := filepath.Join(GinkgoT().TempDir(), cluster+".yaml")
	Expect(os.WriteFile(f, []byte(doc), 0o600)).To(Succeed())
	kubectl(sb, "apply", "-n", ns, "-f", f)
}

// keepDecoyNode registers a Ready, untainted Node with room for pods that nothing runs pods
// on, and keeps its heartbeat until the spec ends: a node the scheduler could pick, so a pod
// that lands on the sandbox's node was placed there.
func keepDecoyNode(sb target, name string) {
	GinkgoHelper()
	c := sb.Client()
	Expect(c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}})).To(Succeed())
	room := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	beat := func() error {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n := &corev1.Node{}
			if err := c.Get(ctx, types.NamespacedName{Name: name}, n); err != nil {
				return err
			}
			n.Status.Capacity, n.Status.Allocatable = room, room
			n.Status.Conditions = nodes.ReadyConditions(n.Status.Conditions, metav1.Now(), "a decoy node of the placement spec")
			return c.Status().Update(ctx, n)
		})
		if err != nil {
			return err
		}
		return nodes.RenewLease(ctx, c, c, name)
	}
	Expect(beat()).To(Succeed())
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(stopped)
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := beat(); err != nil {
					fmt.Fprintf(GinkgoWriter, "decoy node %s heartbeat: %v\n", name, err)
				}
			}
		}
	}()
	DeferCleanup(func() { close(done); <-stopped })
}

// podsOfJob lists the pods of a Job.
func podsOfJob(sb target, job *batchv1.Job) []corev1.Pod {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(sb.Client().List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name})).To(Succeed())
	return pods.Items
}

// Runner placement on the sandbox's real kube-scheduler (docs/production.md, "Placing the
// runner's pod"): the sandbox's node is dedicated (a label and a NoSchedule taint), a decoy
// node is Ready and free; a runner whose pod template selects and tolerates the dedicated node
// runs there and applies, reading its CA bundle from a ConfigMap volume; the same runner
// without the toleration is never scheduled.
var _ = Describe("Runner placement, with the real kube-scheduler", func() {
	It("schedules a runner that selects and tolerates a dedicated node onto it, where it applies and reads its CA bundle; without the toleration the pod stays unscheduled", func() {
		const ns, decoy = "placement", "placement-decoy"
		sb := startSandbox("placement")
		DeferCleanup(func() { Expect(sb.Stop()).To(Succeed()) })
		node := sb.Executor().NodeName()
		createNamespace(sb, ns)

		By("the sandbox's node is dedicated: labelled and tainted, as a person would with kubectl")
		kubectl(sb, "label", "node", node, runnerPoolLabel+"=infra")
		kubectl(sb, "taint", "node", node, dedicatedTaint+"=terraform:NoSchedule")

		By("a decoy node is Ready and free: a pod that selects no node lands there")
		keepDecoyNode(sb, decoy)
		probe := objects.Pod(ns, "probe").Obj()
		Eventually(func() error { return sb.Client().Create(ctx, probe) }).Should(Succeed(), "the namespace's default ServiceAccount")
		Eventually(func() string {
			Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(probe), probe)).To(Succeed())
			return probe.Spec.NodeName
		}).Should(Equal(decoy))
		Expect(sb.Client().Delete(ctx, probe, client.GracePeriodSeconds(0))).To(Succeed())

		By("a runner that selects and tolerates the dedicated node runs there and applies")
		reports := GinkgoT().TempDir()
		Expect(os.Chmod(reports, 0o777)).To(Succeed())
		applyPlacement(sb, ns, "placed", reports, true)
		placed := tc(ns, "placed")
		eventuallyReady(sb, placed)
		applies := jobsOf(sb, infrav1.TerraformClusterKind, ns, "placed", infrav1.OperationApply)
		Expect(applies).To(HaveLen(1))
		pods := podsOfJob(sb, &applies[0])
		Expect(pods).To(HaveLen(1))
		Expect(pods[0].Spec.NodeName).To(Equal(node), "the scheduler chose the dedicated node, not the decoy")
		Expect(pods[0].Labels).To(HaveKeyWithValue("team", "platform"))
		Expect(pods[0].Labels).To(HaveKeyWithValue(infrav1.OperationLabel, string(infrav1.OperationApply)))
		Expect(pods[0].Status.Phase).To(Equal(corev1.PodSucceeded))

		By("the module read the CA bundle from the ConfigMap volume at its mountPath")
		ca := &corev1.ConfigMap{}
		Expect(sb.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "corporate-ca"}, ca)).To(Succeed())
		copied, err := os.ReadFile(filepath.Join(reports, "placed.pem"))
		Expect(err).NotTo(HaveOccurred(), "the module's local-exec copies $SSL_CERT_FILE into the report folder")
		Expect(string(copied)).To(Equal(ca.Data["ca.crt"]))
		Expect(string(copied)).To(HavePrefix("-----BEGIN CERTIFICATE-----"))

		By("the same runner without the toleration: its pod is never scheduled")
		applyPlacement(sb, ns, "untolerated", reports, false)
		untolerated := tc(ns, "untolerated")
		var job batchv1.Job
		Eventually(func(g Gomega) {
			list := jobsOf(sb, infrav1.TerraformClusterKind, ns, "untolerated", infrav1.OperationApply)
			g.Expect(list).To(HaveLen(1))
			job = list[0]
			pods := podsOfJob(sb, &job)
			g.Expect(pods).To(HaveLen(1))
			scheduled := podCondition(pods[0], corev1.PodScheduled)
			g.Expect(scheduled).NotTo(BeNil())
			g.Expect(scheduled.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(scheduled.Reason).To(Equal(corev1.PodReasonUnschedulable))
			g.Expect(scheduled.Message).To(ContainSubstring("untolerated taint"))
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			pods := podsOfJob(sb, &job)
			g.Expect(pods).To(HaveLen(1))
			g.Expect(pods[0].Spec.NodeName).To(BeEmpty())
			g.Expect(pods[0].Status.Phase).To(Equal(corev1.PodPending))
		}, "10s", "1s").Should(Succeed())
		pod := podsOfJob(sb, &job)[0]
		Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(untolerated), untolerated)).To(Succeed())
		st := untolerated.Status
		ready := meta.FindStatusCondition(st.Conditions, infrav1.ReadyCondition)
		Expect(ready).NotTo(BeNil())
		Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		Expect(ready.Reason).To(Equal(infrav1.JobRunningReason), "CAPTF reports the Job as running: it does not read scheduling conditions")
		Expect(st.ActiveJob).NotTo(BeNil())
		Expect(st.ActiveJob.Name).To(Equal(job.Name))
		Expect(runsOf(readHistory(sb.HistoryFile()), infrav1.TerraformClusterKind, ns, "untolerated", "")).To(BeEmpty(), "the node ran nothing of it")
		report := fmt.Sprintf("pod %s: PodScheduled=False %s: %s; TerraformCluster untolerated: Ready=%s %s: %s; activeJob %s",
			pod.Name, podCondition(pod, corev1.PodScheduled).Reason, podCondition(pod, corev1.PodScheduled).Message,
			ready.Status, ready.Reason, ready.Message, st.ActiveJob.Name)
		fmt.Fprintln(GinkgoWriter, report)
		AddReportEntry("an untolerated runner", report)
	})
})

// podCondition is a pod's condition of type t, or nil.
func podCondition(p corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}
