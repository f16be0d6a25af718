package webhooks_test

import (
	"fmt"
	"net/http"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/setup"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

var _ = Describe("The real manager with --enable-webhooks", func() {
	It("passes the controller's own removals and a clusterctl-move-shaped sequence, and still stops a human", func() {
		ns := newNamespace()
		By("replacing the webhook-only server by the manager as deployed: setup.New with EnableWebhooks")
		Expect(hooks.stop()).To(Succeed())
		hooks = nil
		w := env.WebhookInstallOptions
		// Count every write of the controller the API server refused with 403: the guard must
		// never refuse the controller's own removals.
		var refused atomic.Int32
		cfg := rest.CopyConfig(env.Config)
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(req *http.Request) (*http.Response, error) {
				resp, err := rt.RoundTrip(req)
				if err == nil && resp.StatusCode == http.StatusForbidden && req.Method != http.MethodGet {
					refused.Add(1)
				}
				return resp, err
			})
		}
		mgr, err := setup.New(cfg, setup.Options{
			MetricsAddr: "0", ProbeAddr: "0", WatchNamespace: ns, Concurrency: 2,
			EnableWebhooks: true, WebhookPort: w.LocalServingPort, WebhookCertDir: w.LocalServingCertDir,
			GuardOverrideGroups: []string{breakGlassGroup},
			RunnerImage:         "captf/manager:test", RuntimeImage: "captf/tofu:test",
		}, func(o *manager.Options) { o.Controller.SkipNameValidation = ptr.To(true) })
		Expect(err).NotTo(HaveOccurred())
		full, err := runManager(mgr)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			Expect(full.stop()).To(Succeed())
			restartHooks()
		})

		By("creating a Cluster and its TerraformCluster: the finalizer is there from the create on")
		cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.TerraformClusterKind, Name: "c1"}}}
		Expect(admin.Create(ctx, cl)).To(Succeed())
		tc := newObject(infrav1.TerraformClusterKind, ns, "c1").(*infrav1.TerraformCluster)
		tc.Labels = map[string]string{clusterv1.ClusterNameLabel: "c1"}
		Expect(admin.Create(ctx, tc)).To(Succeed())
		Expect(tc.Finalizers).To(ConsistOf(infrav1.Finalizer))

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

		By("clusterctl move: annotate delete-for-move, delete, strip the finalizers")
		Expect(mergePatch(admin, infrav1.TerraformClusterKind, ns, "c1", false,
			`{"metadata":{"annotations":{"clusterctl.cluster.x-k8s.io/delete-for-move":""}}}`)).To(Succeed())
		Expect(admin.Delete(ctx, tc)).To(Succeed())
		err = mergePatch(admin, infrav1.TerraformClusterKind, ns, "c1", false, `{"metadata":{"finalizers":null}}`)
		Expect(client.IgnoreNotFound(err)).To(Succeed(), "stripping the finalizers of a moved object passes")
		Eventually(func() bool { return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(tc), tc)) }).Should(BeTrue())
		Expect(refused.Load()).To(BeZero(), "the API server refused a write of the controller")
		fmt.Printf("\nclusterctl-move-shaped sequence with the real controller: every removal passed the guard (0 writes of the controller refused)\n\n")
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
