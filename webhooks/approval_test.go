package webhooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// planRecord is a pending plan as the controller records it.
func planRecord(id string, create, replace int32) *infrav1.PlanRecord {
	return &infrav1.PlanRecord{ID: id, Job: "captf-0123456789abcdef-2", InputsHash: "sha256:2", Serial: 3,
		Lineage: "00000000-0000-4000-8000-000000000000", Create: create, Replace: replace,
		Addresses: []string{"terraform_data.slow"}, Reason: string(infrav1.ApplyPolicyManual), Created: time.Now().UTC().Truncate(time.Second)}
}

// annotate writes annotations (nil values remove them) with a JSON merge patch as c.
func annotate(c client.Client, kind, ns, name string, ann map[string]any, opts ...client.PatchOption) error {
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	Expect(err).NotTo(HaveOccurred())
	return c.Patch(ctx, u(kind, ns, name), client.RawPatch(types.MergePatchType, b), opts...)
}

// recordPending plays the controller: the manager writes the pending-plan record.
func recordPending(kind, ns, name string, rec *infrav1.PlanRecord) {
	GinkgoHelper()
	Expect(annotate(mgrClient, kind, ns, name, map[string]any{infrav1.PendingPlanAnnotation: rec.Annotation()})).To(Succeed())
}

// approve sets captf.io/approve-plan=id as c.
func approve(c client.Client, kind, ns, name, id string, opts ...client.PatchOption) error {
	return annotate(c, kind, ns, name, map[string]any{infrav1.ApprovePlanAnnotation: id}, opts...)
}

// approvalOf reads the object's captf.io/approve-plan ("" when unset).
func approvalOf(kind, ns, name string) string {
	GinkgoHelper()
	o := u(kind, ns, name)
	Expect(admin.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
	return o.GetAnnotations()[infrav1.ApprovePlanAnnotation]
}

// approvedEvents lists the PlanApproved events about name in ns.
func approvedEvents(ns, name string) []eventsv1.Event {
	GinkgoHelper()
	list := &eventsv1.EventList{}
	Expect(admin.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Reason == webhooks.PlanApprovedReason && e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// deniedByPolicy reports whether err is the plan-approval policy's denial.
func deniedByPolicy(err error) bool {
	return err != nil && apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy.Policy.Name+"'")
}

// deniedByGuard reports whether err is the guard webhook's denial.
func deniedByGuard(err error) bool {
	return err != nil && strings.Contains(err.Error(), `admission webhook "guard.captf.io" denied the request`)
}

var _ = Describe("Plan approval", func() {
	It("lets an approver approve the pending plan (a PlanApproved event names them), and refuses other users and other IDs", func() {
		waitForPolicy()
		alice, _ := userClient("alice", approverGroup)
		dev, _ := userClient("dev-plans", "devs")
		ns := newNamespace()
		kind := infrav1.TerraformClusterKind
		create(kind, ns, "c")

		By("no plan waits: even an approver's approval is refused")
		err := approve(alice, kind, ns, "c", "0123456789abcdef0123456789abcdef")
		Expect(deniedByGuard(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("no plan waits for approval"))

		first := planRecord("11111111111111111111111111111111", 1, 1)
		recordPending(kind, ns, "c", first)

		By("a user outside the approver groups is refused (the policy answers first, before the webhook)")
		err = approve(dev, kind, ns, "c", first.ID)
		Expect(deniedByPolicy(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("dev-plans may not set captf.io/approve-plan: only members of the groups " + approverGroup + " may"))
		fmt.Printf("\nNon-approver, policy's denial: %v\n", err)

		By("an approver naming another ID is refused, told the pending plan's ID")
		err = approve(alice, kind, ns, "c", "22222222222222222222222222222222")
		Expect(deniedByGuard(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("the plan that waits for approval is " + first.ID + " (create 1, update 0, replace 1, delete 0)"))
		fmt.Printf("Wrong ID: %v\n", err)

		By("a dry-run approval records no event")
		Expect(approve(alice, kind, ns, "c", first.ID, client.DryRunAll)).To(Succeed())
		Expect(approvalOf(kind, ns, "c")).To(BeEmpty())
		Consistently(func() []eventsv1.Event { return approvedEvents(ns, "c") }, time.Second).Should(BeEmpty())

		By("the approver approves the pending plan: allowed, and a Normal PlanApproved event names them")
		Expect(approve(alice, kind, ns, "c", first.ID)).To(Succeed())
		Expect(approvalOf(kind, ns, "c")).To(Equal(first.ID))
		Eventually(func() []eventsv1.Event { return approvedEvents(ns, "c") }).Should(HaveLen(1))
		ev := approvedEvents(ns, "c")[0]
		Expect(ev.Type).To(Equal(corev1.EventTypeNormal))
		Expect(ev.Note).To(Equal("plan " + first.ID + " (create 1, update 0, replace 1, delete 0) approved by alice: terraform_data.slow"))
		Expect(ev.Regarding.Kind).To(Equal(kind))
		fmt.Printf("Approval event: %s %s on %s/%s: %s\n", ev.Type, ev.Reason, ev.Regarding.Kind, ev.Regarding.Name, ev.Note)

		By("the controller applies it (applied-plan set, pending and approval removed); inputs change twice; the first ID is refused")
		Expect(annotate(mgrClient, kind, ns, "c", map[string]any{infrav1.AppliedPlanAnnotation: first.ID,
			infrav1.PendingPlanAnnotation: nil, infrav1.ApprovePlanAnnotation: nil})).To(Succeed())
		second := planRecord("33333333333333333333333333333333", 1, 0)
		recordPending(kind, ns, "c", second)
		third := planRecord("44444444444444444444444444444444", 2, 0)
		recordPending(kind, ns, "c", third)
		for _, old := range []string{first.ID, second.ID} {
			err = approve(alice, kind, ns, "c", old)
			Expect(deniedByGuard(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring("the plan that waits for approval is " + third.ID))
		}
		Expect(approve(alice, kind, ns, "c", third.ID)).To(Succeed())
		Eventually(func() []eventsv1.Event { return approvedEvents(ns, "c") }).Should(HaveLen(2))

		By("an unrelated edit of an approved object is not judged again")
		Expect(annotate(alice, kind, ns, "c", map[string]any{"note": "unrelated"})).To(Succeed())
		fmt.Println()
	})

	It("lets only the manager set, change or remove the controller's plan records", func() {
		alice, _ := userClient("alice-records", approverGroup)
		dev, _ := userClient("dev-records", "devs")
		ns := newNamespace()
		for _, kind := range guardedKinds {
			create(kind, ns, "o")
			rec := planRecord("55555555555555555555555555555555", 0, 1)
			for _, c := range []struct {
				who  string
				cl   client.Client
				what string
				ann  map[string]any
			}{
				{"dev", dev, "sets pending-plan", map[string]any{infrav1.PendingPlanAnnotation: rec.Annotation()}},
				{"an approver", alice, "sets pending-plan", map[string]any{infrav1.PendingPlanAnnotation: rec.Annotation()}},
				{"dev", dev, "sets applied-plan", map[string]any{infrav1.AppliedPlanAnnotation: rec.ID}},
				{"an approver", alice, "sets applied-plan", map[string]any{infrav1.AppliedPlanAnnotation: rec.ID}},
				{"an admin", admin, "sets applied-plan", map[string]any{infrav1.AppliedPlanAnnotation: rec.ID}},
			} {
				err := annotate(c.cl, kind, ns, "o", c.ann)
				Expect(deniedByGuard(err)).To(BeTrue(), "%s %s on a %s: %v", c.who, c.what, kind, err)
				Expect(err.Error()).To(ContainSubstring("only the CAPTF manager may write them"))
			}

			By("the manager writes both records")
			Expect(annotate(mgrClient, kind, ns, "o", map[string]any{infrav1.PendingPlanAnnotation: rec.Annotation(),
				infrav1.AppliedPlanAnnotation: "66666666666666666666666666666666"})).To(Succeed())

			By("nobody else changes or removes them, with every way of writing")
			for _, ann := range []map[string]any{
				{infrav1.PendingPlanAnnotation: nil},
				{infrav1.AppliedPlanAnnotation: nil},
				{infrav1.AppliedPlanAnnotation: rec.ID},
				{infrav1.PendingPlanAnnotation: planRecord(rec.ID, 0, 0).Annotation()},
			} {
				for _, cl := range []client.Client{dev, alice, admin} {
					err := annotate(cl, kind, ns, "o", ann)
					Expect(deniedByGuard(err)).To(BeTrue(), "%v on a %s: %v", ann, kind, err)
				}
			}
			o := u(kind, ns, "o")
			Expect(admin.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			ann := o.GetAnnotations()
			delete(ann, infrav1.PendingPlanAnnotation)
			o.SetAnnotations(ann)
			err := admin.Update(ctx, o)
			Expect(deniedByGuard(err)).To(BeTrue(), "an update (PUT) that drops pending-plan: %v", err)
			err = admin.Patch(ctx, u(kind, ns, "o"), client.RawPatch(types.JSONPatchType,
				[]byte(`[{"op":"remove","path":"/metadata/annotations/captf.io~1applied-plan"}]`)))
			Expect(deniedByGuard(err)).To(BeTrue(), "a JSON patch that removes applied-plan: %v", err)

			By("the manager changes and removes them")
			Expect(annotate(mgrClient, kind, ns, "o", map[string]any{infrav1.PendingPlanAnnotation: nil,
				infrav1.AppliedPlanAnnotation: rec.ID})).To(Succeed())
		}
	})

	It("lets nobody approve when no approver group is configured (the webhook's own group rule)", func() {
		waitForPolicy()
		alice, _ := userClient("alice-none", approverGroup)
		ns := newNamespace()
		kind := infrav1.TerraformMachineKind
		create(kind, ns, "m")
		rec := planRecord("77777777777777777777777777777777", 0, 1)
		recordPending(kind, ns, "m", rec)

		By("the webhook manager runs without --plan-approver-groups; the policy's ConfigMap still names alice's group")
		restartHooksWith(hookOptions{overrideGroups: []string{breakGlassGroup}})
		DeferCleanup(restartHooks)
		for _, c := range []client.Client{alice, admin} {
			err := approve(c, kind, ns, "m", rec.ID)
			if c == admin {
				// The admin is in no approver group: the policy refuses it first.
				Expect(deniedByPolicy(err)).To(BeTrue(), "%v", err)
				continue
			}
			Expect(deniedByGuard(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring("no approver group is configured, so nobody may approve a plan"))
			Expect(err.Error()).To(ContainSubstring("--plan-approver-groups"))
			fmt.Printf("\nNo approver group configured: %v\n\n", err)
		}
		Expect(approvalOf(kind, ns, "m")).To(BeEmpty())
	})
})

// policyStoppedObject prepares an object with a pending plan, written while the webhooks run.
func policyStoppedObject(kind, ns, name, id string) {
	GinkgoHelper()
	create(kind, ns, name)
	recordPending(kind, ns, name, planRecord(id, 0, 1))
}

var _ = Describe("The plan-approval policy", func() {
	It("holds the approver-group rule without the webhook, follows the ConfigMap, and refuses every update while the ConfigMap is missing", func() {
		waitForPolicy()
		alice, _ := userClient("alice-policy", approverGroup)
		dev, _ := userClient("dev-policy", "devs")
		ns := newNamespace()
		kind := infrav1.TerraformClusterKind
		for _, n := range []string{"a", "b", "c", "d"} {
			policyStoppedObject(kind, ns, n, "8888888888888888888888888888888"+n[:1])
		}
		id := func(n string) string { return "8888888888888888888888888888888" + n }

		By("the webhook server stopped: a non-approver is refused by the policy; an approver fails on the webhook (fail closed)")
		Expect(hooks.stop()).To(Succeed())
		hooks = nil
		DeferCleanup(restartHooks)
		err := approve(dev, kind, ns, "a", id("a"))
		Expect(deniedByPolicy(err)).To(BeTrue(), "%v", err)
		fmt.Printf("\nWebhook server stopped, non-approver: %v\n", err)
		err = approve(alice, kind, ns, "a", id("a"))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(`failed calling webhook "guard.captf.io"`))
		Expect(approvalOf(kind, ns, "a")).To(BeEmpty())
		fmt.Printf("Webhook server stopped, approver: failed calling webhook \"guard.captf.io\" (nothing is approved without the ID check)\n")

		By("the webhook configuration deleted: the policy alone still refuses a non-approver and lets an approver through")
		restartHooks()
		removeWebhookConfigurations()
		Eventually(func() error { return approve(dev, kind, ns, "a", id("a"), client.DryRunAll) }).Should(Satisfy(deniedByPolicy))
		Eventually(func() error { return approve(alice, kind, ns, "a", id("a"), client.DryRunAll) }).Should(Succeed())
		err = approve(dev, kind, ns, "a", id("a"))
		Expect(deniedByPolicy(err)).To(BeTrue(), "%v", err)
		fmt.Printf("No webhook configuration, non-approver: %v\n", err)
		Expect(approve(alice, kind, ns, "a", id("a"))).To(Succeed())
		Expect(approvalOf(kind, ns, "a")).To(Equal(id("a")))
		fmt.Printf("No webhook configuration, approver: allowed\n")

		By("the policy reads the groups from its ConfigMap: other groups, then none")
		cmNS := policy.ConfigMap.Namespace
		_, err = setup.SyncPlanApprovers(ctx, admin, cmNS, []string{"someone-else"}, true)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			_, err := setup.SyncPlanApprovers(ctx, admin, cmNS, []string{approverGroup}, true)
			Expect(err).NotTo(HaveOccurred())
		})
		// Dry runs while waiting: the API server reads the policy's ConfigMap through an informer,
		// so for a moment it may still judge by the old groups, and a real approve let through
		// then would approve "b" for good (every later request would change nothing to judge).
		Eventually(func() error { return approve(alice, kind, ns, "b", id("b"), client.DryRunAll) }).Should(Satisfy(deniedByPolicy))
		err = approve(alice, kind, ns, "b", id("b"))
		Expect(err.Error()).To(ContainSubstring("only members of the groups someone-else may"))
		_, err = setup.SyncPlanApprovers(ctx, admin, cmNS, nil, true)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() string {
			err := approve(alice, kind, ns, "b", id("b"), client.DryRunAll)
			if err == nil {
				return "allowed"
			}
			return err.Error()
		}).Should(ContainSubstring("no approver group is configured, so nobody may approve a plan"))
		fmt.Printf("ConfigMap without groups: %v\n", approve(alice, kind, ns, "b", id("b")))

		By("the ConfigMap missing: parameterNotFoundAction Deny refuses every update of the three kinds, approvals or not")
		cm := &corev1.ConfigMap{}
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: cmNS, Name: webhooks.PlanApproversConfigMap}, cm)).To(Succeed())
		Expect(admin.Delete(ctx, cm)).To(Succeed())
		Eventually(func() error { return annotate(admin, kind, ns, "c", map[string]any{"note": "x"}) }).Should(MatchError(ContainSubstring("no params found")))
		err = annotate(admin, kind, ns, "c", map[string]any{"note": "x"})
		fmt.Printf("ConfigMap missing, an unrelated annotation: %v\n", err)
		Expect(mergePatch(admin, kind, ns, "c", true, `{"status":{"observedGeneration":7}}`)).To(Succeed(), "status is not matched by the policy")

		By("the manager puts it back (at start, and every resync): updates pass again")
		restore := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cmNS, Name: webhooks.PlanApproversConfigMap}}
		Expect(admin.Create(ctx, restore)).To(Succeed())
		_, err = setup.SyncPlanApprovers(ctx, admin, cmNS, []string{approverGroup}, true)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() error { return annotate(admin, kind, ns, "c", map[string]any{"note": "y"}) }).Should(Succeed())
		Eventually(func() error { return approve(alice, kind, ns, "d", id("d")) }).Should(Succeed())
		fmt.Println()
	})

	It("is kept by the manager: written at start from --plan-approver-groups, put back when deleted, not rewritten while it holds other groups", func() {
		cmKey := types.NamespacedName{Namespace: policy.ConfigMap.Namespace, Name: webhooks.PlanApproversConfigMap}
		groupsOf := func() (string, error) {
			cm := &corev1.ConfigMap{}
			if err := admin.Get(ctx, cmKey, cm); err != nil {
				return "", err
			}
			return cm.Data[webhooks.PlanApproversKey], nil
		}
		DeferCleanup(func() {
			_, err := setup.SyncPlanApprovers(ctx, admin, cmKey.Namespace, []string{approverGroup}, true)
			Expect(err).NotTo(HaveOccurred())
		})
		start := func(groups ...string) func() {
			mgr, err := setup.New(rest.CopyConfig(mgrConfig), setup.Options{
				MetricsAddr: "0", ProbeAddr: "0", WatchNamespace: newNamespace(), Concurrency: 1,
				PlanApproverGroups: groups, ManagerServiceAccount: managerServiceAccount, PlanApproversResync: 200 * time.Millisecond,
				RunnerImage: "captf/manager:test", RuntimeImage: "captf/tofu:test",
			}, func(o *manager.Options) { o.Controller.SkipNameValidation = ptr.To(true) })
			Expect(err).NotTo(HaveOccurred())
			mctx, mcancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- mgr.Start(mctx) }()
			return func() {
				mcancel()
				Eventually(done).WithTimeout(30 * time.Second).Should(Receive(Not(HaveOccurred())))
			}
		}

		By("a manager started with --plan-approver-groups=' ops , sre' writes ops,sre")
		stop := start(" ops ", " sre", "")
		Eventually(groupsOf).Should(Equal("ops,sre"))

		By("deleted: put back within a resync")
		Expect(admin.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cmKey.Namespace, Name: cmKey.Name}})).To(Succeed())
		Eventually(groupsOf).Should(Equal("ops,sre"))

		By("changed by hand: left alone while the manager runs (no rollout flapping), set again by the next start")
		_, err := setup.SyncPlanApprovers(ctx, admin, cmKey.Namespace, []string{"by-hand"}, true)
		Expect(err).NotTo(HaveOccurred())
		Consistently(groupsOf, time.Second).Should(Equal("by-hand"))
		stop()
		stop = start("ops")
		Eventually(groupsOf).Should(Equal("ops"))
		stop()
	})
})

// removeWebhookConfigurations deletes every validating webhook configuration of
// the suite, and registers their restoration (then waits until the guard answers again).
func removeWebhookConfigurations() {
	GinkgoHelper()
	var vs admissionregistrationv1.ValidatingWebhookConfigurationList
	Expect(admin.List(ctx, &vs)).To(Succeed())
	var saved []client.Object
	for i := range vs.Items {
		v := vs.Items[i].DeepCopy()
		Expect(admin.Delete(ctx, v)).To(Succeed())
		v.ObjectMeta = metav1.ObjectMeta{Name: v.Name, Labels: v.Labels, Annotations: v.Annotations}
		saved = append(saved, v)
	}
	DeferCleanup(func() {
		for _, o := range saved {
			Expect(admin.Create(ctx, o)).To(Succeed())
		}
		// The guard answers again once the API server has the configuration back.
		ns := newNamespace()
		create(infrav1.TerraformClusterKind, ns, "probe")
		Eventually(func() error {
			return annotate(admin, infrav1.TerraformClusterKind, ns, "probe", map[string]any{infrav1.AppliedPlanAnnotation: "x"}, client.DryRunAll)
		}).Should(Satisfy(deniedByGuard))
	})
}
