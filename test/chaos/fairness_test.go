package chaos_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// The soak's liveness finding of 2026-12-02: TerraformClusters created just before a manager
// (re)started got no pass for ten minutes. A started manager learns of the objects that already
// exist from its informers' initial list; controller-runtime's priority queue (on by default
// since v0.23) files those at a low priority, below every change event, and keeps that
// priority across requeues. While changes keep the workers busy, as they do on a management
// cluster with hundreds of runs, an object that nothing changes is never dequeued. The
// manager therefore runs the first-in first-out queue (setup.New), and this spec keeps it so.
var _ = Describe("A busy queue at start-up", func() {
	It("still reconciles an object that existed before the manager started", func() {
		ns := kit.Namespace()
		const busy = 20
		for i := range busy {
			tc := createCluster(ns, fmt.Sprintf("busy-%d", i), true)
			// Paused: a pass of it starts nothing and is cheap, whatever the bumps do.
			Expect(k8s.Patch(ctx, tc, client.RawPatch(types.MergePatchType,
				fmt.Appendf(nil, `{"metadata":{"annotations":{%q:""}}}`, infrav1.PausedAnnotation)))).To(Succeed())
		}
		// The object under test exists, without the finalizer, before the manager starts: the
		// manager hears of it only through the initial list.
		late := createCluster(ns, "late", false)

		// Each pass of a busy object takes at least passTime (its read is slowed), so one
		// worker manages at most 1/passTime passes a second; the bumps below change every busy
		// object far more often, so change events are always waiting.
		const passTime = 200 * time.Millisecond
		slow := &interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*infrav1.TerraformCluster); ok && key.Namespace == ns && strings.HasPrefix(key.Name, "busy-") {
				time.Sleep(passTime)
			}
			return c.Get(ctx, key, obj, opts...)
		}}

		bctx, stopBumps := context.WithCancel(ctx)
		var bumps atomic.Int64
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			for n := 0; bctx.Err() == nil; n++ {
				tc := objects.Cluster(ns, fmt.Sprintf("busy-%d", n%busy)).Obj()
				patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{"test.captf.io/bump":"%d"}}}`, n))
				if err := k8s.Patch(bctx, tc, patch); err == nil {
					bumps.Add(1)
				}
			}
		}()
		DeferCleanup(func() { stopBumps(); <-done })
		DeferCleanup(func() { dropNamespace(ns) }) // runs after the manager stopped (cleanups run last-in first-out)

		started, bumpsBefore := time.Now(), bumps.Load()
		m := startManager(managerOpts{intercept: slow, concurrency: 1})
		DeferCleanup(func() { Expect(m.Stop()).To(Succeed()) })
		Eventually(func(g Gomega) {
			g.Expect(get(late).Finalizers).To(ContainElement(infrav1.Finalizer))
		}, "60s").Should(Succeed(), "an object that existed at start-up must get its pass while change events keep the worker busy")
		// The bumps did keep the worker busy: at least twice as many change events as one
		// worker could have passed in the time.
		passes := float64(time.Since(started)) / float64(passTime)
		Expect(float64(bumps.Load()-bumpsBefore)).To(BeNumerically(">=", 2*passes), "the bumps were too slow to keep the worker busy")
	})
})
