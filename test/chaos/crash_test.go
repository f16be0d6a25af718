package chaos_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// crashAfter returns interceptor funcs that let the write matching point succeed, then kill
// the manager at once: the context is cancelled and every later write fails, as if the
// process died right after the API server acknowledged that write.
func crashAfter(point string, kill func()) (*interceptor.Funcs, *atomic.Bool) {
	dead := &atomic.Bool{}
	after := func(err error, matched bool) error {
		if err == nil && matched && dead.CompareAndSwap(false, true) {
			kill()
		}
		return err
	}
	return &interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if dead.Load() {
				return errCrashed
			}
			return after(c.Create(ctx, obj, opts...), matchesCreate(point, obj))
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if dead.Load() {
				return errCrashed
			}
			return after(c.Update(ctx, obj, opts...), point == "lease" && isRunLease(obj))
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if dead.Load() {
				return errCrashed
			}
			_, isObj := obj.(*infrav1.TerraformCluster)
			_, seq := obj.GetAnnotations()[infrav1.RunSeqAnnotation]
			return after(c.Patch(ctx, obj, patch, opts...), point == "block-move" && isObj && seq)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if dead.Load() {
				return errCrashed
			}
			return c.Delete(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if dead.Load() {
				return errCrashed
			}
			tc, ok := obj.(*infrav1.TerraformCluster)
			return after(c.SubResource(sub).Patch(ctx, obj, patch, opts...), point == "status" && ok && tc.Status.ActiveJob != nil)
		},
	}, dead
}

func isRunLease(obj client.Object) bool {
	l, ok := obj.(*coordinationv1.Lease)
	return ok && l.Labels[infrav1.LeaseLabel] == infrav1.LeaseKindRun
}

func matchesCreate(point string, obj client.Object) bool {
	switch point {
	case "lease":
		return isRunLease(obj)
	case "inputs":
		_, ok := obj.(*corev1.Secret)
		return ok && strings.HasPrefix(obj.GetName(), "captf-inputs-")
	case "job":
		_, ok := obj.(*batchv1.Job)
		return ok
	case "run-secret":
		_, ok := obj.(*corev1.Secret)
		return ok && strings.HasSuffix(obj.GetName(), "-run")
	}
	return false
}

var _ = Describe("Crash windows in the Job start sequence", func() {
	for _, point := range []string{"lease", "block-move", "inputs", "job", "run-secret", "status"} {
		It(fmt.Sprintf("converges with exactly one Job after a crash right after the %s write", point), func() {
			ns := kit.Namespace()
			var m1 *running
			funcs, dead := crashAfter(point, func() { m1.cancel() })
			m1 = startManager(managerOpts{intercept: funcs})
			tc := createCluster(ns, "c1", true)
			Eventually(dead.Load).Should(BeTrue(), "the crash point %s was never reached", point)
			Expect(m1.Stop()).To(Succeed())
			jobsAtCrash := len(jobsIn(ns))

			By("a fresh manager on the same API server picks up")
			m2 := startManager(managerOpts{})
			defer func() { Expect(m2.Stop()).To(Succeed()) }()
			Eventually(func() int { return len(jobsIn(ns)) }).Should(Equal(1))
			job := jobsIn(ns)[0]
			finish(&job)
			Eventually(func() bool { return get(tc).Status.IsProvisioned() }).Should(BeTrue())
			Consistently(func() int { return len(jobsIn(ns)) }).Should(Equal(1), "exactly one Job ever")
			fmt.Printf("crash after %-10s: jobs at crash %d, jobs in the end %d, converged\n", point, jobsAtCrash, len(jobsIn(ns)))
		})
	}
})
