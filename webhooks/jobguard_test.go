package webhooks_test

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// jobOf reads a Job.
func jobOf(ns, name string) *batchv1.Job {
	GinkgoHelper()
	j := &batchv1.Job{}
	Expect(admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, j)).To(Succeed())
	return j
}

// patchJob writes a JSON merge patch to a Job.
func patchJob(c client.Client, ns, name, body string) error {
	return c.Patch(ctx, objects.Job(ns, name).Obj(), client.RawPatch(types.MergePatchType, []byte(body)))
}

var _ = Describe("The Job guard", func() {
	It("refuses changing a managed Job's CAPTF labels or controller owner reference, except to the manager, an override member and the garbage collector's orphaning", func() {
		dev, _ := userClient("dev-jobs", "devs")
		oncall, _ := userClient("oncall-jobs", breakGlassGroup)
		gc, _ := userClient(webhooks.GarbageCollectorUsers[0], "gc-test")
		ns := newNamespace()
		kind := infrav1.TerraformMachineKind
		create(kind, ns, "m")
		r, err := startRun(ctx, admin, kind, ns, "m", 1)
		Expect(err).NotTo(HaveOccurred())
		job := r.job.Name

		edits := []struct{ what, body string }{
			{"change captf.io/owner-name", `{"metadata":{"labels":{"captf.io/owner-name":"other"}}}`},
			{"change captf.io/owner-kind", `{"metadata":{"labels":{"captf.io/owner-kind":"TerraformCluster"}}}`},
			{"remove captf.io/managed", `{"metadata":{"labels":{"captf.io/managed":null}}}`},
			{"change captf.io/operation", `{"metadata":{"labels":{"captf.io/operation":"Plan"}}}`},
			{"remove cluster.x-k8s.io/cluster-name", `{"metadata":{"labels":{"cluster.x-k8s.io/cluster-name":null}}}`},
			// The API server defaults an empty label map from the pod template: keep one label.
			{"strip every CAPTF label", `{"metadata":{"labels":{"captf.io/managed":null,"captf.io/owner-kind":null,"captf.io/owner-name":null,"captf.io/operation":null,"cluster.x-k8s.io/cluster-name":null,"team":"infra"}}}`},
			{"remove the owner references", `{"metadata":{"ownerReferences":null}}`},
			{"point the controller reference elsewhere", fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":%q,"kind":"TerraformMachine","name":"other","uid":"00000000-0000-0000-0000-000000000001","controller":true}]}}`, infrav1.GroupVersion.String())},
		}
		fmt.Printf("\nJob guard, on running Job %s:\n", job)
		sample := ""
		for _, e := range edits {
			before := jobOf(ns, job)
			err := patchJob(dev, ns, job, e.body)
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", e.what, err)
			Expect(err.Error()).To(ContainSubstring(`admission webhook "job-guard.captf.io" denied the request`))
			Expect(err.Error()).To(ContainSubstring("which CAPTF runs for TerraformMachine " + ns + "/m"))
			Expect(jobOf(ns, job).ResourceVersion).To(Equal(before.ResourceVersion), "%s: a denied write changed the Job", e.what)
			fmt.Printf("  %-42s plain user: denied\n", e.what)
			if sample == "" {
				sample = err.Error()
			}
		}

		By("other labels and annotations never reach the guard")
		before, err := webhookCalls(webhooks.JobGuardPath)
		Expect(err).NotTo(HaveOccurred())
		Expect(patchJob(dev, ns, job, `{"metadata":{"labels":{"team":"infra"},"annotations":{"note":"x"}}}`)).To(Succeed())
		Expect(webhookCalls(webhooks.JobGuardPath)).To(Equal(before))
		fmt.Printf("  %-42s plain user: allowed, guard not called\n", "add another label and an annotation")

		By("an override member with a reason set in the request: allowed and recorded")
		err = patchJob(oncall, ns, job, `{"metadata":{"labels":{"captf.io/operation":"Plan"}}}`)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a member without a reason: %v", err)
		Expect(patchJob(oncall, ns, job, `{"metadata":{"labels":{"captf.io/operation":"Plan"},"annotations":{"captf.io/guard-override-reason":"INC-9: relabel"}}}`)).To(Succeed())
		Eventually(func() []eventsv1.Event { return overrideEvents(ns, job) }).Should(HaveLen(1))
		fmt.Printf("  %-42s override member with a reason: allowed, Warning event\n", "change captf.io/operation")

		By("the manager itself: allowed")
		Expect(patchJob(mgrClient, ns, job, `{"metadata":{"labels":{"captf.io/operation":"Apply"}}}`)).To(Succeed())
		fmt.Printf("  %-42s manager: allowed\n", "change captf.io/operation back")

		By("the garbage collector may drop the owner reference (orphaning), and nothing else")
		err = patchJob(gc, ns, job, `{"metadata":{"labels":{"captf.io/owner-name":"other"}}}`)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(patchJob(gc, ns, job, `{"metadata":{"ownerReferences":null}}`)).To(Succeed())
		Expect(jobOf(ns, job).OwnerReferences).To(BeEmpty())
		fmt.Printf("  %-42s garbage collector: denied\n  %-42s garbage collector: allowed\n", "change captf.io/owner-name", "remove the owner references")

		By("adding CAPTF's labels to a Job that is not managed: the managed label makes it one, so it is refused")
		other := objects.Job(ns, "foreign").Label("team", "infra").With(func(j *batchv1.Job) {
			j.Spec = *r.job.Spec.DeepCopy()
			j.Spec.Selector, j.Spec.Template.Labels = nil, map[string]string{"team": "infra"}
		}).Obj()
		Expect(admin.Create(ctx, other)).To(Succeed())
		err = patchJob(dev, ns, "foreign", `{"metadata":{"labels":{"captf.io/managed":"true","captf.io/owner-kind":"TerraformMachine","captf.io/owner-name":"m"}}}`)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)

		By("deleting a managed Job stays allowed, with every propagation policy")
		Expect(dev.Delete(ctx, jobOf(ns, job), client.PropagationPolicy(metav1.DeletePropagationOrphan))).To(Succeed())
		fmt.Printf("  %-42s plain user: allowed\n\nA denial as the client sees it:\n%s\n\n", "delete the Job (--cascade=orphan)", sample)
		Expect(strings.Contains(sample, "deleting is always allowed")).To(BeTrue())
	})

	It("keeps a running Job whose owner labels the manager stripped its object's, by its controller owner reference, and lets go once it ended", func() {
		ns := newNamespace()
		kind := infrav1.TerraformMachineKind
		create(kind, ns, "m")
		r, err := startRun(ctx, admin, kind, ns, "m", 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(ensureMark(ctx, admin, kind, ns, "m", markBlockMove, "")).To(Succeed())
		By("the manager, the one identity still allowed, strips the Job's CAPTF labels; the lease is past its grace")
		Expect(patchJob(mgrClient, ns, r.job.Name, `{"metadata":{"labels":{"captf.io/managed":null,"captf.io/owner-kind":null,"captf.io/owner-name":null,"captf.io/operation":null,"cluster.x-k8s.io/cluster-name":null,"team":"infra"}}}`)).To(Succeed())
		Expect(jobOf(ns, r.job.Name).Labels).NotTo(HaveKey(infrav1.OwnerNameLabel))
		Expect(ageLease(ctx, mgrClient, ns, r.owner.RunLeaseName(), 10*60)).To(Succeed())

		By("while it runs, its object keeps block-move and its lease stays")
		out, err := attempt(kind, ns, "m", markBlockMove, methodMerge)
		Expect(out).To(Equal(outDenied), "%v", err)
		Expect(err.Error()).To(ContainSubstring("Job " + r.job.Name))
		err = admin.Delete(ctx, leaseOf(ns, r.owner.RunLeaseName()))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)

		By("once it ended, nothing holds the object")
		r.job = jobOf(ns, r.job.Name)
		Expect(r.finish(ctx, admin)).To(Succeed())
		Expect(outcome(kind, ns, "m", markBlockMove, methodMerge)).To(Equal(outAllowed))
	})
})
