package engine

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/inputs"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// ContractInputs are the contract inputs a Kind gathers (the module's `captf` variable).
type ContractInputs = inputs.ContractInputs

// assembleInputs builds the run's inputs; a problem the user must fix comes back as a Problem.
func (pr *preparer) assembleInputs(ctx context.Context, contract ContractInputs) (*inputs.Inputs, *decide.Problem, error) {
	in, err := inputs.Assemble(ctx, pr.live, pr.obj.GetNamespace(), pr.obj.GetTerraformSpec(), contract)
	if err != nil {
		if ie, ok := inputs.AsInputsError(err); ok {
			return nil, &decide.Problem{ConditionType: infrav1.InputsValidCondition, Reason: ie.Reason, Message: ie.Message}, nil
		}
		return nil, nil, fmt.Errorf("assemble inputs: %w", err)
	}
	return in, nil, nil
}

// inputsForRun returns the inputs a Job of op runs with. A destroy (and its destroy plan), a
// restore, a drift check or a refresh uses the durable inputs of the last apply (the sources may be gone by now; a refresh
// records reality against what was applied), and assembles fresh ones only when there are none.
func (pr *preparer) inputsForRun(ctx context.Context, d decide.Decision, op infrav1.Operation, contract ContractInputs) (*inputs.Inputs, *decide.Problem, error) {
	if decide.UsesDurableInputs(d, op) {
		s := &corev1.Secret{}
		err := pr.live.Get(ctx, types.NamespacedName{Namespace: pr.obj.GetNamespace(), Name: naming.InputsSecretName(pr.subject.Suffix)}, s)
		switch {
		case err == nil:
			in, err := inputs.FromDurableSecret(s)
			if err != nil {
				return nil, nil, fmt.Errorf("read durable inputs: %w", err)
			}
			return in, nil, nil
		case !apierrors.IsNotFound(err):
			return nil, nil, fmt.Errorf("read durable inputs: %w", err)
		}
	}
	return pr.assembleInputs(ctx, contract)
}

// writeDurableInputs creates or updates the object's durable inputs Secret.
func (pr *preparer) writeDurableInputs(ctx context.Context, in *inputs.Inputs) error {
	gvk, err := apiutil.GVKForObject(pr.obj, pr.c.Scheme())
	if err != nil {
		return fmt.Errorf("kind of object: %w", err)
	}
	want, err := inputs.DurableSecret(pr.obj, gvk, pr.subject.Suffix, in)
	if err != nil {
		return fmt.Errorf("build durable inputs: %w", err)
	}
	want.Labels[infrav1.SecretRoleLabel] = infrav1.SecretRoleInputs
	want.Finalizers = []string{infrav1.StateProtectionFinalizer}
	if err := state.WriteSecret(ctx, pr.c, want); err != nil {
		return fmt.Errorf("write durable inputs: %w", err)
	}
	return nil
}

// writeRunSecret creates the Job's per-run Secret (owned by the Job, so it goes with it); a
// restore's carries the state it pushes.
func (pr *preparer) writeRunSecret(ctx context.Context, job *batchv1.Job, in *inputs.Inputs, restore []byte) error {
	s, err := inputs.RunSecret(job, pr.obj.GetNamespace(), pr.subject.Suffix, in, restore)
	if err != nil {
		return fmt.Errorf("build per-run secret: %w", err)
	}
	if err := pr.c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create per-run secret: %w", err)
	}
	return nil
}

// jobParams are the inputs of the Job of run name/op.
func (pr *preparer) jobParams(ev decide.Evidence, d decide.Decision, seq int64, op infrav1.Operation, hash string) jobs.Params {
	gvk, _ := apiutil.GVKForObject(pr.obj, pr.c.Scheme())
	return jobs.Params{
		Owner: jobs.Owner{APIVersion: gvk.GroupVersion().String(), Kind: pr.subject.Kind, Name: pr.obj.GetName(),
			Namespace: pr.obj.GetNamespace(), UID: pr.obj.GetUID(), Cluster: pr.subject.Cluster, Shard: naming.ShardOf(pr.obj)},
		Suffix: pr.subject.Suffix, Seq: seq, Operation: op, InputsHash: hash, PlanID: d.PlanID,
		StateLineage:   decide.ExpectedLineage(ev, op),
		RefreshOnly:    decide.RefreshOnly(ev, d, op),
		DestroyPlan:    decide.MakesDestroyPlan(d, op),
		RefreshRequest: decide.RefreshRequestOf(ev, d, op),
		Target:         decide.TargetOf(ev, d, op),
		Spec:           *pr.obj.GetTerraformSpec(), Defaults: pr.jobDefaults(),
	}
}

// jobDefaults are the manager's Job defaults with the object's own runner account.
func (pr *preparer) jobDefaults() jobs.Defaults {
	d := pr.jobs
	d.ServiceAccountName = naming.RunnerServiceAccountName(pr.subject.Suffix)
	return d
}
