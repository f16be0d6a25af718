package runlease_test

import (
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
)

var _ = Describe("The seed's known gap, closed by Job names that do not change while an object waits", func() {
	It("lets a waiting cluster whose inputs changed proceed at once under the same name, and nothing else", func() {
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

		By("the inputs change to B while it waits; the name is still X: it depends on the suffix and run-seq only")
		Expect(naming.JobName(cluster.Suffix(), seq)).To(Equal(x))

		By("the machine's apply ends; the next pass requests X again and proceeds with no clock advance")
		finishJob(mj, true)
		before := clk.Now()
		res, err = engine.Acquire(ctx, runlease.Request{Owner: cluster, Holder: x, Operation: infrav1.OperationApply})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Acquired).To(BeTrue())
		Expect(clk.Now()).To(Equal(before))

		By("a stale pass (run-seq 4 from a lagging cache) under another name Y cannot acquire")
		y := naming.JobName(cluster.Suffix(), seq-1)
		res, err = stale.Acquire(ctx, runlease.Request{Owner: cluster, Holder: y, Operation: infrav1.OperationApply})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Acquired).To(BeFalse())
		Expect(res.Wait.Reason).To(Equal(infrav1.WaitingForRunLeaseReason))
		Expect(res.Wait.Jobs).To(Equal([]string{x}))

		By("two attempts at X (inputs A and inputs B) create it concurrently: exactly one Job exists")
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, hash := range []string{"inputs-a", "inputs-b"} {
			c := newClient()
			wg.Go(func() {
				j := jobSpec(cluster, x)
				j.Annotations = map[string]string{infrav1.InputsHashAnnotation: hash}
				errs[i] = c.Create(ctx, j)
			})
		}
		wg.Wait()
		created, exists := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				created++
			case apierrors.IsAlreadyExists(err):
				exists++
			default:
				Expect(err).NotTo(HaveOccurred())
			}
		}
		Expect([]int{created, exists}).To(Equal([]int{1, 1}))
		Expect(jobCount(ns)).To(Equal(2), "the machine's Job and one Job X")

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
