package engine

import (
	"context"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// The state's identity (docs/state.md, "Whose state it is"): the rules (the holds
// RetainedState and LineageChanged, RecordLineage, ExpectedLineage) are pure and live in
// controllers/decide (identity.go, decide.go, objectevidence.go IdentityOf). This file reads
// the lineage of the state a Job left.

// lineageAfter reads the lineage of the state a Job of op left: "" when the Job cannot have
// written a state (it does not mutate), or left none that reads.
func lineageAfter(ctx context.Context, k *state.Keeper, s state.Subject, op infrav1.Operation) (string, error) {
	if !op.Mutating() {
		return "", nil
	}
	return k.Lineage(ctx, s)
}
