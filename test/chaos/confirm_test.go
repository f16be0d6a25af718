package chaos_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

var _ = Describe("The lease confirmation before the Job create", func() {
	It("creates no Job when another holder took the run lease during the start sequence", func() {
		ns := kit.Namespace()
		clk := clocktesting.NewFakeClock(time.Now())
		var stolen atomic.Bool
		var leaseName string
		// Right after the durable inputs are written (the step before the confirmation), a
		// competitor takes the run lease over, as a second manager with a newer view would.
		steal := func(ctx context.Context) {
			l := &coordinationv1.Lease{}
			Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: leaseName}, l)).To(Succeed())
			other := "captf-someone-else-1"
			now := metav1.NewMicroTime(clk.Now())
			l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.AcquireTime = &other, &now, &now
			Expect(k8s.Update(ctx, l)).To(Succeed())
			stolen.Store(true)
		}
		funcs := &interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				err := c.Create(ctx, obj, opts...)
				if _, ok := obj.(*corev1.Secret); ok && err == nil && strings.HasPrefix(obj.GetName(), "captf-inputs-") && !stolen.Load() {
					steal(ctx)
				}
				return err
			},
		}
		m := startManager(managerOpts{intercept: funcs, clock: clk})
		defer func() { Expect(m.Stop()).To(Succeed()) }()
		tc := createCluster(ns, "c1", true)
		leaseName = naming.RunLeaseName(naming.StateSuffix(ns, infrav1.TerraformClusterKind, tc.Name))
		Eventually(stolen.Load).Should(BeTrue())
		Consistently(func() int { return len(jobsIn(ns)) }).Should(BeZero(),
			"the lease no longer names our Job: creating it would run two writers on one state")

		By("past the grace the competitor's unstarted hold frees, and the object goes on")
		clk.Step(2 * time.Minute)
		Eventually(func() int {
			kit.Poke(tc)
			return len(jobsIn(ns))
		}).Should(Equal(1))
	})
})

var _ = Describe("The pause read live before the Job create", func() {
	It("creates no Job when the Cluster was paused during the start sequence, and runs once it is unpaused", func() {
		ns := kit.Namespace()
		var paused atomic.Bool
		setPaused := func(ctx context.Context, on bool) {
			c := &clusterv1.Cluster{}
			c.Namespace, c.Name = ns, "c1"
			Expect(k8s.Patch(ctx, c, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"paused":%t}}`, on)))).To(Succeed())
		}
		// Right after the pass wrote block-move and its run sequence (the decision to start was
		// taken on a Cluster that was not paused), clusterctl move pauses the Cluster.
		funcs := &interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				err := c.Patch(ctx, obj, patch, opts...)
				if _, ok := obj.(*infrav1.TerraformCluster); ok && err == nil && hasKey(obj.GetAnnotations(), infrav1.RunSeqAnnotation) && !paused.Load() {
					setPaused(ctx, true)
					paused.Store(true)
				}
				return err
			},
		}
		DeferCleanup(func() { dropNamespace(ns) })
		m := startManager(managerOpts{intercept: funcs})
		DeferCleanup(func() { Expect(m.Stop()).To(Succeed()) })
		tc := createCluster(ns, "c1", true)
		Eventually(paused.Load).Should(BeTrue())
		Consistently(func() int { return len(jobsIn(ns)) }).Should(BeZero(),
			"the Cluster was paused before the create: a Job now would run under a move")

		By("unpaused, the object starts its apply")
		setPaused(ctx, false)
		Eventually(func() int {
			kit.Poke(tc)
			return len(jobsIn(ns))
		}).Should(Equal(1))
	})
})

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}
