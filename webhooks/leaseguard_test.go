package webhooks_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// leaseWrite is one way of changing a CAPTF Lease; patch is a JSON merge patch (nil deletes).
type leaseWrite struct {
	name  string
	patch func() map[string]any
}

func obj(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

var leaseWrites = []leaseWrite{
	{"holder", func() map[string]any { return obj("spec", obj("holderIdentity", "captf-forged-1")) }},
	{"duration", func() map[string]any { return obj("spec", obj("leaseDurationSeconds", 1)) }},
	{"renew time", func() map[string]any { return obj("spec", obj("renewTime", microAgo(2*time.Hour))) }},
	{"acquire time", func() map[string]any { return obj("spec", obj("acquireTime", microAgo(2*time.Hour))) }},
	{"remove captf.io/lease", func() map[string]any { return obj("metadata", obj("labels", obj(infrav1.LeaseLabel, nil))) }},
	{"relabel owner-name", func() map[string]any {
		return obj("metadata", obj("labels", obj(infrav1.OwnerNameLabel, "someone-else")))
	}},
	{"annotation", func() map[string]any { return obj("metadata", obj("annotations", obj("note", "edited"))) }},
	{"delete", func() map[string]any { return nil }},
}

func microAgo(d time.Duration) string {
	return time.Now().Add(-d).UTC().Format("2006-01-02T15:04:05.000000Z07:00")
}

// writeLease applies w to the lease as c; reason, when set, is added to the request (an
// override: on a deletion the reason is annotated first, in a request of its own).
func writeLease(c client.Client, l *coordinationv1.Lease, w leaseWrite, reason string) error {
	body := w.patch()
	if body == nil {
		if reason != "" {
			if err := c.Patch(ctx, l.DeepCopy(), client.RawPatch(types.MergePatchType,
				fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, infrav1.GuardOverrideReasonAnnotation, reason))); err != nil {
				return fmt.Errorf("annotate the reason: %w", err)
			}
		}
		return c.Delete(ctx, l.DeepCopy())
	}
	if reason != "" {
		meta, _ := body["metadata"].(map[string]any)
		if meta == nil {
			meta = obj()
			body["metadata"] = meta
		}
		ann, _ := meta["annotations"].(map[string]any)
		if ann == nil {
			ann = obj()
			meta["annotations"] = ann
		}
		ann[infrav1.GuardOverrideReasonAnnotation] = reason
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return c.Patch(ctx, l.DeepCopy(), client.RawPatch(types.MergePatchType, raw))
}

var _ = Describe("The Lease guard", func() {
	It("refuses every write of a live run or cluster Lease by a plain user, naming the Job; lets the manager and an override member through; allows all once nothing runs", func() {
		oncall, _ := userClient("oncall-leases", breakGlassGroup)
		dev, _ := userClient("dev-leases", "devs")
		type column struct {
			name    string
			c       client.Client
			running bool
			reason  bool
			want    string
		}
		columns := []column{
			{"plain user, Job running", dev, true, false, outDenied},
			{"manager, Job running", mgrClient, true, false, outAllowed},
			{"override member, Job running", oncall, true, true, outAllowed},
			{"plain user, nothing running", dev, false, false, outAllowed},
		}
		leases := []struct{ kind, short, lease string }{
			{infrav1.TerraformMachineKind, "m", "run"},
			{infrav1.TerraformClusterKind, "c", "cluster"},
		}
		table := map[string][]string{}
		var rows []string
		sample := ""
		seq := 0
		for _, lk := range leases {
			ns := newNamespace()
			for _, w := range leaseWrites {
				row := fmt.Sprintf("%-7s lease: %-22s", lk.lease, w.name)
				rows = append(rows, row)
				for _, col := range columns {
					seq++
					name := fmt.Sprintf("%s%d", lk.short, seq)
					create(lk.kind, ns, name)
					r, err := startRun(ctx, admin, lk.kind, ns, name, 1)
					Expect(err).NotTo(HaveOccurred())
					if !col.running {
						Expect(r.finish(ctx, admin)).To(Succeed())
					}
					leaseName := r.owner.RunLeaseName()
					if lk.lease == "cluster" {
						leaseName = r.owner.ClusterLeaseName()
					}
					l := leaseOf(ns, leaseName)
					before, err := webhookCalls(webhooks.LeaseGuardPath)
					Expect(err).NotTo(HaveOccurred())
					reason := ""
					if col.reason {
						reason = fmt.Sprintf("INC-%d: %s", seq, w.name)
					}
					err = writeLease(col.c, l, w, reason)
					got := outAllowed
					if err != nil {
						Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s / %s: %v", row, col.name, err)
						Expect(err.Error()).To(ContainSubstring(`admission webhook "lease-guard.captf.io" denied the request`))
						got = outDenied
					}
					Expect(got).To(Equal(col.want), "%s / %s: %v", row, col.name, err)
					Expect(webhookCalls(webhooks.LeaseGuardPath)).To(BeNumerically(">", before), "%s / %s: the lease guard was not asked", row, col.name)
					if got == outDenied {
						Expect(err.Error()).To(ContainSubstring("its holder Job " + r.job.Name + " (Apply) of " + lk.kind + " " + ns + "/" + name + " runs"))
						Expect(err.Error()).To(ContainSubstring("kubectl -n " + ns + " delete job " + r.job.Name))
						Expect(leaseOf(ns, leaseName).ResourceVersion).To(Equal(l.ResourceVersion), "a denied write changed nothing")
						if sample == "" && w.name == "duration" {
							sample = err.Error()
						}
					}
					if col.reason {
						Eventually(func() []eventsv1.Event { return overrideEvents(ns, leaseName) }).ShouldNot(BeEmpty())
					}
					table[row] = append(table[row], got)
				}
			}
		}
		fmt.Printf("\nLease guard matrix (a fresh object, lease and Job per cell):\n%-38s", "lease / write")
		for _, col := range columns {
			fmt.Printf(" | %-29s", col.name)
		}
		fmt.Printf("\n%s\n", strings.Repeat("-", 38+len(columns)*32))
		for _, row := range rows {
			fmt.Printf("%-38s", row)
			for _, out := range table[row] {
				fmt.Printf(" | %-29s", out)
			}
			fmt.Println()
		}
		fmt.Printf("\nA denial as the client sees it:\n%s\n\n", sample)
	})

	It("takes the owner from the lease's name: relabelling the owner does not make a deletion pass", func() {
		dev, _ := userClient("dev-relabel", "devs")
		ns := newNamespace()
		create(infrav1.TerraformMachineKind, ns, "m")
		create(infrav1.TerraformMachineKind, ns, "idle")
		r, err := startRun(ctx, admin, infrav1.TerraformMachineKind, ns, "m", 1)
		Expect(err).NotTo(HaveOccurred())
		l := leaseOf(ns, r.owner.RunLeaseName())
		By("the manager itself relabels the lease to another object of the namespace (a plain user may not)")
		Expect(mgrClient.Patch(ctx, l, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"captf.io/owner-name":"idle"}}}`)))).To(Succeed())
		err = dev.Delete(ctx, leaseOf(ns, r.owner.RunLeaseName()))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("of TerraformMachine " + ns + "/m runs"))
	})

	It("refuses deleting a lease inside its grace whose Job is not created yet, as it refuses a removal on the object", func() {
		dev, _ := userClient("dev-grace", "devs")
		ns := newNamespace()
		create(infrav1.TerraformMachineKind, ns, "m")
		r, err := takeLease(ctx, admin, infrav1.TerraformMachineKind, ns, "m", 3)
		Expect(err).NotTo(HaveOccurred())
		err = dev.Delete(ctx, leaseOf(ns, r.owner.RunLeaseName()))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("it names Job " + r.job.Name + " (Apply) of TerraformMachine " + ns + "/m"))
		Expect(err.Error()).To(ContainSubstring("that Job is not on the API server yet: it may still be created until"))
		fmt.Printf("\nA lease inside its grace: %v\n\n", err)

		By("past the grace, no Job appeared: the lease is free and may go")
		Expect(ageLease(ctx, mgrClient, ns, r.owner.RunLeaseName(), 2*60)).To(Succeed())
		Expect(dev.Delete(ctx, leaseOf(ns, r.owner.RunLeaseName()))).To(Succeed())
	})

	It("break-glass: a member annotates a live lease with a reason, then deletes it; both recorded; a user outside the groups cannot", func() {
		oncall, _ := userClient("oncall-bg", breakGlassGroup)
		ns := newNamespace()
		create(infrav1.TerraformClusterKind, ns, "c")
		r, err := startRun(ctx, admin, infrav1.TerraformClusterKind, ns, "c", 1)
		Expect(err).NotTo(HaveOccurred())
		runLease := leaseOf(ns, r.owner.RunLeaseName())
		annotate := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"captf.io/guard-override-reason":"INC-7: stale lease"}}}`))
		err = admin.Patch(ctx, runLease.DeepCopy(), annotate)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the admin is in no override group: %v", err)
		Expect(err.Error()).To(ContainSubstring(`the override reason was ignored`))
		Expect(oncall.Patch(ctx, runLease.DeepCopy(), annotate)).To(Succeed())
		Expect(apierrors.IsForbidden(admin.Delete(ctx, leaseOf(ns, runLease.Name)))).To(BeTrue(), "the reason is not the admin's to use")
		Expect(oncall.Delete(ctx, leaseOf(ns, runLease.Name))).To(Succeed())
		Eventually(func() []eventsv1.Event { return overrideEvents(ns, runLease.Name) }).Should(HaveLen(2))

		By("once the holder has finished, anyone may delete the cluster lease")
		Expect(r.finish(ctx, admin)).To(Succeed())
		Expect(admin.Delete(ctx, leaseOf(ns, r.owner.ClusterLeaseName()))).To(Succeed())
	})

	It("never sees the Terraform state lock Lease or any other Lease", func() {
		ns := newNamespace()
		before, err := webhookCalls(webhooks.LeaseGuardPath)
		Expect(err).NotTo(HaveOccurred())
		suffix := naming.StateSuffix(ns, infrav1.TerraformClusterKind, "c")
		for _, name := range []string{naming.StateLockLeaseName(suffix), "some-leader-election"} {
			l := objects.Lease(ns, name).Obj()
			Expect(admin.Create(ctx, l)).To(Succeed())
			Expect(admin.Patch(ctx, l, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"holderIdentity":"x"}}`)))).To(Succeed())
			Expect(admin.Delete(ctx, l)).To(Succeed())
		}
		Expect(webhookCalls(webhooks.LeaseGuardPath)).To(Equal(before))
	})
})
