package runlease_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
)

// Job names come from the object's run sequence, never from its inputs: a cluster whose inputs
// change while it waits at the gate keeps asking for the same holder, and a stale pass that
// rebuilds an older name is refused.
var _ = Describe("A waiting cluster keeps one Job name while its inputs change", func() {
	It("proceeds under that name once the machine apply ends, and refuses any other name while it runs", func() {
		ns := newNamespace()
		clk := fakeClock()
		cluster, m1 := clusterOwner(ns), machineOwner(ns, "m1")
		engine, stale, machines := newManager(clk, true), newManager(clk, true), newManager(clk, true)

		By("a machine apply runs")
		Expect(machines.Acquire(ctx, request(m1, 1, infrav1.OperationApply))).To(HaveField("Acquired", true))
		mj := createJob(m1, jobName(m1, 1))
		startJob(mj)

		By("the cluster (run-seq 5, inputs A) waits for it, holding both leases as X")
		const seq = 5
		x := naming.JobName(cluster.Suffix(), seq)
		res, err := engine.Acquire(ctx, runlease.Request{Owner: cluster, Holder: x, Operation: infrav1.OperationApply})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Wait.Reason).To(Equal(infrav1.WaitingForMachineOperationsReason))
		Expect(holderOf(ns, cluster.RunLeaseName())).To(Equal(x))
		Expect(holderOf(ns, cluster.ClusterLeaseName())).To(Equal(x))

		By("the inputs change while it waits; the machine's apply ends; the next pass requests X again and proceeds")
		finishJob(mj, true)
		res, err = engine.Acquire(ctx, runlease.Request{Owner: cluster, Holder: x, Operation: infrav1.OperationApply})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Acquired).To(BeTrue())

		By("a stale pass (run-seq 4 from a lagging cache) under another name Y cannot acquire")
		y := naming.JobName(cluster.Suffix(), seq-1)
		res, err = stale.Acquire(ctx, runlease.Request{Owner: cluster, Holder: y, Operation: infrav1.OperationApply})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Acquired).To(BeFalse())
		Expect(res.Wait.Reason).To(Equal(infrav1.WaitingForRunLeaseReason))
		Expect(res.Wait.Jobs).To(Equal([]string{x}))

		By("X is created")
		createJob(cluster, x)

		By("while X runs, Y still cannot acquire, past the grace as well, and machine applies wait")
		startJob(jobByName(ns, x))
		clk.Step(5 * time.Minute)
		res, err = stale.Acquire(ctx, runlease.Request{Owner: cluster, Holder: y, Operation: infrav1.OperationApply})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Acquired).To(BeFalse())
		res, err = machines.Acquire(ctx, request(m1, 2, infrav1.OperationApply))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Wait.Reason).To(Equal(infrav1.WaitingForClusterOperationReason))
	})
})
