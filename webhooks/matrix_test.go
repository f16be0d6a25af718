package webhooks_test

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// Outcomes of one cell of the matrix.
const (
	outDenied  = "denied by the guard"
	outAllowed = "allowed"
	outNoSMP   = "415: API server refuses SMP"
)

// attempt removes m with how and says what happened, checking the object afterwards.
func attempt(kind, ns, name string, m mark, how method) (string, error) {
	err := remove(ctx, admin, kind, ns, name, m, how)
	still, gerr := hasMark(ctx, admin, kind, ns, name, m)
	if gerr != nil {
		return "", gerr
	}
	switch {
	case err == nil && !still:
		return outAllowed, nil
	case apierrors.IsUnsupportedMediaType(err) && still:
		return outNoSMP, err
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "CAPTF guard") && still:
		return outDenied, err
	case err == nil:
		return "", fmt.Errorf("the write succeeded but %s is still there", m)
	}
	return "", fmt.Errorf("unexpected outcome (mark still there: %v): %w", still, err)
}

// outcome is attempt for specs that only need the outcome; an unexpected one fails the spec.
func outcome(kind, ns, name string, m mark, how method) string {
	GinkgoHelper()
	out, err := attempt(kind, ns, name, m, how)
	Expect(out).NotTo(BeEmpty(), "%v", err)
	return out
}

var _ = Describe("The guard, through the API server", func() {
	It("denies every way of removing block-move, the finalizer and status.activeJob while a Job runs, and allows them all once nothing runs", func() {
		type cell struct{ running, idle string }
		table := map[string]*cell{}
		var rows []string
		var sample string
		for _, kind := range guardedKinds {
			ns := newNamespace()
			plain := strings.ToLower(kind)
			create(kind, ns, plain)
			r, err := startRun(ctx, admin, kind, ns, plain, 1)
			Expect(err).NotTo(HaveOccurred())
			// The applier's object: created and written with server-side apply only.
			applied := plain + ssaSuffix
			Expect(createBySSA(ctx, admin, kind, ns, applied)).To(Succeed())
			rApplied, err := startRun(ctx, admin, kind, ns, applied, 1)
			Expect(err).NotTo(HaveOccurred())
			for _, state := range []string{"running", "idle"} {
				if state == "idle" {
					Expect(r.finish(ctx, admin)).To(Succeed())
					Expect(rApplied.finish(ctx, admin)).To(Succeed())
				}
				for _, m := range allMarks {
					for _, how := range allMethods {
						name, r := plain, r
						if how == methodSSA {
							name, r = applied, rApplied
						}
						key := fmt.Sprintf("%-20s %-9s %-26s", kind, m, how)
						if table[key] == nil {
							table[key] = &cell{}
							rows = append(rows, key)
						}
						Expect(ensureMark(ctx, admin, kind, ns, name, m, r.job.Name)).To(Succeed())
						out, err := attempt(kind, ns, name, m, how)
						Expect(out).NotTo(BeEmpty(), "%s %s: %v", key, state, err)
						want := outDenied
						if state == "idle" {
							want = outAllowed
						}
						if how == methodSMP {
							want = outNoSMP
						}
						Expect(out).To(Equal(want), "%s while %s: %v", key, state, err)
						if state == "running" {
							table[key].running = out
							if out == outDenied {
								Expect(err.Error()).To(ContainSubstring("Job " + r.job.Name))
								Expect(err.Error()).To(ContainSubstring("run lease " + r.owner.RunLeaseName()))
								Expect(err.Error()).To(ContainSubstring("kubectl -n " + ns + " delete job " + r.job.Name))
								if sample == "" {
									sample = err.Error()
								}
							}
						} else {
							table[key].idle = out
						}
					}
				}
			}
		}
		fmt.Printf("\nGuard matrix (block-move and the finalizer on the object, activeJob on /status):\n")
		fmt.Printf("%-58s | %-27s | %-27s\n", "kind / mark / method", "Job running", "nothing running")
		fmt.Printf("%s\n", strings.Repeat("-", 118))
		for _, k := range rows {
			fmt.Printf("%-58s | %-27s | %-27s\n", k, table[k].running, table[k].idle)
		}
		fmt.Printf("\nCustom resources do not support strategic merge patch: the API server answers 415 Unsupported Media Type\n" +
			"before admission, so an SMP can never remove a mark, whatever runs.\n")
		fmt.Printf("\nA denial as the client sees it:\n%s\n\n", sample)
	})

	It("never lets /status change metadata, and never lets the object's endpoint change status", func() {
		ns := newNamespace()
		create(infrav1.TerraformClusterKind, ns, "c")
		r, err := startRun(ctx, admin, infrav1.TerraformClusterKind, ns, "c", 1)
		Expect(err).NotTo(HaveOccurred())
		for _, m := range allMarks {
			Expect(ensureMark(ctx, admin, infrav1.TerraformClusterKind, ns, "c", m, r.job.Name)).To(Succeed())
		}
		o := u(infrav1.TerraformClusterKind, ns, "c")
		By("a /status patch that drops block-move and the finalizer: the API server keeps the object's metadata")
		Expect(admin.Status().Patch(ctx, o, client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"clusterctl.cluster.x-k8s.io/block-move":null},"finalizers":null}}`)))).To(Succeed())
		By("a patch of the object that drops status.activeJob: the API server keeps the status")
		Expect(admin.Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(`{"status":{"activeJob":null}}`)))).To(Succeed())
		for _, m := range allMarks {
			Expect(hasMark(ctx, admin, infrav1.TerraformClusterKind, ns, "c", m)).To(BeTrue(), "%s", m)
		}
	})

	It("denies while the run lease is inside the grace and its Job is not created yet, and allows once the grace has passed", func() {
		ns := newNamespace()
		create(infrav1.TerraformMachineKind, ns, "m")
		r, err := takeLease(ctx, admin, infrav1.TerraformMachineKind, ns, "m", 7)
		Expect(err).NotTo(HaveOccurred())
		Expect(ensureMark(ctx, admin, infrav1.TerraformMachineKind, ns, "m", markBlockMove, "")).To(Succeed())

		out, err := attempt(infrav1.TerraformMachineKind, ns, "m", markBlockMove, methodMerge)
		Expect(out).To(Equal(outDenied))
		Expect(err.Error()).To(ContainSubstring("run lease " + r.owner.RunLeaseName() + " names Job " + r.job.Name))
		Expect(err.Error()).To(ContainSubstring("may still be created until"))
		out, err = attempt(infrav1.TerraformMachineKind, ns, "m", markFinalizer, methodJSON)
		Expect(out).To(Equal(outDenied), "%v", err)

		By("ageing the lease past the grace (1 minute): no Job appeared, so the lease is free")
		Expect(ageLease(ctx, mgrClient, ns, r.owner.RunLeaseName(), 2*60)).To(Succeed())
		Expect(outcome(infrav1.TerraformMachineKind, ns, "m", markBlockMove, methodMerge)).To(Equal(outAllowed))
	})

	It("judges the Job named by the old status.activeJob even without a lease, down to its pods", func() {
		ns := newNamespace()
		create(infrav1.TerraformMachinePoolKind, ns, "p")
		r, err := startRun(ctx, admin, infrav1.TerraformMachinePoolKind, ns, "p", 3)
		Expect(err).NotTo(HaveOccurred())
		Expect(ensureMark(ctx, admin, infrav1.TerraformMachinePoolKind, ns, "p", markActiveJob, r.job.Name)).To(Succeed())
		By("the run lease gone (the manager deleted it): only status.activeJob names the Job")
		Expect(mgrClient.Delete(ctx, leaseOf(ns, r.owner.RunLeaseName()))).To(Succeed())

		By("the Job runs: clearing activeJob is denied")
		out, err := attempt(infrav1.TerraformMachinePoolKind, ns, "p", markActiveJob, methodMerge)
		Expect(out).To(Equal(outDenied))
		Expect(err.Error()).To(ContainSubstring("Job " + r.job.Name + " (Apply) named by status.activeJob runs"))

		By("the Job finished but its pod has not terminated: still denied")
		r.job.Status.Conditions = append(r.job.Status.Conditions, jobComplete()...)
		r.job.Status.Active = 0
		r.job.Status.Succeeded = 1
		now := metav1.Now()
		r.job.Status.CompletionTime = &now
		Expect(admin.Status().Update(ctx, r.job)).To(Succeed())
		out, err = attempt(infrav1.TerraformMachinePoolKind, ns, "p", markActiveJob, methodJSON)
		Expect(out).To(Equal(outDenied))
		Expect(err.Error()).To(ContainSubstring(r.pod.Name + " are not terminated"))
		Expect(ensureMark(ctx, admin, infrav1.TerraformMachinePoolKind, ns, "p", markBlockMove, "")).To(Succeed())
		Expect(outcome(infrav1.TerraformMachinePoolKind, ns, "p", markBlockMove, methodUpdate)).To(Equal(outDenied))

		By("the pod terminated: allowed")
		r.pod.Status.Phase = corev1.PodSucceeded
		Expect(admin.Status().Update(ctx, r.pod)).To(Succeed())
		Expect(outcome(infrav1.TerraformMachinePoolKind, ns, "p", markActiveJob, methodJSON)).To(Equal(outAllowed))
	})

	It("guards the manager's own namespace and kube-system like any other: no namespace is exempt", func() {
		for _, ns := range []string{"captf-system", "kube-system"} {
			if ns == "captf-system" {
				Expect(client.IgnoreAlreadyExists(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
			}
			create(infrav1.TerraformClusterKind, ns, "guarded")
			r, err := startRun(ctx, admin, infrav1.TerraformClusterKind, ns, "guarded", 1)
			Expect(err).NotTo(HaveOccurred())
			Expect(ensureMark(ctx, admin, infrav1.TerraformClusterKind, ns, "guarded", markBlockMove, "")).To(Succeed())
			before, err := webhookCalls(webhooks.GuardPath)
			Expect(err).NotTo(HaveOccurred())
			out, err := attempt(infrav1.TerraformClusterKind, ns, "guarded", markBlockMove, methodMerge)
			Expect(out).To(Equal(outDenied), "namespace %s: %v", ns, err)
			Expect(err.Error()).To(ContainSubstring("Job " + r.job.Name))
			Expect(webhookCalls(webhooks.GuardPath)).To(Equal(before+1), "namespace %s reaches the guard", ns)
			leaseBefore, err := webhookCalls(webhooks.LeaseGuardPath)
			Expect(err).NotTo(HaveOccurred())
			err = admin.Delete(ctx, leaseOf(ns, r.owner.RunLeaseName()))
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "namespace %s: %v", ns, err)
			Expect(webhookCalls(webhooks.LeaseGuardPath)).To(Equal(leaseBefore+1), "namespace %s reaches the lease guard", ns)
			Expect(r.finish(ctx, admin)).To(Succeed())
		}
		By("kube-system's own Leases (leader election) never reach the lease guard")
		before, err := webhookCalls(webhooks.LeaseGuardPath)
		Expect(err).NotTo(HaveOccurred())
		le := objects.Lease("kube-system", "kube-controller-manager").Holder("node-1").Obj()
		Expect(client.IgnoreAlreadyExists(admin.Create(ctx, le))).To(Succeed())
		Expect(admin.Patch(ctx, le, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"holderIdentity":"node-2"}}`)))).To(Succeed())
		Expect(admin.Delete(ctx, le)).To(Succeed())
		Expect(webhookCalls(webhooks.LeaseGuardPath)).To(Equal(before))
	})
})
