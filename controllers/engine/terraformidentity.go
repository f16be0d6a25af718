package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/inputs"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/modulesecrets"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// identityForRun judges spec.job.identityRef again before every Job, live (the identity may
// have been edited, the namespace relabelled, since admission: jobs.CheckTerraformIdentity),
// and reads the identity's values from its Secrets in the manager's namespace
// (jobs.IdentityValues). A refusal is a Problem on InputsValid, reported once on the
// transition as a Warning event; the Job does not start. No reference: nil, nil.
func (pr *preparer) identityForRun(ctx context.Context) (map[string][]byte, *decide.Problem, error) {
	id, reason, msg, err := jobs.CheckTerraformIdentity(ctx, pr.live, pr.obj.GetNamespace(), pr.obj.GetTerraformSpec())
	if err != nil {
		return nil, nil, err
	}
	var values map[string][]byte
	if id != nil {
		values, err = jobs.IdentityValues(ctx, pr.live, pr.identityNS, id)
		switch {
		case errors.Is(err, jobs.ErrIdentitySecret):
			reason, msg = infrav1.IdentityInvalidReason, err.Error()
		case err != nil:
			return nil, nil, err
		}
	}
	if reason == "" {
		return values, nil, nil
	}
	if !decide.Reported(pr.obj.GetTerraformStatus().Conditions, infrav1.InputsValidCondition, reason) {
		pr.out.add(corev1.EventTypeWarning, reason, msg)
	}
	return nil, &decide.Problem{ConditionType: infrav1.InputsValidCondition, Reason: reason, Message: msg}, nil
}

// identityEnvNames are the sorted names of the identity's variables, for jobs.Params.
func identityEnvNames(values map[string][]byte) []string {
	if len(values) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(values))
}

// redactRun is in with every other value the run hands to module code added to its redact
// list, so the runner masks them as it masks Secret variables (inputs.WithRedacted): the
// identity's values and the values of the per-run copies of the Secrets the pod reads
// (spec.job.env, registry tokens, the CLI configuration, Secret volumes). For the per-run
// Secret only.
func redactRun(in *inputs.Inputs, identity map[string][]byte, copies map[string]map[string][]byte) *inputs.Inputs {
	vs := modulesecrets.Values(copies)
	for _, v := range identity {
		vs = append(vs, string(v))
	}
	if len(vs) == 0 {
		return in
	}
	return inputs.WithRedacted(in, vs...)
}

// writeRunIdentitySecret creates the Job's per-run identity Secret
// (naming.RunIdentitySecretName): the identity's values, keyed by variable name, owned by the
// Job. It is written before the per-run inputs Secret, so a pod that finds its inputs finds
// its identity too, and deleted with it once the Job is counted (deleteRunIdentitySecret).
// Nothing is written when the object uses no identity.
func (pr *preparer) writeRunIdentitySecret(ctx context.Context, job *batchv1.Job, values map[string][]byte) error {
	if len(values) == 0 {
		return nil
	}
	labels := map[string]string{}
	for _, k := range []string{infrav1.OwnerKindLabel, infrav1.OwnerNameLabel, infrav1.ClusterNameLabel, infrav1.WatchFilterLabel} {
		if v, ok := job.Labels[k]; ok {
			labels[k] = v
		}
	}
	labels[infrav1.ManagedLabel] = "true"
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: naming.RunIdentitySecretName(job.Name), Namespace: job.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job",
				Name: job.Name, UID: job.UID, Controller: ptr.To(true)}},
		},
		Type: corev1.SecretTypeOpaque,
		Data: values,
	}
	if err := pr.c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create per-run identity secret: %w", err)
	}
	return nil
}

// deleteRunIdentitySecret deletes a counted Job's per-run identity Secret (best effort, as the
// per-run inputs Secret: it goes with its Job anyway). A Job that reads no identity Secret
// costs no request.
func deleteRunIdentitySecret(ctx context.Context, c client.Client, job *batchv1.Job) {
	if !jobs.ReadsRunIdentitySecret(job) {
		return
	}
	s := &corev1.Secret{}
	s.Namespace, s.Name = job.Namespace, naming.RunIdentitySecretName(job.Name)
	if err := c.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		log.FromContext(ctx).Error(err, "delete per-run identity secret", "secret", s.Name)
	}
}
