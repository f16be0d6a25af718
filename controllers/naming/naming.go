package naming

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// SuffixLength is the length of a state suffix: 16 hex characters (64 bits of SHA-256).
const SuffixLength = 16

// Workspace is the Terraform workspace CAPTF uses (runnerapi.Workspace).
const Workspace = runnerapi.Workspace

func hash16(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "/")))
	return hex.EncodeToString(sum[:])[:SuffixLength]
}

// StateSuffix is the fixed-length suffix of an object's Terraform state, run lease and Jobs.
func StateSuffix(namespace, kind, name string) string {
	return hash16(namespace, kind, name)
}

// StateSecretName is the Terraform kubernetes backend's state Secret for a suffix
// (runnerapi.StateSecretName, the layout the runner shares).
func StateSecretName(suffix string) string {
	return runnerapi.StateSecretName(suffix)
}

// StateLockLeaseName is the Terraform kubernetes backend's lock Lease for a suffix. The
// controller creates it empty before the first Job, owned by the object (the garbage collector
// deletes it with the object: a move never carries it), and deletes it after a destroy only
// when nobody holds it; the state channel takes and releases it for terraform and breaks a stale
// one only under I8; nothing else in CAPTF writes it (docs/leases.md). The name is
// runnerapi.StateLockLeaseName.
func StateLockLeaseName(suffix string) string {
	return runnerapi.StateLockLeaseName(suffix)
}

// RunLeaseName is the run lease of the object with this suffix.
func RunLeaseName(suffix string) string {
	return "captf-run-" + suffix
}

// ClusterLeaseName is the cluster lease of a Cluster.
func ClusterLeaseName(namespace, cluster string) string {
	return "captf-cluster-" + hash16(namespace, cluster)
}

// JobName is the deterministic name of the object's Job number seq. It depends on nothing that
// changes while the object waits (not the inputs, not the operation), so a waiting object keeps
// one name, and a second attempt at the same run finds AlreadyExists.
func JobName(suffix string, seq int64) string {
	return "captf-" + suffix + "-" + strconv.FormatInt(seq, 10)
}

// RunSecretName is the per-run inputs Secret of a Job (owned by the Job).
func RunSecretName(jobName string) string {
	return jobName + "-run"
}

// RunIdentitySecretName is the per-run Secret of a Job that carries the values of its
// TerraformIdentity's variables (owned by the Job, deleted with the per-run inputs Secret).
func RunIdentitySecretName(jobName string) string {
	return jobName + "-identity"
}

// RunModuleSecretName is the i-th per-run copy of a Secret of the object's namespace that a
// Job's main container reads (owned by the Job; modulesecrets.RenamePod numbers them).
func RunModuleSecretName(jobName string, i int) string {
	return jobName + "-secret-" + strconv.Itoa(i)
}

// InputsSecretName is an object's durable inputs Secret (owned by the object; moves with it).
func InputsSecretName(suffix string) string {
	return "captf-inputs-" + suffix
}

// OutputsSecretName is the Secret that offers an object's module outputs to users.
func OutputsSecretName(suffix string) string {
	return "captf-outputs-" + suffix
}

// InventorySecretName is the Secret that lists the resource instances of an object's state
// after its last successful apply (owned by the object; moves with it).
func InventorySecretName(suffix string) string {
	return "captf-inventory-" + suffix
}

// LabelValue shortens a name to a valid label value: names of 63 characters or less stay as
// they are; longer ones keep a prefix and end in a hash of the whole name. It is
// runnerapi.LabelValue, which the state channel compares owner labels with.
func LabelValue(name string) string {
	return runnerapi.LabelValue(name)
}

// OwnerLabels are the labels that tie a Job, Lease or Secret to its owning object. shard is the
// owner's shard (ShardOf): the Jobs and Secrets of an object carry it, so a manager started with
// --watch-filter caches them with the object; empty adds nothing.
func OwnerLabels(kind, name, cluster, shard string) map[string]string {
	l := map[string]string{
		infrav1.ManagedLabel:   "true",
		infrav1.OwnerKindLabel: kind,
		infrav1.OwnerNameLabel: LabelValue(name),
	}
	if cluster != "" {
		l[infrav1.ClusterNameLabel] = LabelValue(cluster)
	}
	if shard != "" {
		l[infrav1.WatchFilterLabel] = shard
	}
	return l
}

// ShardOf is the shard of an object: the value of its watch-filter label (Cluster API's
// cluster.x-k8s.io/watch-filter), empty when it has none.
func ShardOf(o metav1.Object) string {
	return o.GetLabels()[infrav1.WatchFilterLabel]
}

// OwnedBy reports whether labels carry the owner labels of kind/name.
func OwnedBy(labels map[string]string, kind, name string) bool {
	return labels[infrav1.OwnerKindLabel] == kind && labels[infrav1.OwnerNameLabel] == LabelValue(name)
}

// ParseJobSeq returns the sequence number of a Job name built by JobName for this suffix.
func ParseJobSeq(suffix, jobName string) (int64, error) {
	rest, ok := strings.CutPrefix(jobName, "captf-"+suffix+"-")
	if !ok {
		return 0, fmt.Errorf("job %q is not a job of suffix %s", jobName, suffix)
	}
	seq, err := strconv.ParseInt(rest, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse sequence of job %q: %w", jobName, err)
	}
	return seq, nil
}

// RunnerServiceAccountName is the per-object ServiceAccount a Job of the object runs under:
// its Role lets the state channel read and write only this object's state Secret and lock
// Lease (see jobs.RunnerPolicyRules).
func RunnerServiceAccountName(suffix string) string {
	return "captf-runner-" + suffix
}

// StateBackupSecretName is the backup of the object's state at serial (owned by the object;
// moves with it).
func StateBackupSecretName(suffix string, serial int64) string {
	return "captf-state-backup-" + suffix + "-" + strconv.FormatInt(serial, 10)
}

// PlanSecretName is the object's plan Secret: the saved plan of its latest Plan Job (the plan
// file, its record and its text; see runnerapi.PlanFileKey). The controller creates it empty
// before a Plan Job; the Job's state channel fills it and hands the plan to one apply. The
// name is runnerapi.PlanSecretName, which the channel uses.
func PlanSecretName(suffix string) string {
	return runnerapi.PlanSecretName(suffix)
}
