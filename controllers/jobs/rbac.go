package jobs

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// RunnerPolicyRules are the rules of the per-object runner Role: exactly what the state
// channel of the object's Jobs calls, and nothing else (docs/permissions.md). The Terraform
// container holds no token; only the channel uses these rights.
//
//   - get, update on the object's state Secret and lock Lease, by name: read and write the
//     state, take, release and break the lock. No create (the controller creates both before
//     the first Job), no delete, no list (list cannot be limited by name and would return
//     every Secret of the namespace).
//   - get, update on the object's plan Secret, by name: a Plan Job's channel stores the saved
//     plan there; an apply's channel reads it and marks it consumed (I9). No create: the
//     controller creates it empty before a Plan Job.
//   - get on the object's run lease, by name: fencing, and I8's "this Job holds the run lease".
//   - get on Jobs and Pods: I8's "the lock's holder is a pod of one of this object's own Jobs,
//     gone or terminal". Their names are not known in advance, so these cannot be limited by
//     name; get on a Pod or a Job reveals its spec and status but no Secret's data.
func RunnerPolicyRules(suffix string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{naming.StateSecretName(suffix)}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{naming.PlanSecretName(suffix)}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{naming.StateLockLeaseName(suffix)}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{naming.RunLeaseName(suffix)}, Verbs: []string{"get"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
	}
}

// CheckRunnerAccount reads the ServiceAccount namespace/name through reader (the API server,
// not a cache: a label just added must count) and judges it with RunnerAccountRefusal. The
// engine, before it starts a Job, and the validating webhook, on admission, both call it.
func CheckRunnerAccount(ctx context.Context, reader client.Reader, namespace, name string) (reason, message string, err error) {
	sa := &corev1.ServiceAccount{}
	err = reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, sa)
	switch {
	case apierrors.IsNotFound(err):
		sa = nil
	case err != nil:
		return "", "", fmt.Errorf("read ServiceAccount %s/%s: %w", namespace, name, err)
	}
	reason, message = RunnerAccountRefusal(sa, namespace, name)
	return reason, message, nil
}

// RunnerAccountRefusal says why a ServiceAccount named by spec.job.serviceAccountName may not
// run the object's Jobs, or "" when it may: it must carry the label captf.io/runner=true,
// because the controller binds the runner's Role to it (and the account's other permissions
// reach the state channel). sa is nil when the account does not exist. It is pure; the
// controller and the admission webhook both judge with it.
func RunnerAccountRefusal(sa *corev1.ServiceAccount, namespace, name string) (reason, message string) {
	if sa == nil {
		return infrav1.RunnerAccountMissingReason, fmt.Sprintf(
			"spec.job.serviceAccountName names the ServiceAccount %s/%s, which does not exist: create it and label it %s=true, or unset the field to use the account CAPTF manages",
			namespace, name, infrav1.RunnerAccountLabel)
	}
	if sa.Labels[infrav1.RunnerAccountLabel] != "true" {
		return infrav1.RunnerAccountNotOptedInReason, fmt.Sprintf(
			"the ServiceAccount %s/%s does not carry the label %s=true, so CAPTF does not run Jobs under it (it would bind the runner's Role to it): "+
				"kubectl label serviceaccount %s -n %s %s=true, or unset spec.job.serviceAccountName",
			namespace, name, infrav1.RunnerAccountLabel, name, namespace, infrav1.RunnerAccountLabel)
	}
	return "", ""
}
