package jobs

import (
	rbacv1 "k8s.io/api/rbac/v1"

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
