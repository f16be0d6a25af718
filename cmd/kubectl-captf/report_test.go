package main

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

var now = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func cond(typ string, status metav1.ConditionStatus, reason, msg string, ago time.Duration) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(now.Add(-ago))}
}

// a TerraformCluster that applied, has two backups, a pending plan and a failed drift check.
func waitingCluster() *infrav1.TerraformCluster {
	rec := &infrav1.PlanRecord{ID: "7d1c0a59d1b5e2f8a2cc35b1e0c3e1f4", Job: "captf-abc-3", Secret: "captf-plan-abc", InputsHash: "h2",
		Serial: 4, Lineage: "lin-1", Create: 1, Replace: 1, Addresses: []string{"terraform_data.extra[0]", "terraform_data.node"}, Reason: "Manual"}
	o := objects.Cluster("prod", "prod").UID("uid-1").
		Annotation(infrav1.PendingPlanAnnotation, rec.Annotation()).Annotation(infrav1.StateLineageAnnotation, "lin-1").Obj()
	prov := true
	o.Status.Initialization = &infrav1.Initialization{Provisioned: &prov}
	o.Status.Conditions = []metav1.Condition{
		cond(infrav1.ReadyCondition, metav1.ConditionTrue, "Ready", "", 3*time.Hour),
		cond(infrav1.ApplyJobSucceededCondition, metav1.ConditionFalse, infrav1.PlanAwaitingApprovalReason, "approve: kubectl annotate ...", 2*time.Minute),
		cond(infrav1.DriftDetectedCondition, metav1.ConditionFalse, infrav1.NoDriftReason, "the infrastructure matches", 10*time.Minute),
		cond(infrav1.InputsValidCondition, metav1.ConditionTrue, infrav1.InputsAssembledReason, "", time.Hour),
	}
	finished := metav1.NewTime(now.Add(-2 * time.Minute))
	o.Status.LastRun = &infrav1.LastRun{Job: "captf-abc-3", Operation: infrav1.OperationPlan, Outcome: infrav1.RunSucceeded, FinishedAt: &finished}
	o.Status.StateBackups = []infrav1.StateBackup{{Serial: 4, Secret: "captf-state-backup-abc-4"}, {Serial: 3, Secret: "captf-state-backup-abc-3"}}
	return o
}

func TestObjectNodeReadsTheRecordsAndPicksTheProblems(t *testing.T) {
	n := objectNode(infrav1.TerraformClusterKind, waitingCluster(), "")
	if n.PendingPlan == nil || n.PendingPlan.ID != "7d1c0a59d1b5e2f8a2cc35b1e0c3e1f4" {
		t.Fatalf("pending plan from the annotation: %+v", n.PendingPlan)
	}
	if n.State.Lineage != "lin-1" || n.State.NewestBackupSerial == nil || *n.State.NewestBackupSerial != 4 || *n.State.PlannedSerial != 4 {
		t.Fatalf("state: %+v", n.State)
	}
	if len(n.Problems) != 1 || n.Problems[0].Type != infrav1.ApplyJobSucceededCondition {
		t.Fatalf("problems: only ApplyJobSucceeded=False (DriftDetected=False is good, InputsValid=True is good): %+v", n.Problems)
	}
	if !n.Provisioned || n.Cluster != "prod" {
		t.Fatalf("provisioned and cluster: %+v", n)
	}
}

func TestProblemsHonourNegativePolarity(t *testing.T) {
	got := problems([]metav1.Condition{
		cond(infrav1.DriftDetectedCondition, metav1.ConditionTrue, infrav1.DriftFoundReason, "", 0),
		cond(infrav1.PausedCondition, metav1.ConditionFalse, infrav1.NotPausedReason, "", 0),
		cond(infrav1.StateReadableCondition, metav1.ConditionFalse, infrav1.StateLostReason, "", 0),
		cond(infrav1.ReadyCondition, metav1.ConditionFalse, infrav1.StateLostReason, "", 0),
		// A module without a health output is no problem; an invalid one is.
		cond(infrav1.InfrastructureHealthyCondition, metav1.ConditionUnknown, infrav1.NoHealthOutputReason, "", 0),
	})
	invalid := problems([]metav1.Condition{cond(infrav1.InfrastructureHealthyCondition, metav1.ConditionUnknown, infrav1.HealthOutputInvalidReason, "", 0)})
	if len(invalid) != 1 {
		t.Fatalf("an invalid health output needs a look: %v", invalid)
	}
	var types []string
	for _, c := range got {
		types = append(types, c.Type)
	}
	if strings.Join(types, ",") != infrav1.DriftDetectedCondition+","+infrav1.StateReadableCondition {
		t.Fatalf("problems: %v", types)
	}
}

func TestExitCodes(t *testing.T) {
	readyNode := ObjectNode{Ready: &metav1.Condition{Status: metav1.ConditionTrue}}
	notReady := ObjectNode{Ready: &metav1.Condition{Status: metav1.ConditionFalse}}
	noReady := ObjectNode{}
	waiting := ObjectNode{Ready: readyNode.Ready, PendingPlan: &infrav1.PlanRecord{ID: "x"}}
	drifted := ObjectNode{Ready: readyNode.Ready, Drift: &metav1.Condition{Status: metav1.ConditionTrue}}
	for _, tc := range []struct {
		name string
		r    Report
		want int
	}{
		{"nothing", Report{}, exitOK},
		{"all ready", Report{Objects: []ObjectNode{readyNode, readyNode}}, exitOK},
		{"one not ready", Report{Objects: []ObjectNode{readyNode, notReady}}, exitNotReady},
		{"no Ready yet", Report{Objects: []ObjectNode{noReady}}, exitNotReady},
		{"a plan waits", Report{Objects: []ObjectNode{readyNode, waiting}}, exitAttention},
		{"drift found", Report{Objects: []ObjectNode{drifted}}, exitAttention},
		{"not ready beats a waiting plan, whatever the order", Report{Objects: []ObjectNode{notReady, waiting}}, exitNotReady},
		{"not ready after a waiting plan", Report{Objects: []ObjectNode{waiting, notReady}}, exitNotReady},
		{"a named Cluster that does not exist", Report{Cluster: &ClusterNode{Missing: true}, Objects: []ObjectNode{readyNode}}, exitNotReady},
		{"the Cluster's own Available is shown, not judged", Report{Cluster: &ClusterNode{Available: notReady.Ready}, Objects: []ObjectNode{readyNode}}, exitOK},
	} {
		if got := exitCode(tc.r); got != tc.want {
			t.Errorf("%s: exit %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestRenderTree(t *testing.T) {
	machine := objects.Machine("prod", "prod-md-0").Cluster("prod").Obj()
	machine.Status.Conditions = []metav1.Condition{
		cond(infrav1.ReadyCondition, metav1.ConditionFalse, infrav1.StateLockedReason, "the state is locked by ops@laptop", 20*time.Minute),
		cond(infrav1.StateReadableCondition, metav1.ConditionFalse, infrav1.StateLockedReason, "the state is locked by ops@laptop (lock 1)\nsecond line", 20*time.Minute),
	}
	started := metav1.NewTime(now.Add(-30 * time.Second))
	machine.Status.ActiveJob = &infrav1.ActiveJob{Name: "captf-def-2", Operation: infrav1.OperationApply, StartTime: &started}
	machine.Annotations = map[string]string{infrav1.RetryAtAnnotation: "2026-12-03T12:05:00Z"}
	r := Report{
		Cluster: &ClusterNode{Namespace: "prod", Name: "prod", Phase: "Provisioned", Available: &metav1.Condition{Status: metav1.ConditionFalse, Reason: "NotAvailable", Message: "* ControlPlaneAvailable: waiting"},
			ClusterLease: "captf-def-2"},
		Objects: []ObjectNode{objectNode(infrav1.TerraformClusterKind, waitingCluster(), ""), objectNode(infrav1.TerraformMachineKind, machine, "captf-def-2")},
	}
	var b strings.Builder
	if err := renderTree(&b, r, now, false); err != nil {
		t.Fatal(err)
	}
	want := `Cluster prod/prod  Available=False (NotAvailable) phase Provisioned
    * ControlPlaneAvailable: waiting
  cluster lease: held by captf-def-2
  ├─ TerraformCluster/prod  Ready 3h ago provisioned
  │  last run:  Plan captf-abc-3 Succeeded 2m ago
  │  state:     lineage lin-1, newest backup serial 4, plan made at serial 4
  │  plan:      plan 7d1c0a59d1b5e2f8a2cc35b1e0c3e1f4 waits for approval (Manual; create 1, update 0, replace 1, delete 0): kubectl captf plan show terraformcluster/prod
  │  drift:     DriftDetected=False NoDrift 10m ago: the infrastructure matches
  │  ! ApplyJobSucceeded=False PlanAwaitingApproval 2m ago: approve: kubectl annotate ...
  └─ TerraformMachine/prod-md-0  NotReady (StateLocked) 20m ago
       the state is locked by ops@laptop
     job:       Apply captf-def-2 running 30s ago
     run lease: held by captf-def-2
     retry at:  2026-12-03T12:05:00Z (kubectl captf retry to retry now)
     state:     none recorded yet
     ! StateReadable=False StateLocked 20m ago: the state is locked by ops@laptop (lock 1)
`
	if b.String() != want {
		t.Fatalf("tree:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestParseKindName(t *testing.T) {
	for arg, want := range map[string]string{
		"terraformcluster/a": infrav1.TerraformClusterKind, "TerraformCluster/a": infrav1.TerraformClusterKind, "tfc/a": infrav1.TerraformClusterKind,
		"terraformclusters.infrastructure.cluster.x-k8s.io/a": infrav1.TerraformClusterKind,
		"tfm/a": infrav1.TerraformMachineKind, "terraformmachinepools/a": infrav1.TerraformMachinePoolKind, "tfmp/a": infrav1.TerraformMachinePoolKind,
	} {
		k, name, err := parseKindName(arg)
		if err != nil || k.Kind != want || name != "a" {
			t.Errorf("%s: %v %q %v", arg, k.Kind, name, err)
		}
	}
	for _, bad := range []string{"a", "tfc/", "/a", "cluster/a", "tfc/a/b"} {
		if _, _, err := parseKindName(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestRenderTreeGroupsANamespaceByCluster(t *testing.T) {
	node := func(kind, name, cluster string) ObjectNode {
		return ObjectNode{Kind: kind, Namespace: "ns", Name: name, Cluster: cluster, Ready: &metav1.Condition{Status: metav1.ConditionTrue}}
	}
	objs := []ObjectNode{
		node(infrav1.TerraformMachineKind, "m", "b"), node(infrav1.TerraformClusterKind, "a", "a"),
		node(infrav1.TerraformClusterKind, "b", "b"), node(infrav1.TerraformMachineKind, "loose", ""),
	}
	sortObjects(objs)
	var b strings.Builder
	if err := renderTree(&b, Report{Objects: objs, grouped: true}, now, false); err != nil {
		t.Fatal(err)
	}
	want := `(no cluster.x-k8s.io/cluster-name label)
  └─ TerraformMachine/loose  Ready
     state:     none recorded yet
Cluster ns/a
  └─ TerraformCluster/a  Ready
     state:     none recorded yet
Cluster ns/b
  ├─ TerraformCluster/b  Ready
  │  state:     none recorded yet
  └─ TerraformMachine/m  Ready
     state:     none recorded yet
`
	if b.String() != want {
		t.Fatalf("tree:\n%s\nwant:\n%s", b.String(), want)
	}
}
