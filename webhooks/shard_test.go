package webhooks_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// Issue 30's "a guard denial works for objects of both shards": the webhook Service sends an
// admission request to any manager Pod behind it, whatever shard that manager serves, so the
// guard of a manager of one shard must judge the objects of every shard. Its cache holds only
// its own shard (TestShardsGate), so the guard reads through the API server (setup.Options'
// WatchFilter says so; docs/deployment.md, "Two managers splitting a fleet").
var _ = Describe("The webhooks of a manager of one shard", func() {
	It("deny a human's removal of block-move or status.activeJob while a Job runs, and allow it once the Job ended, for objects of every shard", func() {
		ns := newNamespace()
		By("replacing the webhook-only server by the manager as deployed, the manager of shard a (--watch-filter=a)")
		refused, mgr := startRealManagerWith(ns, func(o *setup.Options) { o.WatchFilter = "a" })

		shards := map[string]string{"in-a": "a", "in-b": "b", "no-shard": ""}
		runs := map[string]*run{}
		for name, shard := range shards {
			o := newObject(infrav1.TerraformClusterKind, ns, name)
			if shard != "" {
				o.SetLabels(map[string]string{clusterv1.ClusterNameLabel: name, clusterv1.WatchLabel: shard})
			}
			Expect(admin.Create(ctx, o)).To(Succeed())
			// The object has no Cluster: the controller of shard a waits for one and starts
			// nothing, so the spec's run is the only one. Its Job carries the object's shard,
			// as the Jobs the controller builds do.
			r, err := takeLease(ctx, mgrClient, infrav1.TerraformClusterKind, ns, name, 1)
			Expect(err).NotTo(HaveOccurred())
			if shard != "" {
				r.job.Labels[clusterv1.WatchLabel] = shard
			}
			Expect(admin.Create(ctx, r.job)).To(Succeed())
			r.pod, err = envtest.StartJob(ctx, admin, r.job)
			Expect(err).NotTo(HaveOccurred())
			runs[name] = r
			for _, m := range []mark{markBlockMove, markActiveJob} {
				Expect(ensureMark(ctx, admin, infrav1.TerraformClusterKind, ns, name, m, r.job.Name)).To(Succeed())
			}
		}

		By("the manager's cache holds the object of its shard alone")
		Eventually(func() error {
			return mgr.GetCache().Get(ctx, client.ObjectKey{Namespace: ns, Name: "in-a"}, &infrav1.TerraformCluster{})
		}).Should(Succeed())
		for _, name := range []string{"in-b", "no-shard"} {
			err := mgr.GetCache().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &infrav1.TerraformCluster{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s: %v", name, err)
		}

		By("a human removing block-move or status.activeJob while each object's Job runs: denied, naming the Job, in every shard")
		for name := range shards {
			for _, m := range []mark{markBlockMove, markActiveJob} {
				err := remove(ctx, admin, infrav1.TerraformClusterKind, ns, name, m, methodMerge)
				Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s, %s: %v", name, m, err)
				Expect(err.Error()).To(ContainSubstring(runs[name].job.Name), "%s, %s", name, m)
			}
		}

		By("each Job succeeds: the same removals are allowed, in every shard")
		for name := range shards {
			Expect(runs[name].finish(ctx, admin)).To(Succeed())
			for _, m := range []mark{markBlockMove, markActiveJob} {
				Expect(remove(ctx, admin, infrav1.TerraformClusterKind, ns, name, m, methodMerge)).To(Succeed(), "%s, %s", name, m)
				has, err := hasMark(ctx, admin, infrav1.TerraformClusterKind, ns, name, m)
				Expect(err).NotTo(HaveOccurred())
				Expect(has).To(BeFalse(), "%s, %s", name, m)
			}
		}

		By("status.activeJob names a Job that still runs but holds no lease (one an earlier incarnation left): the guard reads that Job, in every shard")
		for name, shard := range shards {
			obj := u(infrav1.TerraformClusterKind, ns, name)
			Expect(admin.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
			straggler := objects.Job(ns, name+"-straggler").Of(infrav1.TerraformClusterKind, name, name).
				Label(infrav1.OperationLabel, string(infrav1.OperationApply)).Owner(obj).Obj()
			if shard != "" {
				straggler.Labels[clusterv1.WatchLabel] = shard
			}
			Expect(admin.Create(ctx, straggler)).To(Succeed())
			pod, err := envtest.StartJob(ctx, admin, straggler)
			Expect(err).NotTo(HaveOccurred())
			Expect(ensureMark(ctx, admin, infrav1.TerraformClusterKind, ns, name, markActiveJob, straggler.Name)).To(Succeed())
			err = remove(ctx, admin, infrav1.TerraformClusterKind, ns, name, markActiveJob, methodMerge)
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", name, err)
			Expect(err.Error()).To(ContainSubstring(straggler.Name), name)
			Expect(envtest.FinishJob(ctx, admin, straggler, pod, true, `{"outcome":"Succeeded"}`)).To(Succeed())
			Expect(remove(ctx, admin, infrav1.TerraformClusterKind, ns, name, markActiveJob, methodMerge)).To(Succeed(), name)
		}
		Expect(refused.Load()).To(BeZero(), "the guards refused none of the manager's own writes")
	})
})
