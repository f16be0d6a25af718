package runlease_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
)

// i5Monitor records, on the fake clock, when the cluster's mutating Job runs and when a
// member's mutating operation was let through, and counts the I5 violations: a member
// operation let through while the cluster's runs.
type i5Monitor struct {
	clusterFrom, clusterTo time.Time // clusterTo zero: still running
	attempts, overlaps     int
}

func (m *i5Monitor) clusterRuns(at time.Time) bool {
	return !m.clusterFrom.IsZero() && !at.Before(m.clusterFrom) && (m.clusterTo.IsZero() || at.Before(m.clusterTo))
}

func (m *i5Monitor) member(at time.Time, res runlease.Result) {
	m.attempts++
	if res.Acquired && m.clusterRuns(at) {
		m.overlaps++
	}
}

var _ = Describe("The backstop under forgery (issue 16)", func() {
	It("never lets a member apply start while the cluster apply runs, whatever is written into the cluster lease's duration or times", func() {
		ns := newNamespace()
		clk := fakeClock()
		cm, mm, pm := newManager(clk, true), newManager(clk, true), newManager(clk, true)
		cluster, machine, pool := clusterOwner(ns), machineOwner(ns, "m1"), poolOwner(ns, "p1")
		mon := &i5Monitor{}

		By("the cluster apply takes its leases; its Job is created and runs (deadline 3600 s)")
		req := request(cluster, 1, infrav1.OperationApply)
		req.ActiveDeadlineSeconds = 3600
		res, err := cm.Acquire(ctx, req)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Acquired).To(BeTrue())
		j := jobSpec(cluster, req.Holder)
		j.Spec.ActiveDeadlineSeconds = ptr.To[int64](3600)
		Expect(admin.Create(ctx, j)).To(Succeed())
		startJob(j)
		mon.clusterFrom = clk.Now()
		Expect(*getLease(ns, cluster.ClusterLeaseName()).Spec.LeaseDurationSeconds).To(Equal(int32(4500)), "what the manager wrote")

		// No webhook runs in this suite: the lease rules alone must hold against each forgery.
		dayBefore := func(l *coordinationv1.Lease) {
			at := metav1.NewMicroTime(clk.Now().Add(-24 * time.Hour))
			l.Spec.AcquireTime, l.Spec.RenewTime = &at, &at
			l.Annotations[infrav1.LeaseAcquiredAtAnnotation] = at.UTC().Format(time.RFC3339)
		}
		forgeries := []struct {
			name  string
			forge func(*coordinationv1.Lease)
		}{
			{"leaseDurationSeconds cut to 1", func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = ptr.To[int32](1) }},
			{"acquire and renew times moved a day into the past", dayBefore},
			{"both at once", func(l *coordinationv1.Lease) {
				l.Spec.LeaseDurationSeconds = ptr.To[int32](1)
				dayBefore(l)
			}},
		}
		seq := int64(0)
		for _, f := range forgeries {
			for _, step := range []time.Duration{2 * time.Second, 2 * time.Minute, 20 * time.Minute} {
				By(fmt.Sprintf("%s, then %s later a machine apply and a pool apply ask", f.name, step))
				l := getLease(ns, cluster.ClusterLeaseName())
				f.forge(l)
				Expect(admin.Update(ctx, l)).To(Succeed())
				clk.Step(step)
				for _, o := range []runlease.Owner{machine, pool} {
					seq++
					r, err := map[string]*runlease.Manager{machine.Name: mm, pool.Name: pm}[o.Name].Acquire(ctx, request(o, seq, infrav1.OperationApply))
					Expect(err).NotTo(HaveOccurred())
					mon.member(clk.Now(), r)
					Expect(r.Acquired).To(BeFalse(), "%s: %s %s started while the cluster apply %s runs", f.name, o.Kind, o.Name, req.Holder)
					Expect(r.Wait.Reason).To(Equal(infrav1.WaitingForClusterOperationReason))
					Expect(r.Wait.Jobs).To(ConsistOf(req.Holder))
				}
			}
		}

		By("the cluster apply ends: the members go on (the gate opens, nothing waits forever)")
		finishJob(j, true)
		mon.clusterTo = clk.Now()
		clk.Step(time.Second)
		seq++
		r, err := mm.Acquire(ctx, request(machine, seq, infrav1.OperationApply))
		Expect(err).NotTo(HaveOccurred())
		mon.member(clk.Now(), r)
		Expect(r.Acquired).To(BeTrue(), "%+v", r.Wait)
		fmt.Printf("\nI5 monitor, cluster lease forgeries (%d): %d member applies asked while the cluster apply ran or after; I5 overlaps: %d\n\n",
			len(forgeries), mon.attempts, mon.overlaps)
		Expect(mon.overlaps).To(BeZero())
	})
})
