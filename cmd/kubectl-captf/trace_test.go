package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

var kcpGVK = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlane"}

// traceFixture is a Cluster whose control plane waits for etcd, with a MachineDeployment whose
// one Machine's TerraformMachine failed its apply, and a MachinePool that is fine.
func traceFixture(t *testing.T) client.WithWatch {
	t.Helper()
	ctrl := func(kind, name string, uid types.UID) []metav1.OwnerReference {
		yes := true
		return []metav1.OwnerReference{{APIVersion: "x/v1", Kind: kind, Name: name, UID: uid, Controller: &yes}}
	}
	lbl := map[string]string{clusterv1.ClusterNameLabel: "prod"}
	infra := func(kind, name string) clusterv1.ContractVersionedObjectReference {
		return clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: kind, Name: name}
	}
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "prod", UID: "cl"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: infra(infrav1.TerraformClusterKind, "prod"),
			ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: kcpGVK.Group, Kind: kcpGVK.Kind, Name: "prod-cp"}},
		Status: clusterv1.ClusterStatus{Conditions: []metav1.Condition{cond(clusterv1.AvailableCondition, metav1.ConditionFalse, "NotAvailable", "* ControlPlaneAvailable: waiting", time.Minute)}}}
	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(kcpGVK)
	kcp.SetNamespace("prod")
	kcp.SetName("prod-cp")
	kcp.SetUID("kcp")
	_ = unstructured.SetNestedSlice(kcp.Object, []any{map[string]any{"type": "Available", "status": "False", "reason": "NotAvailable",
		"message": "Waiting for etcd", "lastTransitionTime": "2026-12-03T11:00:00Z"}}, "status", "conditions")
	cpMachine := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "prod-cp-1", UID: "m0", Labels: lbl, OwnerReferences: ctrl(kcpGVK.Kind, "prod-cp", "kcp")},
		Spec:   clusterv1.MachineSpec{ClusterName: "prod", InfrastructureRef: infra(infrav1.TerraformMachineKind, "prod-cp-1")},
		Status: clusterv1.MachineStatus{Conditions: []metav1.Condition{cond(clusterv1.ReadyCondition, metav1.ConditionFalse, "NotReady", "* EtcdPodHealthy: Pod does not exist", time.Minute)}}}
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "md", UID: "md", Labels: lbl},
		Status: clusterv1.MachineDeploymentStatus{Conditions: []metav1.Condition{cond(clusterv1.AvailableCondition, metav1.ConditionTrue, "Available", "", time.Hour)}}}
	ms := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "md-x", UID: "ms", Labels: lbl, OwnerReferences: ctrl("MachineDeployment", "md", "md")}}
	worker := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "md-x-1", UID: "m1", Labels: lbl, OwnerReferences: ctrl("MachineSet", "md-x", "ms")},
		Spec:   clusterv1.MachineSpec{ClusterName: "prod", InfrastructureRef: infra(infrav1.TerraformMachineKind, "md-x-1")},
		Status: clusterv1.MachineStatus{Conditions: []metav1.Condition{cond(clusterv1.ReadyCondition, metav1.ConditionFalse, "NotReady", "* InfrastructureReady: the apply failed", time.Minute)}}}
	mp := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "mp", UID: "mp", Labels: lbl}}
	mp.Spec.Template.Spec.InfrastructureRef = infra(infrav1.TerraformMachinePoolKind, "mp-1")

	tcl := readyCluster("prod", "prod")
	cpInfra := objects.Machine("prod", "prod-cp-1").Obj()
	cpInfra.Status.Conditions = []metav1.Condition{cond(infrav1.ReadyCondition, metav1.ConditionTrue, "Provisioned", "", time.Hour)}
	failed := objects.Machine("prod", "md-x-1").Obj()
	failed.Status.Conditions = []metav1.Condition{cond(infrav1.ReadyCondition, metav1.ConditionFalse, "ApplyFailed",
		"the apply failed: Error: creating instance: quota exceeded\nJob: BackoffLimitExceeded", 2*time.Minute)}
	failed.Status.LastRun = &infrav1.LastRun{Job: "captf-def-2", Operation: infrav1.OperationApply, Outcome: infrav1.RunFailed}
	pool := objects.MachinePool("prod", "mp-1").Obj()
	pool.Status.Conditions = []metav1.Condition{cond(infrav1.ReadyCondition, metav1.ConditionTrue, "Provisioned", "", time.Hour)}
	start := metav1.NewTime(now.Add(-time.Minute))
	pool.Status.ActiveJob = &infrav1.ActiveJob{Name: "captf-mp-5", Operation: infrav1.OperationDrift, StartTime: &start}

	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "captf-def-2"},
		Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "captf-def-2-abcde", Labels: map[string]string{batchv1.JobNameLabel: "captf-def-2"}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "terraform",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}}}

	s, err := scheme()
	if err != nil {
		t.Fatal(err)
	}
	// The API server's mapper knows each group's preferred version; this one is told.
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{kcpGVK.GroupVersion()})
	for gvk := range s.AllKnownTypes() {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	mapper.Add(kcpGVK, meta.RESTScopeNamespace)
	return fake.NewClientBuilder().WithScheme(s).WithRESTMapper(mapper).
		WithObjects(cl, cpMachine, md, ms, worker, mp, tcl, cpInfra, failed, pool, job, pod, kcp).Build()
}

// trace walks the whole chain and sends the reader to the failing TerraformMachine first.
func TestTrace(t *testing.T) {
	c := traceFixture(t)
	out, err := runPlugin(t, context.Background(), c, &bytes.Buffer{}, "trace", "prod")
	var exit *exitError
	if !errors.As(err, &exit) || exit.code != exitNotReady {
		t.Fatalf("want exit %d, got %v\n%s", exitNotReady, err, out)
	}
	for _, want := range []string{
		"! Cluster/prod  Available=False NotAvailable",
		"├─ TerraformCluster/prod  Ready=True Ready",
		"│  └─ Job/captf-abc-3  Plan, last run; deleted",
		"├─ ! KubeadmControlPlane/prod-cp  Available=False NotAvailable",
		"│      Waiting for etcd",
		"│  └─ ! Machine/prod-cp-1  Ready=False NotReady",
		"│     └─ TerraformMachine/prod-cp-1  Ready=True Provisioned",
		"├─ MachineDeployment/md  Available=True Available",
		"│  └─ MachineSet/md-x  (no condition reported)",
		"│     └─ ! Machine/md-x-1  Ready=False NotReady",
		"│        └─ ! TerraformMachine/md-x-1  Ready=False ApplyFailed",
		"│               the apply failed: Error: creating instance: quota exceeded",
		"│               Job: BackoffLimitExceeded",
		"│           └─ ! Job/captf-def-2  Failed=True BackoffLimitExceeded",
		"│              └─ ! Pod/captf-def-2-abcde  Failed; container terraform exited 1 (Error)",
		"└─ MachinePool/mp  (no condition reported)",
		"   └─ TerraformMachinePool/mp-1  Ready=True Provisioned",
		"      └─ Job/captf-mp-5  Drift, running; deleted",
		"look first at TerraformMachine prod/md-x-1: Ready=False ApplyFailed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("trace lacks %q", want)
		}
	}
	if t.Failed() {
		t.Fatalf("trace:\n%s", out)
	}

	out, _ = runPlugin(t, context.Background(), c, &bytes.Buffer{}, "trace", "prod", "-o", "json")
	var v TraceView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if v.FirstFailure == nil || v.FirstFailure.Name != "md-x-1" || v.FirstFailure.Kind != infrav1.TerraformMachineKind || len(v.Root.Children) != 4 {
		t.Fatalf("json: first failure %+v, %d children", v.FirstFailure, len(v.Root.Children))
	}
	if _, err := runPlugin(t, context.Background(), c, &bytes.Buffer{}, "trace", "nope"); err == nil || !strings.Contains(err.Error(), `"nope" not found`) {
		t.Fatalf("trace of a missing Cluster: %v", err)
	}
}

// Without a failing CAPTF object, the deepest failing node is where to look.
func TestTraceFirstFailureIsTheDeepest(t *testing.T) {
	root := TraceNode{Kind: "Cluster", Failing: true, Children: []TraceNode{
		{Kind: "KubeadmControlPlane", Failing: true, Children: []TraceNode{{Kind: "Machine", Name: "cp", Failing: true}}},
		{Kind: "MachineDeployment", Children: []TraceNode{{Kind: "MachineSet", Children: []TraceNode{{Kind: "Machine", Name: "w", Failing: true}}}}},
	}}
	if f := firstFailure(&root); f == nil || f.Name != "w" {
		t.Fatalf("want the worker Machine (depth 3), got %+v", f)
	}
	root.Children[0].Children[0].Children = []TraceNode{{Kind: infrav1.TerraformMachineKind, Name: "tm", Failing: true}}
	if f := firstFailure(&root); f == nil || f.Name != "tm" {
		t.Fatalf("want the failing TerraformMachine, got %+v", f)
	}
	root = TraceNode{Kind: "Cluster", Children: []TraceNode{{Kind: "MachineDeployment"}}}
	if f := firstFailure(&root); f != nil {
		t.Fatalf("nothing fails: %+v", f)
	}
}
