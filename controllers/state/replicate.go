package state

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/replica"
)

// Replicate writes the subject's current state to the replica store (Keeper.Replica), sealed,
// after a Job that may have moved it. held is the state Secret's resourceVersion the store is
// known to hold already ("" when none is known): a Secret still at it is not written again, so
// each version costs one store write. It returns nil when no replica is configured or there is
// no state to copy; a store that cannot take the version never fails the pass (the result says
// why, for the StateReplicated condition and the metric): a run is never blocked by it. Only a
// failed live read of the state Secret is an error.
func (k *Keeper) Replicate(ctx context.Context, s Subject, held string) (*decide.ReplicaResult, error) {
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
	res := &decide.ReplicaResult{Serial: v.Serial, Lineage: v.Lineage, SecretVersion: src.ResourceVersion}
	if held != "" && src.ResourceVersion == held {
		res.Time = k.now()
		return res, nil // the store took this very Secret's version already
	}
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
		res.Written, res.Time = put.Written, k.now()
	}
	if k.ReplicaWritten != nil {
		k.ReplicaWritten(s.Kind, res)
	}
	if res.Reason != "" {
		log.FromContext(ctx).Info("the state was not replicated; the run goes on", "serial", v.Serial, "reason", res.Reason, "why", res.Message)
	}
	return res, nil
}

// LookupReplica reads what the replica store holds for the subject's namespace, kind and name:
// the newest version of each lineage, opened to see whether it still tracks resources (a
// destroy's last state does not). It is asked only for an object with no state of its own
// (decide.NeedsReplicaLookup), so an object with a state never reads the store on a pass. A
// store that cannot be listed is reported in the lookup (Problem), never as an error: the
// replica never holds a run by being down. Nil when no replica is configured.
func (k *Keeper) LookupReplica(ctx context.Context, s Subject) *decide.ReplicaLookup {
	if k.Replica == nil {
		return nil
	}
	ref := replica.Ref{Namespace: s.Object.GetNamespace(), Kind: s.Kind, Name: s.Object.GetName()}
	versions, err := k.Replica.List(ctx, ref)
	if err != nil {
		return &decide.ReplicaLookup{Problem: err.Error()}
	}
	out := &decide.ReplicaLookup{Listed: listedViews(versions)}
	for _, v := range newestPerLineage(versions) {
		_, view, err := k.openVersion(ctx, v)
		if err != nil {
			view.Unopened = err.Error() // it may track resources: it holds, and is never brought back
		}
		out.Versions = append(out.Versions, view)
	}
	return out
}

// LookupReplicaVersion looks in the replica store for one version of the subject's state, the
// serial a restore asks for in lineage (decide.NeedsReplicaVersion), opened and checked as
// LookupReplica does, into into.Requested (nil when the store does not hold it); a store that
// cannot be read sets into.Problem.
func (k *Keeper) LookupReplicaVersion(ctx context.Context, s Subject, lineage string, serial int64, into *decide.ReplicaLookup) {
	if k.Replica == nil {
		return
	}
	v := replica.Version{Ref: replica.Ref{Namespace: s.Object.GetNamespace(), Kind: s.Kind, Name: s.Object.GetName()}, Lineage: lineage, Serial: serial}
	_, view, err := k.openVersion(ctx, v)
	switch {
	case errors.Is(err, replica.ErrNotFound):
		return
	case err != nil:
		into.Problem = err.Error()
		return
	}
	into.Requested = &view
}

// ReplicaAhead lists the store's versions of the subject's namespace, kind and name (listed,
// for status.stateReplica) and returns the newest version of lineage when it is newer than
// serial (the state Secret's), nil when it is not, the store holds none or lineage is "" (no
// state yet: the listing alone). A store that cannot be listed is an error, which the caller
// reports; only strict replication holds a run on it.
func (k *Keeper) ReplicaAhead(ctx context.Context, s Subject, lineage string, serial int64) (ahead *replica.Version, listed []decide.ReplicaVersionView, err error) {
	if k.Replica == nil {
		return nil, nil, nil
	}
	versions, err := k.Replica.List(ctx, replica.Ref{Namespace: s.Object.GetNamespace(), Kind: s.Kind, Name: s.Object.GetName()})
	if err != nil {
		return nil, nil, err
	}
	listed = listedViews(versions)
	if newest, ok := replica.Newest(versions, lineage); ok && lineage != "" && newest.Serial > serial {
		return &newest, listed, nil
	}
	return nil, listed, nil
}

// listedViews is a listing as the decision reads it (never nil, so an empty store is a listing
// too; nothing opened).
func listedViews(versions []replica.Version) []decide.ReplicaVersionView {
	out := make([]decide.ReplicaVersionView, 0, len(versions))
	for _, v := range versions {
		out = append(out, decide.ReplicaVersionView{Lineage: v.Lineage, Serial: v.Serial, UID: string(v.UID), Written: v.Written})
	}
	return out
}

// openVersion reads version v from the store and checks that it is the state its key names.
// It returns the state as the backend's Secret holds it and the version's view; a version
// sealed with another key, not a state, or of another lineage or serial than its key's has no
// data and says why in view.Unopened. err is a store that could not be read (ErrNotFound: it
// holds no such version).
func (k *Keeper) openVersion(ctx context.Context, v replica.Version) ([]byte, decide.ReplicaVersionView, error) {
	view := decide.ReplicaVersionView{Lineage: v.Lineage, Serial: v.Serial, Written: v.Written}
	data, uid, err := k.Replica.Open(ctx, v)
	view.UID = string(uid)
	if errors.Is(err, replica.ErrWrongKey) {
		view.Unopened = err.Error()
		return nil, view, nil
	}
	if err != nil {
		return nil, view, err
	}
	st, err := parseBackendState(data)
	if err != nil {
		view.Unopened = err.Error()
		return nil, view, nil
	}
	view.Empty = StateEmpty(st)
	if st.Lineage != v.Lineage || int64(st.Serial) != v.Serial {
		view.Unopened = fmt.Sprintf("the state inside has lineage %s and serial %d, not the key's", st.Lineage, st.Serial)
		return nil, view, nil
	}
	return data, view, nil
}

// newestPerLineage keeps the newest version of each lineage (versions come by lineage, then
// serial).
func newestPerLineage(versions []replica.Version) []replica.Version {
	var out []replica.Version
	for _, v := range versions {
		if n := len(out); n > 0 && out[n-1].Lineage == v.Lineage {
			out[n-1] = v
			continue
		}
		out = append(out, v)
	}
	return out
}

// parseBackendState reads a state as the backend's Secret holds it (compressed).
func parseBackendState(data []byte) (*State, error) {
	raw, err := Decompress(data)
	if err != nil {
		return nil, err
	}
	return Parse(raw)
}

// ImportReplica brings version v of the subject's state back from the replica store as a
// backup of the subject (captf-state-backup-<suffix>-<serial>, owned and protected like every
// backup, its Job annotation "replica"), after checking that what the store returns is that
// lineage and serial. A restore of that backup (captf.io/restore-state) then writes it into the
// state through the state channel, as every restore does: the keeper never writes a state
// Secret itself.
func (k *Keeper) ImportReplica(ctx context.Context, s Subject, v decide.ReplicaVersionView) (*decide.BackupView, error) {
	if k.Replica == nil {
		return nil, errors.New("no replica store is configured")
	}
	ref := replica.Ref{Namespace: s.Object.GetNamespace(), Kind: s.Kind, Name: s.Object.GetName()}
	data, view, err := k.openVersion(ctx, replica.Version{Ref: ref, Lineage: v.Lineage, Serial: v.Serial})
	if err == nil && view.Unopened != "" {
		err = errors.New(view.Unopened)
	}
	if err != nil {
		return nil, fmt.Errorf("read replica version %s/%d: %w", v.Lineage, v.Serial, err)
	}
	return k.writeBackup(ctx, s, v.Serial, v.Lineage, ReplicaBackupJob, data)
}

// ReplicaBackupJob is the Job annotation of a backup brought back from the replica store.
const ReplicaBackupJob = "replica"
