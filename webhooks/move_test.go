package webhooks_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// startRealManager replaces the suite's webhook-only server by the manager as deployed
// (setup.New with EnableWebhooks), running as the manager's ServiceAccount and watching ns. It
// counts every write of the controller the API server refused with 403: the guards must never
// refuse the controller's own writes.
func startRealManager(ns string) *atomic.Int32 {
	GinkgoHelper()
	refused, _ := startRealManagerWith(ns, func(*setup.Options) {})
	return refused
}

// startRealManagerWith is startRealManager with the options edit changes (a shard, say); it
// also returns the manager, whose cache a spec may look into.
func startRealManagerWith(ns string, edit func(*setup.Options)) (*atomic.Int32, manager.Manager) {
	GinkgoHelper()
	Expect(hooks.stop()).To(Succeed())
	hooks = nil
	w := env.WebhookInstallOptions
	var refused atomic.Int32
	cfg := rest.CopyConfig(mgrConfig)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode == http.StatusForbidden && req.Method != http.MethodGet {
				refused.Add(1)
				fmt.Fprintf(GinkgoWriter, "the API server refused the manager's %s %s\n", req.Method, req.URL.Path)
			}
			return resp, err
		})
	}
	o := setup.Options{
		MetricsAddr: "0", ProbeAddr: "0", WatchNamespace: ns, Concurrency: 2,
		EnableWebhooks: true, WebhookPort: w.LocalServingPort, WebhookCertDir: w.LocalServingCertDir,
		GuardOverrideGroups: []string{breakGlassGroup}, ManagerServiceAccount: managerServiceAccount,
		// The real manager keeps the policy's ConfigMap (in captf-system, its identity's
		// namespace): it must keep the suite's approver group there.
		PlanApproverGroups: []string{approverGroup},
		RunnerImage:        "captf/manager:test", RuntimeImage: "captf/tofu:test",
	}
	edit(&o)
	mgr, err := setup.New(cfg, o, func(o *manager.Options) { o.Controller.SkipNameValidation = ptr.To(true) })
	Expect(err).NotTo(HaveOccurred())
	full, err := runManager(mgr)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		Expect(full.stop()).To(Succeed())
		restartHooks()
	})
	return &refused, mgr
}

// newCluster creates a Cluster and its TerraformCluster of the same name.
func newCluster(ns, name string) (*clusterv1.Cluster, *infrav1.TerraformCluster) {
	GinkgoHelper()
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.TerraformClusterKind, Name: name}}}
	Expect(admin.Create(ctx, cl)).To(Succeed())
	tc := newObject(infrav1.TerraformClusterKind, ns, name).(*infrav1.TerraformCluster)
	Expect(admin.Create(ctx, tc)).To(Succeed())
	Expect(tc.Finalizers).To(ConsistOf(infrav1.Finalizer))
	return cl, tc
}

var _ = Describe("The real manager with --enable-webhooks", func() {
	It("passes the controller's own removals and a clusterctl-move-shaped sequence, and still stops a human", func() {
		ns := newNamespace()
		By("replacing the webhook-only server by the manager as deployed: setup.New with EnableWebhooks")
		refused := startRealManager(ns)

		By("creating a Cluster and its TerraformCluster: the finalizer is there from the create on")
		cl, tc := newCluster(ns, "c1")

		By("the controller starts apply Job 1: block-move, lease, Job, activeJob")
		suffix := naming.StateSuffix(ns, infrav1.TerraformClusterKind, "c1")
		job := &batchv1.Job{}
		Eventually(func() error {
			return admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: naming.JobName(suffix, 1)}, job)
		}).Should(Succeed())
		pod, err := envtest.StartJob(ctx, admin, job)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() string { return activeJobOf(tc) }).Should(Equal(job.Name))

		By("a human removing block-move while the controller's Job runs: denied")
		err = mergePatch(admin, infrav1.TerraformClusterKind, ns, "c1", false, `{"metadata":{"annotations":{"clusterctl.cluster.x-k8s.io/block-move":null}}}`)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("Job " + job.Name))

		By("the Job succeeds: the controller releases the lease, then clears status.activeJob through the guard")
		Expect(statetest.Write(ctx, admin, ns, suffix, statetest.Cluster("10.0.0.1", 6443))).To(Succeed())
		Expect(envtest.FinishJob(ctx, admin, job, pod, true, "")).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(tc), tc)).To(Succeed())
			g.Expect(tc.Status.ActiveJob).To(BeNil())
			g.Expect(tc.Status.IsProvisioned()).To(BeTrue())
		}).Should(Succeed())
		Expect(tc.Annotations).To(HaveKey(infrav1.BlockMoveAnnotation), "a normal pass keeps block-move")

		By("clusterctl move: pause the Cluster; the controller clears block-move through the guard")
		Expect(admin.Patch(ctx, cl, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":true}}`)))).To(Succeed())
		Eventually(func() map[string]string {
			Expect(admin.Get(ctx, client.ObjectKeyFromObject(tc), tc)).To(Succeed())
			return tc.Annotations
		}).ShouldNot(HaveKey(infrav1.BlockMoveAnnotation))

		By("clusterctl move, run by an override group member (docs/move.md): annotate delete-for-move, delete, strip the finalizers")
		mover, _ := userClient("clusterctl-mover", breakGlassGroup)
		Expect(mergePatch(mover, infrav1.TerraformClusterKind, ns, "c1", false,
			`{"metadata":{"annotations":{"clusterctl.cluster.x-k8s.io/delete-for-move":""}}}`)).To(Succeed())
		Expect(admin.Delete(ctx, tc)).To(Succeed())
		err = mergePatch(mover, infrav1.TerraformClusterKind, ns, "c1", false, `{"metadata":{"finalizers":null}}`)
		Expect(client.IgnoreNotFound(err)).To(Succeed(), "stripping the finalizers of a moved object passes")
		Eventually(func() bool { return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(tc), tc)) }).Should(BeTrue())
		Expect(refused.Load()).To(BeZero(), "the API server refused a write of the controller")
		fmt.Printf("\nclusterctl-move-shaped sequence with the real controller: every removal passed the guard (0 writes of the controller refused)\n\n")
	})
})

var _ = Describe("A running Job deleted with --cascade=orphan, with the real manager", func() {
	It("leaves the object holding block-move, status.activeJob and its finalizer until the orphaned pod is terminal", func() {
		ns := newNamespace()
		dev, _ := userClient("dev-orphan", "devs")
		refused := startRealManager(ns)
		cl, tc := newCluster(ns, "c1")
		suffix := naming.StateSuffix(ns, infrav1.TerraformClusterKind, "c1")
		job := &batchv1.Job{}
		Eventually(func() error {
			return admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: naming.JobName(suffix, 1)}, job)
		}).Should(Succeed())
		pod, err := envtest.StartJob(ctx, admin, job)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() string { return activeJobOf(tc) }).Should(Equal(job.Name))

		By("the Cluster is paused (a move is coming): the controller keeps block-move while the Job runs")
		Expect(admin.Patch(ctx, cl, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":true}}`)))).To(Succeed())

		By("a user deletes the running Job with --cascade=orphan: the Job guard allows it")
		Expect(dev.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationOrphan))).To(Succeed())
		By("playing the garbage collector (envtest runs none): it orphans the pod and drops the Job's orphan finalizer")
		Eventually(func() error {
			j := &batchv1.Job{}
			if err := admin.Get(ctx, client.ObjectKeyFromObject(job), j); err != nil {
				return err
			}
			return admin.Patch(ctx, j, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		}).Should(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{}))
		}).Should(BeTrue())

		By("clusterctl move's deletion arrives, run by an override group member: delete-for-move, then delete")
		mover, _ := userClient("clusterctl-mover", breakGlassGroup)
		Expect(mergePatch(mover, infrav1.TerraformClusterKind, ns, "c1", false,
			`{"metadata":{"annotations":{"clusterctl.cluster.x-k8s.io/delete-for-move":""}}}`)).To(Succeed())
		Expect(admin.Delete(ctx, tc)).To(Succeed())

		By("while the orphaned pod runs, the object keeps block-move, status.activeJob and its finalizer")
		Consistently(func(g Gomega) {
			g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(tc), tc)).To(Succeed())
			g.Expect(tc.Annotations).To(HaveKey(infrav1.BlockMoveAnnotation))
			g.Expect(tc.Finalizers).To(ContainElement(infrav1.Finalizer))
			g.Expect(tc.Status.ActiveJob).NotTo(BeNil())
		}).WithTimeout(8 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		Expect(refused.Load()).To(BeZero(), "the controller tried an early removal and the guard refused it")

		By("the orphaned pod terminates, and the run lease is past its grace: the controller lets the object go")
		pod.Status.Phase = corev1.PodSucceeded
		Expect(admin.Status().Update(ctx, pod)).To(Succeed())
		Expect(ageLease(ctx, mgrClient, ns, naming.RunLeaseName(suffix), 2*60)).To(Succeed())
		Expect(ageLease(ctx, mgrClient, ns, naming.ClusterLeaseName(ns, "c1"), 2*60)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(tc), tc))
		}).WithTimeout(60 * time.Second).Should(BeTrue())
		Expect(refused.Load()).To(BeZero(), "the API server refused a write of the controller")
		fmt.Printf("\norphaned pod: the object kept block-move, status.activeJob and its finalizer while the pod ran, and went once it ended (0 writes of the controller refused)\n\n")
	})
})

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func activeJobOf(tc *infrav1.TerraformCluster) string {
	GinkgoHelper()
	Expect(admin.Get(ctx, client.ObjectKeyFromObject(tc), tc)).To(Succeed())
	if tc.Status.ActiveJob == nil {
		return ""
	}
	return tc.Status.ActiveJob.Name
}
