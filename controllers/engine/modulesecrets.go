package engine

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/modulesecrets"
)

// moduleSecretsForRun judges, live and before every Job (destroys included), every Secret the
// Job's pod would hand to module code (spec.job.env, spec.job.cliConfig, the Secret volumes
// of spec.job.podTemplate: modulesecrets.Check) and returns the data to copy into the Job's
// per-run copies (modulesecrets.Copies), taken from the very reads it judged. A Secret that is
// a ServiceAccount token or lacks the opt-in label holds the object (InputsValid=False,
// ModuleSecretRefused or VariablesSourceNotOptedIn, a Warning event on the transition); a
// missing one, or a missing key, holds it with InputsSourceMissing. No Job is created then.
func (pr *preparer) moduleSecretsForRun(ctx context.Context) (map[string]map[string][]byte, *decide.Problem, error) {
	spec := pr.obj.GetTerraformSpec()
	var refs []modulesecrets.Ref
	for _, r := range modulesecrets.Refs(field.NewPath("spec"), spec) {
		if r.Kind.Pod() {
			refs = append(refs, r)
		}
	}
	if len(refs) == 0 {
		return nil, nil, nil
	}
	res, err := modulesecrets.Check(ctx, pr.live, pr.obj.GetNamespace(), refs)
	if err != nil {
		return nil, nil, fmt.Errorf("check module secrets: %w", err)
	}
	reason, msg := res.Reason, ""
	switch {
	case len(res.Errs) > 0:
		msg = res.Errs.ToAggregate().Error()
	case len(res.Missing) > 0:
		reason, msg = infrav1.InputsSourceMissingReason, res.MissingMessage(pr.obj.GetNamespace())
	default:
		return modulesecrets.Copies(spec, res.Secrets), nil, nil
	}
	if !decide.Reported(pr.obj.GetTerraformStatus().Conditions, infrav1.InputsValidCondition, reason) {
		pr.out.add(corev1.EventTypeWarning, reason, msg)
	}
	return nil, &decide.Problem{ConditionType: infrav1.InputsValidCondition, Reason: reason, Message: msg}, nil
}

// writeRunCopies creates the Job's per-run copies of the Secrets its pod reads
// (modulesecrets.RunCopies), before the per-run inputs Secret: the pod mounts that one, so it
// cannot start before every copy exists. A copy found already there must be this Job's own
// (modulesecrets.OwnCopy); a Secret someone else created under its name is refused, and the
// per-run inputs Secret is then never written, so the pod never starts.
func (pr *preparer) writeRunCopies(ctx context.Context, job *batchv1.Job, copies map[string]map[string][]byte) error {
	for _, s := range modulesecrets.RunCopies(job, pr.obj.GetTerraformSpec(), copies) {
		err := pr.c.Create(ctx, s)
		if err == nil {
			continue
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create per-run secret copy %s: %w", s.Name, err)
		}
		found := &corev1.Secret{}
		if err := pr.live.Get(ctx, client.ObjectKeyFromObject(s), found); err != nil {
			return fmt.Errorf("read per-run secret copy %s: %w", s.Name, err)
		}
		if !modulesecrets.OwnCopy(found, job) {
			msg := fmt.Sprintf("Secret %s/%s, where Job %s reads its copy of a Secret, was not written by CAPTF for this Job; the Job's pod will not start: delete the Secret and the Job",
				s.Namespace, s.Name, job.Name)
			pr.out.add(corev1.EventTypeWarning, infrav1.ModuleSecretRefusedReason, msg)
			return fmt.Errorf("per-run secret copy: %s", msg)
		}
	}
	return nil
}
