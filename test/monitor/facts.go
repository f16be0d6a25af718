package monitor

import (
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// factKind says what a fact is about.
type factKind int

const (
	factJob factKind = iota
	factObject
	factState
	factPod
)

// fact is what the checks need of one version of one object.
type fact struct {
	rv       uint64
	kind     factKind
	ns, name string
	deleted  bool

	// Jobs: the owner ("Kind/namespace/name"), the owner's UID, the operation, the Cluster.
	owner, ownerKind, ownerName string
	ownerUID                    types.UID
	op                          infrav1.Operation
	cluster                     string
	// finished: a Job carries a Complete or Failed condition; a pod is Succeeded or Failed.
	finished, failed bool
	// stateLineage is the lineage the Job's state channel serves alone (jobs.StateLineageOf).
	stateLineage string

	// Pods: the name of the pod's Job (batch.kubernetes.io/job-name) and, when the Job
	// controller set it (batch.kubernetes.io/controller-uid), the Job's UID.
	job    string
	jobUID types.UID

	// Reconciled objects, Jobs and pods: their own UID.
	uid                           types.UID
	blockMove, finalizer, applied bool
	activeJob                     string

	// State Secrets: the Secret holds a state (absent, empty or unreadable: false), and its
	// lineage.
	hasState bool
	lineage  string
}

// same reports whether two facts of one object are equal for the checks.
func (f fact) same(g fact) bool {
	f.rv, g.rv = 0, 0
	return f == g
}

// key names the object a fact is about, for dropping facts that change nothing.
func (f fact) key() string { return fmt.Sprintf("%d/%s/%s/%s", f.kind, f.ns, f.owner, f.name) }

// factOf reduces one version of a watched object to what the checks need; ok is false for
// objects the checks ignore (Secrets other than Terraform states, pods of no Job).
func factOf(obj client.Object, rv uint64, deleted bool) (fact, bool) {
	f := fact{rv: rv, ns: obj.GetNamespace(), name: obj.GetName(), deleted: deleted, uid: obj.GetUID()}
	switch o := obj.(type) {
	case *batchv1.Job:
		f.kind = factJob
		f.ownerKind = o.Labels[infrav1.OwnerKindLabel]
		for _, r := range o.OwnerReferences {
			f.ownerName, f.ownerUID = r.Name, r.UID
		}
		f.owner = f.ownerKind + "/" + o.Namespace + "/" + f.ownerName
		f.op = infrav1.Operation(o.Labels[infrav1.OperationLabel])
		f.cluster = o.Labels[infrav1.ClusterNameLabel]
		f.finished = jobstatus.Finished(o)
		f.failed = jobFailed(o)
		f.stateLineage = jobs.StateLineageOf(o)
		return f, true
	case *corev1.Pod:
		f.job = o.Labels[batchv1.JobNameLabel]
		if f.job == "" {
			return f, false
		}
		f.kind = factPod
		f.jobUID = types.UID(o.Labels[batchv1.ControllerUidLabel])
		f.finished = jobstatus.PodTerminal(o)
		return f, true
	case *corev1.Secret:
		if !strings.HasPrefix(o.Name, naming.StateSecretName("")) {
			return f, false
		}
		f.kind = factState
		f.uid = ""
		st, err := state.FromSecret(o)
		f.hasState = err == nil
		if f.hasState {
			f.lineage = st.Lineage
		}
		return f, true
	case *infrav1.TerraformCluster:
		return objectFact(f, infrav1.TerraformClusterKind, o, o.Status.ActiveJob), true
	case *infrav1.TerraformMachine:
		return objectFact(f, infrav1.TerraformMachineKind, o, o.Status.ActiveJob), true
	case *infrav1.TerraformMachinePool:
		return objectFact(f, infrav1.TerraformMachinePoolKind, o, o.Status.ActiveJob), true
	}
	return f, false
}

func objectFact(f fact, kind string, o client.Object, aj *infrav1.ActiveJob) fact {
	f.kind = factObject
	f.owner = kind + "/" + o.GetNamespace() + "/" + o.GetName()
	_, f.blockMove = o.GetAnnotations()[infrav1.BlockMoveAnnotation]
	f.applied = o.GetAnnotations()[infrav1.AppliedHashAnnotation] != ""
	f.finalizer = controllerutil.ContainsFinalizer(o, infrav1.Finalizer)
	if aj != nil {
		f.activeJob = aj.Name
	}
	return f
}

func jobFailed(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
