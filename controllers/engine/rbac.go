package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// runnerRules are what terraform's kubernetes backend needs in the namespace: its state
// Secret and its lock Lease.
var runnerRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete"}},
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete"}},
}

// ensureRunnerRBAC creates the runner ServiceAccount, Role and RoleBinding in a namespace when
// they are missing (read live: these types are not cached).
func ensureRunnerRBAC(ctx context.Context, c client.Client, live client.Reader, namespace, name string) error {
	labels := map[string]string{infrav1.ManagedLabel: "true"}
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels}, Rules: runnerRules},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: namespace}},
		},
	}
	for _, o := range objs {
		existing := o.DeepCopyObject().(client.Object)
		err := live.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, existing)
		if err == nil {
			continue
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("read runner %T: %w", o, err)
		}
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create runner %T: %w", o, err)
		}
	}
	return nil
}

// RemoveRunnerRBAC deletes the runner account, Role and RoleBinding of a namespace. The
// controllers call it when the last CAPTF object of the namespace is gone.
func RemoveRunnerRBAC(ctx context.Context, c client.Client, namespace, name string) error {
	for _, o := range []client.Object{
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}},
	} {
		if err := c.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete runner %T: %w", o, err)
		}
	}
	return nil
}
