package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// Report is what status shows: a Cluster (when one was named or found) and its CAPTF objects.
// It is the JSON and YAML output of status.
type Report struct {
	Cluster *ClusterNode `json:"cluster,omitempty"`
	Objects []ObjectNode `json:"objects"`
	// ExitCode is the code status ends with (docs/cli.md, "Exit codes").
	ExitCode int `json:"exitCode"`
	// grouped: the objects of a whole namespace, which the tree groups by their Cluster
	// (the objects are sorted by it).
	grouped bool
	// allNamespaces: the objects come from every namespace (status -A); the tree groups them
	// by namespace and Cluster, the table has a NAMESPACE column.
	allNamespaces bool
	// resources: the tree lists each object's resource addresses (status --resources).
	resources bool
	// allConditions: the tree lists every condition (status --all-conditions).
	allConditions bool
}

// ClusterNode is the Cluster API Cluster at the root of the tree.
type ClusterNode struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Phase     string `json:"phase,omitempty"`
	// Available is the Cluster's Available condition (Cluster API v1beta2 has no Ready).
	Available *metav1.Condition `json:"available,omitempty"`
	Paused    bool              `json:"paused,omitempty"`
	Missing   bool              `json:"missing,omitempty"`
	// ClusterLease is the holder of the cluster lease: the Job of the Cluster's objects that
	// may change infrastructure now (docs/leases.md).
	ClusterLease string `json:"clusterLeaseHolder,omitempty"`
}

// ObjectNode is one TerraformCluster, TerraformMachine or TerraformMachinePool.
type ObjectNode struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	Cluster   string `json:"cluster,omitempty"`
	Deleting  bool   `json:"deleting,omitempty"`

	Ready       *metav1.Condition     `json:"ready,omitempty"`
	Provisioned bool                  `json:"provisioned"`
	ActiveJob   *infrav1.ActiveJob    `json:"activeJob,omitempty"`
	LastRun     *infrav1.LastRun      `json:"lastRun,omitempty"`
	PendingPlan *infrav1.PlanRecord   `json:"pendingPlan,omitempty"`
	Drift       *metav1.Condition     `json:"drift,omitempty"`
	LastDrift   *metav1.Time          `json:"lastDriftCheck,omitempty"`
	State       StateNode             `json:"state"`
	RunLease    string                `json:"runLeaseHolder,omitempty"`
	RetryAt     string                `json:"retryAt,omitempty"`
	Backups     []infrav1.StateBackup `json:"stateBackups,omitempty"`
	// Inventory is the object's inventory Secret (docs/state.md, "The inventory"): what its
	// state held after its last successful apply. Absent before the first apply, or when the
	// caller may not read the Secret.
	Inventory *state.Inventory `json:"inventory,omitempty"`
	// Conditions are every condition the object reports; Problems the ones that need a look
	// (a positive condition not True, a negative one True).
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	Problems   []metav1.Condition `json:"problems,omitempty"`
}

// StateNode is what the object says of its Terraform state, without reading the state itself
// (reading it is reading the infrastructure's secrets).
type StateNode struct {
	// Lineage is the lineage the object recorded as its own (annotation).
	Lineage string `json:"lineage,omitempty"`
	// NewestBackupSerial is the serial of the newest backup (status.stateBackups).
	NewestBackupSerial *int64 `json:"newestBackupSerial,omitempty"`
	// PlannedSerial is the serial the pending plan was made against.
	PlannedSerial *int64 `json:"plannedSerial,omitempty"`
}

// negative are the condition types for which True is the bad state.
var negative = map[string]bool{
	infrav1.DriftDetectedCondition:   true,
	infrav1.PausedCondition:          true,
	infrav1.DeletingCondition:        true,
	infrav1.DeletionBlockedCondition: true,
}

// problems are the conditions that need a look: a negative condition that is True, any other
// that is not True; Ready itself is shown on its own. InfrastructureHealthy Unknown because the
// module exports no health output is a module's choice, not a fault (the controller's event
// says so too): it is listed only with --all-conditions.
func problems(cs []metav1.Condition) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range cs {
		if c.Type == infrav1.ReadyCondition ||
			(c.Type == infrav1.InfrastructureHealthyCondition && c.Reason == infrav1.NoHealthOutputReason) {
			continue
		}
		bad := c.Status != metav1.ConditionTrue
		if negative[c.Type] {
			bad = c.Status == metav1.ConditionTrue
		}
		if bad {
			out = append(out, c)
		}
	}
	return out
}

// objectNode builds an object's node from the object and the holder of its run lease.
func objectNode(kind string, obj terraformObject, runLeaseHolder string) ObjectNode {
	st := obj.GetTerraformStatus()
	ann := obj.GetAnnotations()
	n := ObjectNode{
		Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: string(obj.GetUID()),
		Cluster:     obj.GetLabels()[infrav1.ClusterNameLabel],
		Deleting:    obj.GetDeletionTimestamp() != nil,
		Ready:       meta.FindStatusCondition(st.Conditions, infrav1.ReadyCondition),
		Provisioned: st.IsProvisioned(),
		ActiveJob:   st.ActiveJob,
		LastRun:     st.LastRun,
		PendingPlan: infrav1.ParsePlanRecord(ann[infrav1.PendingPlanAnnotation]),
		Drift:       meta.FindStatusCondition(st.Conditions, infrav1.DriftDetectedCondition),
		LastDrift:   st.LastDriftCheck,
		RunLease:    runLeaseHolder,
		RetryAt:     ann[infrav1.RetryAtAnnotation],
		Backups:     st.StateBackups,
		Conditions:  st.Conditions,
		Problems:    problems(st.Conditions),
	}
	n.State.Lineage = ann[infrav1.StateLineageAnnotation]
	if len(st.StateBackups) > 0 {
		s := st.StateBackups[0].Serial
		n.State.NewestBackupSerial = &s
	}
	if n.PendingPlan != nil {
		s := n.PendingPlan.Serial
		n.State.PlannedSerial = &s
	}
	return n
}

// ready reports a Ready condition that is True.
func ready(c *metav1.Condition) bool { return c != nil && c.Status == metav1.ConditionTrue }

// exitCode is the code status ends with: not Ready beats attention beats OK. It judges the
// CAPTF objects (and a Cluster that was named but does not exist); the Cluster's own
// Available depends on providers beyond CAPTF and is shown, not judged.
func exitCode(r Report) int {
	code := exitOK
	if r.Cluster != nil && r.Cluster.Missing {
		code = exitNotReady
	}
	for _, o := range r.Objects {
		switch {
		case !ready(o.Ready):
			code = exitNotReady
		case code == exitOK && (o.PendingPlan != nil || (o.Drift != nil && o.Drift.Status == metav1.ConditionTrue)):
			code = exitAttention
		}
	}
	return code
}

// renderTree prints the report as a tree, like clusterctl describe: one line per object, and
// under it what runs, what ran, the state, the pending plan, drift and the conditions that
// need a look (all of them with showAll).
func renderTree(w io.Writer, r Report, now time.Time, showAll bool) error {
	p := &printer{w: w, resources: r.resources}
	indent := ""
	if c := r.Cluster; c != nil {
		switch {
		case c.Missing:
			p.line("", "Cluster %s/%s: not found", c.Namespace, c.Name)
		default:
			extra := ""
			if c.Phase != "" {
				extra = " phase " + c.Phase
			}
			if c.Paused {
				extra += " (paused)"
			}
			p.line("", "Cluster %s/%s  %s%s", c.Namespace, c.Name, availableWord(c.Available), extra)
			if c.Available != nil && c.Available.Status != metav1.ConditionTrue && c.Available.Message != "" {
				p.line("  ", "  %s", oneLine(c.Available.Message))
			}
			if c.ClusterLease != "" {
				p.line("  ", "cluster lease: held by %s", c.ClusterLease)
			}
		}
		indent = "  "
	}
	switch {
	case len(r.Objects) == 0:
		p.line(indent, "no TerraformCluster, TerraformMachine or TerraformMachinePool found")
	case r.Cluster != nil:
		renderBranches(p, indent, r.Objects, now, showAll)
	case r.grouped:
		for start := 0; start < len(r.Objects); {
			first := r.Objects[start]
			end := start
			for end < len(r.Objects) && r.Objects[end].Cluster == first.Cluster && r.Objects[end].Namespace == first.Namespace {
				end++
			}
			switch {
			case first.Cluster != "":
				p.line("", "Cluster %s/%s", first.Namespace, first.Cluster)
			case r.allNamespaces:
				p.line("", "%s: (no %s label)", first.Namespace, infrav1.ClusterNameLabel)
			default:
				p.line("", "(no %s label)", infrav1.ClusterNameLabel)
			}
			renderBranches(p, "  ", r.Objects[start:end], now, showAll)
			start = end
		}
	default:
		for _, o := range r.Objects {
			renderObject(p, "", "  ", o, now, showAll)
		}
	}
	return p.err
}

// renderBranches prints objects as the branches of one tree node.
func renderBranches(p *printer, indent string, objs []ObjectNode, now time.Time, showAll bool) {
	for i, o := range objs {
		branch, cont := "├─ ", "│  "
		if i == len(objs)-1 {
			branch, cont = "└─ ", "   "
		}
		renderObject(p, indent+branch, indent+cont, o, now, showAll)
	}
}

func renderObject(p *printer, head, body string, o ObjectNode, now time.Time, showAll bool) {
	extra := ""
	if o.Provisioned {
		extra += " provisioned"
	}
	if o.Deleting {
		extra += " deleting"
	}
	p.line(head, "%s/%s  %s%s", o.Kind, o.Name, condWord(o.Ready, now), extra)
	if o.Ready != nil && o.Ready.Status != metav1.ConditionTrue {
		p.line(body, "  %s", oneLine(o.Ready.Message))
	}
	if j := o.ActiveJob; j != nil {
		p.line(body, "job:       %s %s running%s", j.Operation, j.Name, sinceTime(j.StartTime, now))
	}
	if l := o.LastRun; l != nil {
		msg := ""
		if l.Message != "" {
			msg = ": " + oneLine(l.Message)
		}
		p.line(body, "last run:  %s %s %s%s%s", l.Operation, l.Job, l.Outcome, sinceTime(l.FinishedAt, now), msg)
	}
	if o.RunLease != "" {
		p.line(body, "run lease: held by %s", o.RunLease)
	}
	if o.RetryAt != "" {
		p.line(body, "retry at:  %s (kubectl captf retry to retry now)", o.RetryAt)
	}
	p.line(body, "state:     %s", stateLine(o.State))
	if inv := o.Inventory; inv != nil {
		p.line(body, "resources: %s", inventoryLine(inv))
		if p.resources {
			for _, r := range inv.Resources {
				p.line(body, "  %s", r.Address)
			}
			if more := inv.Total - len(inv.Resources); more > 0 {
				p.line(body, "  ... %d more not listed", more)
			}
		}
	}
	if pp := o.PendingPlan; pp != nil {
		kind := "plan"
		switch {
		case pp.RefreshOnly:
			kind = "refresh-only plan"
		case pp.Destroy:
			kind = "destroy plan"
		}
		p.line(body, "plan:      %s %s waits for approval (%s; %s): kubectl captf plan show %s/%s", kind, pp.ID, pp.Reason, pp.Counts(), strings.ToLower(o.Kind), o.Name)
	}
	if d := o.Drift; d != nil {
		p.line(body, "drift:     %s%s", condLine(*d, now), lastCheck(o.LastDrift, now))
	}
	conds := o.Problems
	if showAll {
		conds = o.Conditions
	}
	for _, c := range conds {
		if c.Type == infrav1.DriftDetectedCondition {
			continue // on the drift line
		}
		mark := "!"
		if showAll {
			mark = "-"
		}
		p.line(body, "%s %s", mark, condLine(c, now))
	}
}

func stateLine(s StateNode) string {
	var parts []string
	if s.Lineage != "" {
		parts = append(parts, "lineage "+s.Lineage)
	}
	if s.NewestBackupSerial != nil {
		parts = append(parts, fmt.Sprintf("newest backup serial %d", *s.NewestBackupSerial))
	}
	if s.PlannedSerial != nil {
		parts = append(parts, fmt.Sprintf("plan made at serial %d", *s.PlannedSerial))
	}
	if len(parts) == 0 {
		return "none recorded yet"
	}
	return strings.Join(parts, ", ")
}

// inventoryLine is the count of an inventory: "3 (2 managed, 1 data) at serial 5", and the
// truncation when the list is cut.
func inventoryLine(inv *state.Inventory) string {
	s := fmt.Sprintf("%d (%d managed, %d data) at serial %d", inv.Total, inv.Managed, inv.Total-inv.Managed, inv.Serial)
	if inv.Truncated {
		s += fmt.Sprintf(", %d listed (truncated)", len(inv.Resources))
	}
	return s
}

// condWord is Ready's short form: "Ready", or "NotReady (Reason)", or "Ready unknown".
func condWord(c *metav1.Condition, now time.Time) string {
	switch {
	case c == nil:
		return "Ready: not reported yet"
	case c.Status == metav1.ConditionTrue:
		return "Ready" + sinceTime(&c.LastTransitionTime, now)
	case c.Status == metav1.ConditionFalse:
		return "NotReady (" + c.Reason + ")" + sinceTime(&c.LastTransitionTime, now)
	}
	return "Ready Unknown (" + c.Reason + ")"
}

// availableWord is the Cluster's Available condition in short.
func availableWord(c *metav1.Condition) string {
	switch {
	case c == nil:
		return "Available: not reported yet"
	case c.Status == metav1.ConditionTrue:
		return "Available"
	}
	return fmt.Sprintf("Available=%s (%s)", c.Status, c.Reason)
}

func condLine(c metav1.Condition, now time.Time) string {
	s := fmt.Sprintf("%s=%s %s%s", c.Type, c.Status, c.Reason, sinceTime(&c.LastTransitionTime, now))
	if c.Message != "" {
		s += ": " + oneLine(c.Message)
	}
	return s
}

func lastCheck(t *metav1.Time, now time.Time) string {
	if t == nil {
		return ""
	}
	return " (last check" + sinceTime(t, now) + ")"
}

// sinceTime is " 5m ago" for a time, "" for none.
func sinceTime(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	d := now.Sub(t.Time)
	if d < 0 {
		d = 0
	}
	return " " + shortDuration(d) + " ago"
}

// shortDuration is a duration as kubectl's AGE column prints it, roughly: 45s, 12m, 3h, 2d.
func shortDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// oneLine keeps the first line of a message, at most 200 characters.
func oneLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "..."
	}
	return s
}

// printer writes lines and keeps the first error.
type printer struct {
	w   io.Writer
	err error
	// resources: renderTree lists the inventory's addresses.
	resources bool
}

func (p *printer) line(prefix, format string, args ...any) {
	if p.err != nil {
		return
	}
	_, p.err = fmt.Fprint(p.w, prefix, fmt.Sprintf(format, args...), "\n")
}
