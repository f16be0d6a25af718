package runlease_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

func TestLeaseKindOf(t *testing.T) {
	suffix := naming.StateSuffix("ns", infrav1.TerraformMachineKind, "m1")
	for name, want := range map[string]string{
		naming.RunLeaseName(suffix):                     infrav1.LeaseKindRun,
		naming.ClusterLeaseName("ns", "c1"):             infrav1.LeaseKindCluster,
		naming.StateLockLeaseName(suffix):               "",
		naming.RunLeaseName(suffix) + "x":               "",
		naming.RunLeaseName(suffix[:10]):                "",
		"captf-cluster-short":                           "",
		"captf-controller-manager-leader-election-lock": "",
	} {
		if got := runlease.LeaseKindOf(name); got != want {
			t.Errorf("LeaseKindOf(%q) = %q, want %q", name, got, want)
		}
	}
}

var _ = Describe("A lease's owner, from its name", func() {
	// lease creates a lease named name, labelled as the manager labels leases but with the
	// owner labels given (a user may have edited them), held by holder.
	lease := func(ns, name, kind, ownerName, holder string) *coordinationv1.Lease {
		l := objects.Lease(ns, name).Labels(naming.OwnerLabels(kind, ownerName, "c1", "")).
			Label(infrav1.LeaseLabel, runlease.LeaseKindOf(name)).Holder(holder).Obj()
		Expect(admin.Create(ctx, l)).To(Succeed())
		return l
	}
	object := func(kind, ns, name, cluster string) client.Object {
		o := objects.OfKind(kind, ns, name).Cluster(cluster).Module("example.com/m:1").Obj()
		Expect(admin.Create(ctx, o)).To(Succeed())
		return o
	}
	ownerOf := func(l *coordinationv1.Lease, holder *batchv1.Job) (runlease.Owner, bool) {
		o, found, err := newManager(fakeClock(), true).OwnerOfLease(ctx, l, holder)
		Expect(err).NotTo(HaveOccurred())
		return o, found
	}

	It("takes a run lease's owner from the object whose state suffix names it, never from its labels", func() {
		ns := newNamespace()
		m1 := runlease.Owner{Namespace: ns, Kind: infrav1.TerraformMachineKind, Name: "m1"}
		object(infrav1.TerraformMachineKind, ns, "m1", "c1")
		object(infrav1.TerraformMachineKind, ns, "m2", "c1")

		By("labels that name the owner: taken once its suffix matches")
		o, found := ownerOf(lease(ns, m1.RunLeaseName(), m1.Kind, "m1", "j"), nil)
		Expect(found).To(BeTrue())
		Expect(o.Kind).To(Equal(m1.Kind))
		Expect(o.Name).To(Equal("m1"))

		By("labels relabelled to another existing object: the name still says m1")
		l := getLease(ns, m1.RunLeaseName())
		l.Labels[infrav1.OwnerNameLabel] = "m2"
		l.Labels[infrav1.OwnerKindLabel] = infrav1.TerraformClusterKind
		Expect(admin.Update(ctx, l)).To(Succeed())
		o, found = ownerOf(l, nil)
		Expect(found).To(BeTrue())
		Expect(o.Name).To(Equal("m1"))
		Expect(o.Kind).To(Equal(infrav1.TerraformMachineKind))

		By("the object gone: the holder Job's controller owner reference names it (checked against the name too)")
		gone := runlease.Owner{Namespace: ns, Kind: infrav1.TerraformMachineKind, Name: "gone"}
		gl := lease(ns, gone.RunLeaseName(), infrav1.TerraformMachineKind, "m2", jobName(gone, 1))
		holder := objects.Job(ns, jobName(gone, 1)).Owner(objects.Machine(ns, "gone").UID("u").Obj()).Obj()
		o, found = ownerOf(gl, holder)
		Expect(found).To(BeTrue())
		Expect(o.Name).To(Equal("gone"))
		holder.OwnerReferences[0].Name = "m2"
		_, found = ownerOf(gl, holder)
		Expect(found).To(BeFalse(), "an owner reference to another object does not match the lease's name")
	})

	It("takes a cluster lease's owner from the TerraformCluster whose Cluster names it", func() {
		ns := newNamespace()
		object(infrav1.TerraformClusterKind, ns, "tc", "c1")
		object(infrav1.TerraformClusterKind, ns, "other", "c2")
		l := lease(ns, naming.ClusterLeaseName(ns, "c1"), infrav1.TerraformClusterKind, "other", "j")
		o, found := ownerOf(l, nil)
		Expect(found).To(BeTrue())
		Expect(o.Name).To(Equal("tc"), "the owner-name label says other, whose Cluster is c2")
		Expect(o.Cluster).To(Equal("c1"))

		By("no TerraformCluster of that Cluster: the holder Job's controller owner reference, else nothing")
		l2 := lease(ns, naming.ClusterLeaseName(ns, "c9"), infrav1.TerraformClusterKind, "tc", "j")
		_, found = ownerOf(l2, nil)
		Expect(found).To(BeFalse(), "tc's Cluster is c1: its label does not make it c9's")
		holder := objects.Job(ns, "j").Owner(objects.Cluster(ns, "deleted").UID("u").Obj()).Obj()
		o, found = ownerOf(l2, holder)
		Expect(found).To(BeTrue())
		Expect(o.Name).To(Equal("deleted"))
	})
})
