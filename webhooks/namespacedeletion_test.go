package webhooks_test

// The namespace-deletion policy of config/policy/namespace-deletion, as config/default renders
// it, in the suite's kube-apiserver: a namespace that holds a CAPTF object with CAPTF's
// finalizer cannot be deleted (docs/deletion.md, "Deleting the namespace").

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
)

// deleteNamespace deletes ns as the suite's administrator (DryRunAll when dry).
func deleteNamespace(ns string, dry bool) error {
	o := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if dry {
		return admin.Delete(ctx, o, client.DryRunAll)
	}
	return admin.Delete(ctx, o)
}

// deniedByNamespacePolicy reports whether err is the namespace-deletion policy's refusal.
func deniedByNamespacePolicy(err error) bool {
	return err != nil && apierrors.IsForbidden(err) &&
		strings.Contains(err.Error(), "ValidatingAdmissionPolicy") && strings.Contains(err.Error(), "namespace-deletion-")
}

// namespaceTerminating reports whether ns exists with a deletion time set.
func namespaceTerminating(ns string) bool {
	GinkgoHelper()
	var n corev1.Namespace
	Expect(admin.Get(ctx, types.NamespacedName{Name: ns}, &n)).To(Succeed())
	return n.DeletionTimestamp != nil
}

var _ = Describe("Deleting a namespace that holds CAPTF objects", func() {
	for _, kind := range guardedKinds {
		It(fmt.Sprintf("is refused while a %s keeps CAPTF's finalizer, with the object named and what to do", kind), func() {
			ns := newNamespace()
			o := create(kind, ns, "infra")
			Expect(o.GetFinalizers()).To(ContainElement(infrav1.Finalizer), "the mutating webhook adds the finalizer on create")

			// The API server loads a policy and its parameters asynchronously: wait for the
			// refusal with dry runs, which delete nothing when the policy is not loaded yet.
			var err error
			Eventually(func() bool {
				err = deleteNamespace(ns, true)
				return deniedByNamespacePolicy(err)
			}).Should(BeTrue(), "the namespace-deletion policy never refused deleting %s (last answer: %v)", ns, err)
			Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("namespace %s holds %s infra", ns, kind)))
			Expect(err.Error()).To(ContainSubstring("kubectl delete clusters.cluster.x-k8s.io --all -n " + ns + ")"))
			Expect(err.Error()).To(ContainSubstring("kubectl get terraformclusters,terraformmachines,terraformmachinepools -n " + ns + ")"))

			err = deleteNamespace(ns, false)
			Expect(deniedByNamespacePolicy(err)).To(BeTrue(), "a real deletion is refused too: %v", err)
			Expect(namespaceTerminating(ns)).To(BeFalse(), "the refused deletion left the namespace as it was")
		})
	}

	It("tells how to delete an object that belongs to no Cluster: the object itself, not a Cluster", func() {
		ns := newNamespace()
		Expect(admin.Create(ctx, objects.OfKind(infrav1.TerraformMachineKind, ns, "loose").NoCluster().Obj())).To(Succeed())
		var err error
		Eventually(func() bool {
			err = deleteNamespace(ns, true)
			return deniedByNamespacePolicy(err)
		}).Should(BeTrue(), "the namespace-deletion policy never refused deleting %s (last answer: %v)", ns, err)
		Expect(err.Error()).To(ContainSubstring("It belongs to no Cluster: delete it first (kubectl delete terraformmachine loose -n " + ns + ")"))
		Expect(err.Error()).NotTo(ContainSubstring("Delete the Cluster first"))
	})

	It("is allowed once no CAPTF object in it keeps the finalizer, and for namespaces with none", func() {
		ns := newNamespace()
		create(infrav1.TerraformClusterKind, ns, "held")
		create(infrav1.TerraformMachineKind, ns, "done")
		// A neighbour namespace with an object: the policy looks only into the namespace
		// being deleted.
		other := newNamespace()
		create(infrav1.TerraformMachinePoolKind, other, "neighbour")
		empty := newNamespace()

		Eventually(func() bool { return deniedByNamespacePolicy(deleteNamespace(ns, true)) }).Should(BeTrue())
		// The machine lost its finalizer (no run lease exists here, so the guard lets it go):
		// the cluster still holds the namespace.
		Expect(remove(ctx, admin, infrav1.TerraformMachineKind, ns, "done", markFinalizer, methodMerge)).To(Succeed())
		err := deleteNamespace(ns, true)
		Expect(deniedByNamespacePolicy(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("TerraformCluster held"))

		Expect(remove(ctx, admin, infrav1.TerraformClusterKind, ns, "held", markFinalizer, methodMerge)).To(Succeed())
		// The policy reads its parameters from an informer: the removal reaches it shortly.
		Eventually(func() error { return deleteNamespace(ns, true) }).Should(Succeed())
		Expect(deleteNamespace(ns, false)).To(Succeed())
		Expect(namespaceTerminating(ns)).To(BeTrue())

		Expect(deleteNamespace(empty, false)).To(Succeed())
		Expect(deniedByNamespacePolicy(deleteNamespace(other, true))).To(BeTrue(), "the neighbour still holds its pool")
	})
})
