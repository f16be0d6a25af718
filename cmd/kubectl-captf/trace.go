package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// TraceView is what trace prints: a Cluster's chain down to the Jobs and pods CAPTF runs. It is
// trace's JSON and YAML output.
type TraceView struct {
	Root TraceNode `json:"root"`
	// FirstFailure is where to look first (firstFailure): the first failing CAPTF object, else
	// the deepest failing node.
	FirstFailure *TraceNode `json:"firstFailure,omitempty"`
}

// TraceNode is one object of the chain.
type TraceNode struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Condition is the object's headline condition: Available where the kind has it, else Ready
	// (MachinesReady for a MachineSet); a Job's Complete or Failed; nil when it reports none.
	Condition *metav1.Condition `json:"condition,omitempty"`
	// Failing: the headline condition is not True (a Job failed, a pod failed).
	Failing bool `json:"failing,omitempty"`
	// Detail says more in a few words: the operation of a Job, a pod's phase, a missing object.
	Detail   string      `json:"detail,omitempty"`
	Children []TraceNode `json:"children,omitempty"`
}

func newTraceCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trace CLUSTER",
		Short: "Show a Cluster's whole chain: control plane, MachineDeployments, MachineSets, Machines and MachinePools down to their CAPTF objects and the Jobs and pods those run; the failing conditions marked; exit 2 when one fails",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			v, err := traceCluster(cmd.Context(), c, ns, args[0])
			if err != nil {
				return err
			}
			if err := o.show(v, func(p *printer) error { return renderTrace(p, v, time.Now()) }); err != nil {
				return err
			}
			if v.FirstFailure != nil {
				return &exitError{code: exitNotReady}
			}
			return nil
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return o.completeClusterName(cmd, args, toComplete)
		},
	}
	o.addOutputFlag(cmd)
	return cmd
}

// tracer reads the objects of one Cluster; a kind the caller may not list is left out.
type tracer struct {
	c       client.Client
	ns, cl  string
	byOwner map[types.UID][]client.Object
}

// traceCluster reads the Cluster and everything of it the tree shows.
func traceCluster(ctx context.Context, c client.Client, ns, name string) (TraceView, error) {
	cl := &clusterv1.Cluster{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cl); err != nil {
		return TraceView{}, fmt.Errorf("get Cluster %s/%s: %w", ns, name, err)
	}
	t := &tracer{c: c, ns: ns, cl: name, byOwner: map[types.UID][]client.Object{}}
	sel := client.MatchingLabels{clusterv1.ClusterNameLabel: name}
	for _, l := range []client.ObjectList{&clusterv1.MachineDeploymentList{}, &clusterv1.MachineSetList{}, &clusterv1.MachineList{}, &clusterv1.MachinePoolList{}} {
		if err := c.List(ctx, l, client.InNamespace(ns), sel); err != nil {
			if apierrors.IsForbidden(err) {
				continue
			}
			return TraceView{}, fmt.Errorf("list the objects of Cluster %s/%s: %w", ns, name, err)
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return TraceView{}, fmt.Errorf("list the objects of Cluster %s/%s: %w", ns, name, err)
		}
		for _, it := range items {
			obj, ok := it.(client.Object)
			if !ok {
				continue
			}
			owner := metav1.GetControllerOf(obj)
			if owner == nil {
				owner = &metav1.OwnerReference{UID: cl.UID}
			}
			t.byOwner[owner.UID] = append(t.byOwner[owner.UID], obj)
		}
	}
	root := capiNode("Cluster", cl, cl.Status.Conditions)
	if ref := cl.Spec.InfrastructureRef; ref.IsDefined() {
		root.Children = append(root.Children, t.infraNode(ctx, ref.APIGroup, ref.Kind, ref.Name))
	}
	if ref := cl.Spec.ControlPlaneRef; ref.IsDefined() {
		root.Children = append(root.Children, t.controlPlaneNode(ctx, ref))
	}
	for _, obj := range t.owned(cl.UID) {
		root.Children = append(root.Children, t.node(ctx, obj))
	}
	v := TraceView{Root: root}
	v.FirstFailure = firstFailure(&v.Root)
	return v, nil
}

// owned are the objects whose controller (or, for the Cluster, whose missing controller) is
// uid, by kind then name.
func (t *tracer) owned(uid types.UID) []client.Object {
	objs := t.byOwner[uid]
	sort.SliceStable(objs, func(i, j int) bool {
		ki, kj := fmt.Sprintf("%T", objs[i]), fmt.Sprintf("%T", objs[j])
		if ki != kj {
			return ki < kj
		}
		return objs[i].GetName() < objs[j].GetName()
	})
	return objs
}

// node is a Cluster API object of the Cluster with what hangs below it.
func (t *tracer) node(ctx context.Context, obj client.Object) TraceNode {
	var n TraceNode
	switch o := obj.(type) {
	case *clusterv1.MachineDeployment:
		n = capiNode("MachineDeployment", o, o.Status.Conditions)
	case *clusterv1.MachineSet:
		n = capiNode("MachineSet", o, o.Status.Conditions)
	case *clusterv1.MachinePool:
		n = capiNode("MachinePool", o, o.Status.Conditions)
		ref := o.Spec.Template.Spec.InfrastructureRef
		n.Children = append(n.Children, t.infraNode(ctx, ref.APIGroup, ref.Kind, ref.Name))
	case *clusterv1.Machine:
		n = capiNode("Machine", o, o.Status.Conditions)
		ref := o.Spec.InfrastructureRef
		n.Children = append(n.Children, t.infraNode(ctx, ref.APIGroup, ref.Kind, ref.Name))
	default:
		return TraceNode{Kind: fmt.Sprintf("%T", obj), Namespace: obj.GetNamespace(), Name: obj.GetName()}
	}
	for _, child := range t.owned(obj.GetUID()) {
		n.Children = append(n.Children, t.node(ctx, child))
	}
	return n
}

// controlPlaneNode is the control plane (any provider's, read as unstructured through the
// contract's status.conditions) and the Machines it controls.
func (t *tracer) controlPlaneNode(ctx context.Context, ref clusterv1.ContractVersionedObjectReference) TraceNode {
	n := TraceNode{Kind: ref.Kind, Namespace: t.ns, Name: ref.Name}
	u, err := t.getContractObject(ctx, ref.APIGroup, ref.Kind, ref.Name)
	if err != nil {
		n.Detail = err.Error()
		n.Failing = true
		return n
	}
	var conds []metav1.Condition
	if raw, found, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); found {
		for _, r := range raw {
			m, ok := r.(map[string]any)
			if !ok {
				continue
			}
			var c metav1.Condition
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c); err == nil {
				conds = append(conds, c)
			}
		}
	}
	n = capiNode(ref.Kind, u, conds)
	for _, child := range t.owned(u.GetUID()) {
		n.Children = append(n.Children, t.node(ctx, child))
	}
	return n
}

// getContractObject reads an object a Cluster API reference names by group and kind: the
// version is the one the CRD's contract label names, found through the RESTMapper (the
// preferred version is enough for reading conditions).
func (t *tracer) getContractObject(ctx context.Context, group, kind, name string) (*unstructured.Unstructured, error) {
	mapping, err := t.c.RESTMapper().RESTMapping(schema.GroupKind{Group: group, Kind: kind})
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", kind, name, err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := t.c.Get(ctx, types.NamespacedName{Namespace: t.ns, Name: name}, u); err != nil {
		return nil, fmt.Errorf("get %s %s/%s: %w", kind, t.ns, name, err)
	}
	return u, nil
}

// infraNode is an infrastructure object a reference names: a CAPTF object with its Job and
// pod, or another provider's object with its Ready condition.
func (t *tracer) infraNode(ctx context.Context, group, kind, name string) TraceNode {
	if group == infrav1.GroupVersion.Group {
		for _, k := range kinds {
			if k.Kind != kind {
				continue
			}
			obj, err := k.newObject(t.c)
			if err == nil {
				err = t.c.Get(ctx, types.NamespacedName{Namespace: t.ns, Name: name}, obj)
			}
			if err != nil {
				return TraceNode{Kind: kind, Namespace: t.ns, Name: name, Failing: true, Detail: "not readable: " + err.Error()}
			}
			return t.captfNode(ctx, k.Kind, obj)
		}
	}
	n := TraceNode{Kind: kind, Namespace: t.ns, Name: name}
	u, err := t.getContractObject(ctx, group, kind, name)
	if err != nil {
		n.Failing, n.Detail = true, err.Error()
		return n
	}
	return capiNode(kind, u, nil)
}

// captfNode is a CAPTF object: its Ready condition, and under it the Job that runs (or ran
// last) and that Job's pod.
func (t *tracer) captfNode(ctx context.Context, kind string, obj terraformObject) TraceNode {
	st := obj.GetTerraformStatus()
	n := TraceNode{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(),
		Condition: meta.FindStatusCondition(st.Conditions, infrav1.ReadyCondition)}
	n.Failing = n.Condition == nil || n.Condition.Status != metav1.ConditionTrue
	job, what := "", ""
	switch {
	case st.ActiveJob != nil:
		job, what = st.ActiveJob.Name, string(st.ActiveJob.Operation)+", running"
	case st.LastRun != nil:
		job, what = st.LastRun.Job, string(st.LastRun.Operation)+", last run"
	}
	if job != "" {
		n.Children = append(n.Children, t.jobNode(ctx, job, what))
	}
	return n
}

// jobNode is a Job and its pod; a Job the history no longer keeps is said to be gone.
func (t *tracer) jobNode(ctx context.Context, name, what string) TraceNode {
	n := TraceNode{Kind: "Job", Namespace: t.ns, Name: name, Detail: what}
	j := &batchv1.Job{}
	found, err := getIfReadable(ctx, t.c, "Job", types.NamespacedName{Namespace: t.ns, Name: name}, j)
	switch {
	case err != nil:
		n.Detail += "; " + err.Error()
		return n
	case !found:
		n.Detail += "; deleted (the Job history keeps the newest per operation) or not readable"
		return n
	}
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			n.Condition = &metav1.Condition{Type: string(c.Type), Status: metav1.ConditionTrue, Reason: c.Reason, Message: c.Message,
				LastTransitionTime: c.LastTransitionTime}
			n.Failing = c.Type == batchv1.JobFailed
		}
	}
	if pod, err := podOf(ctx, t.c, j); err == nil {
		p := TraceNode{Kind: "Pod", Namespace: t.ns, Name: pod.Name, Detail: string(pod.Status.Phase)}
		if pod.Status.Phase == corev1.PodFailed {
			p.Failing = true
		}
		for _, s := range pod.Status.ContainerStatuses {
			if s.State.Terminated != nil && s.State.Terminated.ExitCode != 0 {
				p.Detail += fmt.Sprintf("; container %s exited %d (%s)", s.Name, s.State.Terminated.ExitCode, s.State.Terminated.Reason)
			}
		}
		n.Children = append(n.Children, p)
	}
	return n
}

// capiNode is a Cluster API object with its headline condition: a Machine's Ready, as
// clusterctl describe shows it; Available for the kinds that have it; else Ready, or a
// MachineSet's MachinesReady.
func capiNode(kind string, obj client.Object, conds []metav1.Condition) TraceNode {
	n := TraceNode{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	order := []string{clusterv1.AvailableCondition, clusterv1.ReadyCondition, clusterv1.MachinesReadyCondition}
	if _, machine := obj.(*clusterv1.Machine); machine {
		order = []string{clusterv1.ReadyCondition}
	}
	for _, typ := range order {
		if c := meta.FindStatusCondition(conds, typ); c != nil {
			n.Condition = c
			n.Failing = c.Status != metav1.ConditionTrue
			break
		}
	}
	if obj.GetDeletionTimestamp() != nil {
		n.Detail = "deleting"
	}
	return n
}

// firstFailure is where to look first: the first failing CAPTF object in the order the tree
// prints (its Ready message carries the module's error and what CAPTF waits for), else the
// deepest failing node (a Cluster API object's failure rolls up from below it), the first of
// equals in print order.
func firstFailure(root *TraceNode) *TraceNode {
	var captf, deepest *TraceNode
	depth := -1
	var walk func(n *TraceNode, d int)
	walk = func(n *TraceNode, d int) {
		if n.Failing {
			if captf == nil && isCAPTFKind(n.Kind) {
				captf = n
			}
			if d > depth {
				deepest, depth = n, d
			}
		}
		for i := range n.Children {
			walk(&n.Children[i], d+1)
		}
	}
	walk(root, 0)
	if captf != nil {
		return captf
	}
	return deepest
}

func isCAPTFKind(kind string) bool {
	for _, k := range kinds {
		if k.Kind == kind {
			return true
		}
	}
	return false
}

func renderTrace(p *printer, v TraceView, now time.Time) error {
	renderTraceNode(p, "", "", v.Root, now)
	if f := v.FirstFailure; f != nil {
		p.line("", "")
		p.line("", "look first at %s %s/%s: %s", f.Kind, f.Namespace, f.Name, traceSummary(*f, now))
	}
	return p.err
}

func renderTraceNode(p *printer, head, body string, n TraceNode, now time.Time) {
	mark := ""
	if n.Failing {
		mark = "! "
	}
	p.line(head, "%s%s/%s  %s", mark, n.Kind, n.Name, traceSummary(n, now))
	if c := n.Condition; n.Failing && c != nil && c.Message != "" {
		for _, l := range strings.Split(strings.TrimSpace(c.Message), "\n") {
			p.line(body, "    %s", oneLine(l))
		}
	}
	for i, child := range n.Children {
		branch, cont := "├─ ", "│  "
		if i == len(n.Children)-1 {
			branch, cont = "└─ ", "   "
		}
		renderTraceNode(p, body+branch, body+cont, child, now)
	}
}

// traceSummary is a node's headline condition and detail on one line.
func traceSummary(n TraceNode, now time.Time) string {
	var parts []string
	if c := n.Condition; c != nil {
		parts = append(parts, fmt.Sprintf("%s=%s %s%s", c.Type, c.Status, c.Reason, sinceTime(&c.LastTransitionTime, now)))
	}
	if n.Detail != "" {
		parts = append(parts, n.Detail)
	}
	if len(parts) == 0 {
		return "(no condition reported)"
	}
	return strings.Join(parts, "; ")
}
