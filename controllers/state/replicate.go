package state

import (
	"context"
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/replica"
)

// Replicate writes the subject's current state to the replica store (Keeper.Replica), sealed,
// after a Job that may have moved it. It returns nil when no replica is configured or there is
// no state to copy; a store that cannot take the version never fails the pass (the result says
// why, for the StateReplicated condition and the metric): a run is never blocked by it. Only a
// failed live read of the state Secret is an error.
func (k *Keeper) Replicate(ctx context.Context, s Subject) (*decide.ReplicaResult, error) {
	if k.Replica == nil {
		return nil, nil
	}
	src, st, err := k.liveState(ctx, s, "the replica")
	if err != nil || st == nil {
		return nil, err
	}
	v := replica.Version{
		Ref:     replica.Ref{Namespace: s.Object.GetNamespace(), Kind: s.Kind, Name: s.Object.GetName()},
		UID:     s.Object.GetUID(),
		Lineage: st.Lineage,
		Serial:  int64(st.Serial),
	}
	res := &decide.ReplicaResult{Serial: v.Serial, Lineage: v.Lineage}
	put, err := k.Replica.Put(ctx, v, src.Data[StateKey])
	var conflict *replica.ConflictError
	switch {
	case errors.As(err, &conflict):
		res.Reason, res.Message = infrav1.ReplicaConflictReason, conflict.Error()
	case errors.Is(err, replica.ErrWrongKey):
		res.Reason, res.Message = infrav1.ReplicaKeyRefusedReason, err.Error()
	case err != nil:
		res.Reason, res.Message = infrav1.ReplicaUnavailableReason, err.Error()
	default:
		res.Written = put.Written
	}
	if k.ReplicaWritten != nil {
		k.ReplicaWritten(s.Kind, res)
	}
	if res.Reason != "" {
		log.FromContext(ctx).Info("the state was not replicated; the run goes on", "serial", v.Serial, "reason", res.Reason, "why", res.Message)
	}
	return res, nil
}
