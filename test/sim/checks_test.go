package sim_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/monitor"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// TestSimChecksFire proves the checks TestSim relies on, on hand-made histories: status.activeJob
// cleared while its Job runs is I4 (test/monitor's rule, through Recorder), and the finalizer
// dropped while the state records a resource is S1.
func TestSimChecksFire(t *testing.T) {
	tc := func(rv string, activeJob string, finalizer bool) *infrav1.TerraformCluster {
		o := objects.Cluster(ns, "c1").Obj()
		o.UID, o.ResourceVersion = "tc-uid", rv
		o.Annotations = map[string]string{infrav1.BlockMoveAnnotation: "true"}
		if finalizer {
			o.Finalizers = []string{infrav1.Finalizer}
		}
		if activeJob != "" {
			o.Status.ActiveJob = &infrav1.ActiveJob{Name: activeJob}
		}
		return o
	}
	job := objects.Job(ns, "j1").Obj()
	job.UID, job.ResourceVersion = "job-uid", "2"
	job.Labels = naming.OwnerLabels(infrav1.TerraformClusterKind, "c1", "c1", "")
	job.Labels[infrav1.OperationLabel] = string(infrav1.OperationApply)
	job.OwnerReferences = []metav1.OwnerReference{{Kind: infrav1.TerraformClusterKind, Name: "c1", UID: "tc-uid"}}

	rec := monitor.NewRecorder()
	for _, o := range []client.Object{tc("1", "", true), job, tc("3", "j1", true), tc("4", "", true)} {
		rec.Record(o, false)
	}
	res := rec.Check(map[string]bool{ns: true})
	if len(res.Violations) != 1 {
		t.Errorf("violations %v, want one I4", res.Violations)
	}

	sec, err := statetest.Secret(ns, naming.StateSuffix(ns, infrav1.TerraformClusterKind, "c1"), statetest.Cluster("10.0.0.1", 6443))
	if err != nil {
		t.Fatal(err)
	}
	sec.ResourceVersion = "5"
	hist := []recorded{{rv: 5, obj: sec}, {rv: 6, obj: tc("6", "", true)}, {rv: 7, obj: tc("7", "", false)}}
	if v := finalizerWhileState(hist); len(v) != 1 {
		t.Errorf("S1 violations %v, want one", v)
	}
	hist[0].deleted = true
	if v := finalizerWhileState(hist); len(v) != 0 {
		t.Errorf("S1 violations %v after the state went, want none", v)
	}
}
