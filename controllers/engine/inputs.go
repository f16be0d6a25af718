package engine

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

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
func (p *pass) assembleInputs(ctx context.Context, contract ContractInputs) (*inputs.Inputs, *decide.Problem, error) {
	in, err := inputs.Assemble(ctx, p.r.APIReader, p.obj.GetNamespace(), p.obj.GetTerraformSpec(), contract)
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
func (p *pass) inputsForRun(ctx context.Context, op infrav1.Operation, contract ContractInputs) (*inputs.Inputs, *decide.Problem, error) {
	if p.destroys(op) || op == infrav1.OperationRestore || op == infrav1.OperationRefresh || op.Background() {
		s := &corev1.Secret{}
		err := p.r.APIReader.Get(ctx, types.NamespacedName{Namespace: p.obj.GetNamespace(), Name: naming.InputsSecretName(p.suffix)}, s)
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
	return p.assembleInputs(ctx, contract)
}

// destroys reports a Job of op that belongs to the object's destroy: the Destroy itself, or the
// Plan that makes its destroy plan (decide.NeedsDestroyPlan). Both run on the durable inputs of
// the last apply, wait for no contract input (the owners may be going away), and write no
// durable inputs.
func (p *pass) destroys(op infrav1.Operation) bool {
	return op == infrav1.OperationDestroy || op == infrav1.OperationPlan && p.d.DestroyPlan
}

// writeDurableInputs creates or updates the object's durable inputs Secret.
func (p *pass) writeDurableInputs(ctx context.Context, in *inputs.Inputs) error {
	gvk, err := apiutil.GVKForObject(p.obj, p.r.Client.Scheme())
	if err != nil {
		return fmt.Errorf("kind of object: %w", err)
	}
	want, err := inputs.DurableSecret(p.obj, gvk, p.suffix, in)
	if err != nil {
		return fmt.Errorf("build durable inputs: %w", err)
	}
	want.Labels[infrav1.SecretRoleLabel] = infrav1.SecretRoleInputs
	want.Finalizers = []string{infrav1.StateProtectionFinalizer}
	if err := p.writeSecret(ctx, want); err != nil {
		return fmt.Errorf("write durable inputs: %w", err)
	}
	return nil
}

// writeSecret creates want or brings the existing Secret's data, labels and owner references
// in line with it (the client reads Secrets live: they are never cached).
func (p *pass) writeSecret(ctx context.Context, want *corev1.Secret) error {
	have := &corev1.Secret{}
	have.Namespace, have.Name = want.Namespace, want.Name
	_, err := controllerutil.CreateOrUpdate(ctx, p.r.Client, have, func() error {
		have.Data, have.Labels, have.OwnerReferences, have.Type = want.Data, want.Labels, want.OwnerReferences, want.Type
		for _, f := range want.Finalizers {
			controllerutil.AddFinalizer(have, f)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create or update secret %s: %w", want.Name, err)
	}
	return nil
}

// writeOutputsSecret offers every module output to users in a Secret owned by the object
// (naming.OutputsSecretName): sensitive outputs go there and nowhere else (never status or
// events). Outputs that do not fit a Secret come back as a *state.OutputError.
func (p *pass) writeOutputsSecret(ctx context.Context, st *state.State) error {
	gvk, err := apiutil.GVKForObject(p.obj, p.r.Client.Scheme())
	if err != nil {
		return fmt.Errorf("kind of object: %w", err)
	}
	want, err := state.OutputsSecret(p.obj, gvk, p.suffix, st)
	if err != nil {
		if _, ok := state.AsOutputError(err); ok {
			return err
		}
		return fmt.Errorf("build outputs secret: %w", err)
	}
	want.Labels[infrav1.SecretRoleLabel] = infrav1.SecretRoleOutputs
	if err := p.writeSecret(ctx, want); err != nil {
		return fmt.Errorf("write outputs secret: %w", err)
	}
	return nil
}

// writeRunSecret creates the Job's per-run Secret (owned by the Job, so it goes with it); a
// restore's carries the state it pushes.
func (p *pass) writeRunSecret(ctx context.Context, job *batchv1.Job, in *inputs.Inputs, restore []byte) error {
	s, err := inputs.RunSecret(job, p.obj.GetNamespace(), p.suffix, in, restore)
	if err != nil {
		return fmt.Errorf("build per-run secret: %w", err)
	}
	if err := p.r.Client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create per-run secret: %w", err)
	}
	return nil
}

// jobParams are the inputs of the Job of run name/op.
func (p *pass) jobParams(seq int64, op infrav1.Operation, hash string) jobs.Params {
	gvk, _ := apiutil.GVKForObject(p.obj, p.r.Client.Scheme())
	return jobs.Params{
		Owner: jobs.Owner{APIVersion: gvk.GroupVersion().String(), Kind: p.r.Kind.Name(), Name: p.obj.GetName(),
			Namespace: p.obj.GetNamespace(), UID: p.obj.GetUID(), Cluster: p.owner.Cluster, Shard: naming.ShardOf(p.obj)},
		Suffix: p.suffix, Seq: seq, Operation: op, InputsHash: hash, PlanID: p.d.PlanID,
		StateLineage:   decide.ExpectedLineage(p.ev, op),
		RefreshOnly:    p.d.RefreshOnly || op == infrav1.OperationDrift && p.ev.Drift.Mode == infrav1.DriftModeAccept,
		DestroyPlan:    op == infrav1.OperationPlan && p.d.DestroyPlan,
		RefreshRequest: refreshRequestOf(p.ev, op, p.d),
		Spec:           *p.obj.GetTerraformSpec(), Defaults: p.jobDefaults(),
	}
}

// refreshRequestOf is the refresh request (captf.io/refresh) a Job answers: a Refresh's, or a
// refresh-only plan's; none for any other Job.
func refreshRequestOf(ev decide.Evidence, op infrav1.Operation, d decide.Decision) string {
	if op == infrav1.OperationRefresh || op == infrav1.OperationPlan && d.RefreshOnly {
		return ev.Drift.RefreshRequest
	}
	return ""
}

// jobDefaults are the manager's Job defaults with the object's own runner account.
func (p *pass) jobDefaults() jobs.Defaults {
	d := p.r.Jobs
	d.ServiceAccountName = naming.RunnerServiceAccountName(p.suffix)
	return d
}
