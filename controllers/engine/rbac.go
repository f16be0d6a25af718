package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// runnerAccount is the ServiceAccount the object's Jobs run as: the object's own
// (naming.RunnerServiceAccountName), or the one spec.job.serviceAccountName names.
func (pr *preparer) runnerAccount() string {
	if sa := pr.obj.GetTerraformSpec().Job.ServiceAccountName; sa != "" {
		return sa
	}
	return naming.RunnerServiceAccountName(pr.subject.Suffix)
}

// ensureRunnerAccess prepares what the state channel of the object's Jobs needs, before the
// Job exists: the object's runner ServiceAccount (unless the spec names its own), a Role that
// allows exactly jobs.RunnerPolicyRules (get and update on this object's state Secret and lock
// Lease by name, get on its run lease, get on Jobs and Pods), a RoleBinding of that Role to the
// Jobs' account, and the plan Secret; the state Secret and lock Lease are the keeper's
// (state.Keeper.Ensure). The account, Role, RoleBinding and plan Secret are owned by the object
// (they go with it). Each is created only when a live read shows it missing.
func (pr *preparer) ensureRunnerAccess(ctx context.Context) error {
	gvk, err := apiutil.GVKForObject(pr.obj, pr.c.Scheme())
	if err != nil {
		return fmt.Errorf("kind of object: %w", err)
	}
	ns, name := pr.obj.GetNamespace(), naming.RunnerServiceAccountName(pr.subject.Suffix)
	owned := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: naming.OwnerLabels(pr.subject.Kind, pr.obj.GetName(), pr.subject.Cluster, naming.ShardOf(pr.obj)),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(pr.obj, gvk)}}
	}
	var objs []client.Object
	if pr.obj.GetTerraformSpec().Job.ServiceAccountName == "" {
		objs = append(objs, &corev1.ServiceAccount{ObjectMeta: owned(), AutomountServiceAccountToken: new(bool)})
	}
	objs = append(objs,
		&rbacv1.Role{ObjectMeta: owned(), Rules: jobs.RunnerPolicyRules(pr.subject.Suffix)},
		&rbacv1.RoleBinding{
			ObjectMeta: owned(),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: pr.runnerAccount(), Namespace: ns}},
		})

	objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: naming.PlanSecretName(pr.subject.Suffix),
		Labels: state.OwnerLabels(pr.subject, infrav1.SecretRolePlan), OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(pr.obj, gvk)}},
		Type: corev1.SecretTypeOpaque})
	for _, o := range objs {
		existing, err := state.CreateIfMissing(ctx, pr.c, pr.live, o)
		if err != nil {
			return err
		}
		switch e := existing.(type) {
		case *rbacv1.RoleBinding:
			if err := pr.rebind(ctx, e); err != nil {
				return err
			}
		case *rbacv1.Role:
			if err := pr.updateRules(ctx, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// updateRules brings a Role created by an earlier version up to the rules the channel needs
// now (the plan Secret, for example).
func (pr *preparer) updateRules(ctx context.Context, role *rbacv1.Role) error {
	want := jobs.RunnerPolicyRules(pr.subject.Suffix)
	if equality.Semantic.DeepEqual(role.Rules, want) {
		return nil
	}
	role.Rules = want
	if err := pr.c.Update(ctx, role); err != nil {
		return fmt.Errorf("update runner role %s: %w", role.Name, err)
	}
	return nil
}

// rebind points the RoleBinding at the Jobs' current account (spec.job.serviceAccountName may
// have changed since it was created).
func (pr *preparer) rebind(ctx context.Context, rb *rbacv1.RoleBinding) error {
	want := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: pr.runnerAccount(), Namespace: pr.obj.GetNamespace()}}
	if len(rb.Subjects) == 1 && rb.Subjects[0] == want[0] {
		return nil
	}
	rb.Subjects = want
	if err := pr.c.Update(ctx, rb); err != nil {
		return fmt.Errorf("update runner role binding %s: %w", rb.Name, err)
	}
	return nil
}

// runnerAccountProblem checks, live, the credentials the Jobs would carry: a ServiceAccount the
// spec names for them must have opted in (jobs.RunnerAccountRefusal), and the audience of
// spec.job.identityToken must be one the API server does not accept (jobs.CheckIdentityAudience,
// asked again before every Job: the API server's audiences are its configuration and can
// change), the sources of spec.job.cliConfig must exist and have opted in
// (cliConfigProblem). nil when all hold. A refused audience is reported once, on the
// transition, as a Warning event. The Secrets the pod reads are judged by moduleSecretsForRun.
func (pr *preparer) runnerAccountProblem(ctx context.Context) (*decide.Problem, error) {
	if name := pr.obj.GetTerraformSpec().Job.ServiceAccountName; name != "" {
		reason, msg, err := jobs.CheckRunnerAccount(ctx, pr.live, pr.obj.GetNamespace(), name)
		if err != nil {
			return nil, err
		}
		if reason != "" {
			return &decide.Problem{ConditionType: infrav1.InputsValidCondition, Reason: reason, Message: msg}, nil
		}
	}
	if problem, err := pr.cliConfigProblem(ctx); err != nil || problem != nil {
		return problem, err
	}
	reason, msg, err := jobs.CheckIdentityAudience(ctx, pr.audiences, pr.obj.GetTerraformSpec())
	if err != nil || reason == "" {
		return nil, err
	}
	if !decide.Reported(pr.obj.GetTerraformStatus().Conditions, infrav1.InputsValidCondition, reason) {
		pr.out.add(corev1.EventTypeWarning, reason, msg)
	}
	return &decide.Problem{ConditionType: infrav1.InputsValidCondition, Reason: reason, Message: msg}, nil
}

// audiences is the Reconciler's AudienceProber, by default an AudienceProbe through Client of
// the ServiceAccount default/captf-audience-probe, created when missing.
func (r *Reconciler) audiences() jobs.AudienceProber {
	if r.Audiences != nil {
		return r.Audiences
	}
	return jobs.AudienceProbe{Client: r.Client, CreateAccount: true,
		Account: types.NamespacedName{Namespace: metav1.NamespaceDefault, Name: jobs.DefaultAudienceProbeAccountName}}
}
