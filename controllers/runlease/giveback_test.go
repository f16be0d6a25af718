package runlease_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
)

// Two passes of the same machine under the same holder name (two managers without leader
// election) meet the cluster's apply at the gate. Each pass plays the engine's start sequence
// through its own client: Acquire -> (block-move, pause, durable inputs) -> Confirm -> create
// the Job. The hooks put the steps in exactly the order a two-manager run once produced.
var _ = Describe("The give-back at the gate, with two passes of one machine", func() {
	It("never gives back a hold that another pass of the same run confirmed and creates its Job under (I5)", func() {
		ns := newNamespace()
		clk := fakeClock()
		passA, passB, cm := newManager(clk, true), newHookedManager(clk, true), newManager(clk, true)
		cluster, m1 := clusterOwner(ns), machineOwner(ns, "m1")
		job := jobName(m1, 1)

		By("pass A takes the machine's run lease for the apply of run 1 and passes the gate")
		Expect(passA.Acquire(ctx, request(m1, 1, infrav1.OperationApply))).To(HaveField("Acquired", true))

		By("pass B asks under the same name; right after its write the cluster takes its leases, and pass A confirms its hold")
		var clusterRes runlease.Result
		var confirmed bool
		passB.setHook(func(n int, after bool) {
			if n != 1 || !after {
				return
			}
			var err error
			clusterRes, err = cm.Acquire(ctx, request(cluster, 1, infrav1.OperationApply))
			Expect(err).NotTo(HaveOccurred())
			confirmed, err = passA.Confirm(ctx, request(m1, 1, infrav1.OperationApply))
			Expect(err).NotTo(HaveOccurred())
		})
		resB, err := passB.Acquire(ctx, request(m1, 1, infrav1.OperationApply))
		Expect(err).NotTo(HaveOccurred())
		passB.noHook()
		Expect(clusterRes.Acquired).To(BeFalse(), "the cluster saw the machine's hold")
		Expect(clusterRes.Wait.Reason).To(Equal(infrav1.WaitingForMachineOperationsReason))
		Expect(confirmed).To(BeTrue(), "pass A confirmed its hold before pass B read the cluster lease")
		Expect(resB.Acquired).To(BeFalse(), "pass B must wait behind the cluster's operation")
		Expect(resB.Wait.Reason).To(Equal(infrav1.WaitingForClusterOperationReason))

		By("pass A creates the Job it confirmed")
		startJob(createJob(m1, job))

		By("the cluster's next pass still waits for the machine's Job")
		res, err := cm.Acquire(ctx, request(cluster, 1, infrav1.OperationApply))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Acquired).To(BeFalse(), "the cluster's apply would run next to machine Job %s (I5); the machine's run lease names %q", job, holderOf(ns, m1.RunLeaseName()))
		Expect(res.Wait.Jobs).To(Equal([]string{job}))
		Expect(holderOf(ns, m1.RunLeaseName())).To(Equal(job), "the running Job's hold stays")
	})

	It("gives back a hold it took itself, and lets a refreshed hold no Job comes for lapse after the grace", func() {
		ns := newNamespace()
		clk := fakeClock()
		m, cm, hooked := newManager(clk, true), newManager(clk, true), newHookedManager(clk, true)
		cluster, m1, m2, m3 := clusterOwner(ns), machineOwner(ns, "m1"), machineOwner(ns, "m2"), machineOwner(ns, "m3")
		clusterBeforeTheWrite := func(n int, after bool) {
			if n == 1 && !after {
				res, err := cm.Acquire(ctx, request(cluster, 1, infrav1.OperationApply))
				Expect(err).NotTo(HaveOccurred())
				Expect(res.Wait.Jobs).To(Equal([]string{jobName(m1, 1)}))
			}
		}

		By("a pass of m1 takes its hold and stops before its Job (a conflict on block-move, say)")
		Expect(m.Acquire(ctx, request(m1, 1, infrav1.OperationApply))).To(HaveField("Acquired", true))
		By("m2's run 1 ended; its run lease still names that Job")
		Expect(m.Acquire(ctx, request(m2, 1, infrav1.OperationApply))).To(HaveField("Acquired", true))
		finishJob(createJob(m2, jobName(m2, 1)), true)

		for _, c := range []struct {
			what string
			req  runlease.Request
		}{
			{"m3 creates its run lease", request(m3, 1, infrav1.OperationApply)},
			{"m2 takes its run lease over from its finished Job", request(m2, 2, infrav1.OperationApply)},
		} {
			By(c.what + " after its look and the cluster's write: it gives the hold back")
			hooked.setHook(clusterBeforeTheWrite)
			res, err := hooked.Acquire(ctx, c.req)
			Expect(err).NotTo(HaveOccurred())
			hooked.noHook()
			Expect(res.Wait.Reason).To(Equal(infrav1.WaitingForClusterOperationReason))
			Expect(getLease(ns, c.req.Owner.RunLeaseName())).To(BeNil(), "a hold this pass took is given back")
			Expect(cm.Release(ctx, cluster, jobName(cluster, 1))).To(HaveLen(2), "the cluster's pass gives up (its inputs changed, say)")
		}

		By("a second pass of m1 refreshes m1's hold after the cluster's write: it keeps the hold and waits")
		clk.Step(10 * time.Second)
		hooked.setHook(clusterBeforeTheWrite)
		res, err := hooked.Acquire(ctx, request(m1, 1, infrav1.OperationApply))
		Expect(err).NotTo(HaveOccurred())
		hooked.noHook()
		Expect(res.Wait.Reason).To(Equal(infrav1.WaitingForClusterOperationReason))
		Expect(holderOf(ns, m1.RunLeaseName())).To(Equal(jobName(m1, 1)), "a refreshed hold is kept")

		By("no Job of m1 comes: once the grace is over the cluster proceeds")
		Expect(cm.Acquire(ctx, request(cluster, 1, infrav1.OperationApply))).To(HaveField("Wait.Jobs", []string{jobName(m1, 1)}))
		clk.Step(runlease.DefaultOptions().Grace + time.Second)
		Expect(cm.Acquire(ctx, request(cluster, 1, infrav1.OperationApply))).To(HaveField("Acquired", true))
	})
})
