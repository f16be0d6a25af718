package engine

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// Object is a reconciled kind: TerraformCluster, TerraformMachine or TerraformMachinePool.
type Object interface {
	client.Object
	GetTerraformSpec() *infrav1.TerraformSpec
	GetTerraformStatus() *infrav1.TerraformStatus
}

// Kind adapts the engine to one kind. Implementations live in the per-kind controller
// packages and hold no state of their own; the engine never switches on a kind's name.
type Kind interface {
	// Name is the kind's name (infrav1.TerraformClusterKind, ...).
	Name() string
	// New returns an empty object of the kind.
	New() Object
	// NewList returns an empty list of the kind.
	NewList() client.ObjectList
	// Watches are the kind's dependencies besides the object, its Jobs and its Cluster, which
	// the engine always watches.
	Watches() []Watch
	// Contract gathers the contract inputs the module receives in the `captf` variable. A
	// non-nil Wait means a dependency is not ready (the pass starts nothing).
	Contract(ctx context.Context, env Env, obj Object) (ContractInputs, *decide.Wait, error)
	// ApplyOutputs maps the module's outputs onto the object's contract fields (spec and
	// status). A *state.OutputError means the module produced bad outputs.
	ApplyOutputs(obj Object, st *state.State) error
	// Fingerprint says, from cached reads only, what the contract inputs are made of: it
	// changes whenever they may have changed. The engine reuses an inputs hash while the
	// fingerprint and the generation stay the same, so an idle pass costs no API request.
	Fingerprint(ctx context.Context, env Env, obj Object) (Fingerprint, error)
	// Children lists the objects whose deletion must come first (a cluster's machines and
	// pools), as "Kind/name". Only clusters have children.
	Children(ctx context.Context, env Env, obj Object) ([]string, error)
}

// Fingerprint is what the contract inputs of an object are made of, as the caches see them.
type Fingerprint struct {
	// Key changes whenever the contract inputs may have changed: the values taken from cached
	// objects, and the resourceVersions of the Secrets whose content is read live.
	Key string
	// Complete says that Key covers every source of the contract inputs: no content is read
	// from a Secret that the metadata caches do not show. Only a complete fingerprint is
	// recorded in status.inputs and trusted across manager restarts.
	Complete bool
}

// Watch is one dependency of a kind: events of Object are mapped to objects of the kind.
type Watch struct {
	// Object is the watched type (it must be in the manager's cache).
	Object client.Object
	// Map maps an event to the objects to reconcile. Nil means SameCluster: every object of
	// the kind that carries the same cluster-name label as the event's object.
	Map handler.MapFunc
	// BootstrapData watches the metadata of the bootstrap data Secrets (Reconciler.BootstrapMeta)
	// instead of Object; nothing is watched when the reconciler has no such cache.
	BootstrapData bool
}

// Env gives a Kind the readers it may use: Cache for watched types, Live for everything else.
type Env struct {
	Cache client.Reader
	Live  client.Reader
	// SecretMeta reads the metadata of CAPTF's Secrets (the state Secrets among them), and
	// BootstrapMeta that of the Secrets labelled with a cluster name (bootstrap data). Nil
	// readers see nothing: a fingerprint is then incomplete.
	SecretMeta, BootstrapMeta client.Reader
	// ClusterName is the owning Cluster's name (from the cluster-name label).
	ClusterName string
}
