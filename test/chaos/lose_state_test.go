package chaos_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// The soak's state-loss step must lose the state for real, or it waits for a StateLost hold
// that never comes: seeds 900201116 and 900203128 stayed unconverged because a manager counting
// a Job put the protection finalizer back between the step's strip and its delete, so the delete
// only marked the Secret for deletion (docs/development.md, the soak ledger).
var _ = Describe("The soak's hand deletion of a state Secret", func() {
	It("leaves the Secret gone even when a manager protects it again between the strip and the delete", func() {
		ns := kit.Namespace()
		tm := &infrav1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lost"}}
		subject := state.Subject{Object: tm, Kind: infrav1.TerraformMachineKind, Suffix: naming.StateSuffix(ns, infrav1.TerraformMachineKind, tm.Name)}
		key := types.NamespacedName{Namespace: ns, Name: naming.StateSecretName(subject.Suffix)}
		Expect(k8s.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name, Labels: state.OwnerLabels(subject, infrav1.SecretRoleState),
				Finalizers: []string{infrav1.StateProtectionFinalizer}},
			Data: map[string][]byte{state.StateKey: []byte("state")},
		})).To(Succeed())
		keeper := &state.Keeper{Client: k8s, APIReader: k8s}

		protected := false
		Expect(deleteStateByHand(key, func() error {
			// What a manager's pass does when it counts a Job that touched the state.
			if err := keeper.Protect(ctx, subject); err != nil {
				return err
			}
			live := &corev1.Secret{}
			if err := k8s.Get(ctx, key, live); err != nil {
				return err
			}
			protected = len(live.Finalizers) == 1 && live.Finalizers[0] == infrav1.StateProtectionFinalizer
			return nil
		})).To(Succeed())
		Expect(protected).To(BeTrue(), "the manager's Protect put the finalizer back between the strip and the delete")
		err := k8s.Get(ctx, key, &corev1.Secret{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the state Secret is gone, not only marked for deletion: %v", err)
	})
})
