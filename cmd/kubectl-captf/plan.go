package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// PlanView is what plan show prints: the pending plan's record, what the plan Secret holds,
// and the plan text. It is the JSON and YAML output of plan show.
type PlanView struct {
	objectID
	// Pending is the controller's record of the plan that waits (annotation
	// captf.io/pending-plan): the ID an approval names.
	Pending *infrav1.PlanRecord `json:"pending"`
	// Secret is the plan Secret; SecretPlanID the plan it holds; ConsumedBy the Job it was
	// handed to, if any.
	Secret       string `json:"secret"`
	SecretPlanID string `json:"secretPlanID,omitempty"`
	ConsumedBy   string `json:"consumedBy,omitempty"`
	// SecretUnreadable says why the plan Secret could not be read (an approver needs no read
	// access to it: it holds the state's secrets); the checks that need it are then left to
	// the webhook and the controller.
	SecretUnreadable string `json:"secretUnreadable,omitempty"`
	// Record is the runner's record of the stored plan (key summary.json): the plan file's
	// SHA-256 and the state it was made against.
	Record *runnerapi.PlanRecord `json:"record,omitempty"`
	// Problem says why approving the pending plan now would not apply it ("" when it would).
	Problem string `json:"problem,omitempty"`
	// Corrupt says why the plan is corrupt: the controller held it as corrupt, or an artifact of
	// the plan Secret does not match the digests the pending plan's record keeps (someone
	// rewrote it after the Plan Job stored it). A corrupt plan's artifacts are not shown, and
	// plan show and approve exit non-zero (docs/runbooks/plan-corrupt.md).
	Corrupt string `json:"corrupt,omitempty"`
	// Text is terraform's plan text (key plan.txt), sensitive values masked.
	Text string `json:"text,omitempty"`
	// Plan is the JSON plan (key plan.json): terraform's show -json, sensitive values masked
	// (docs/runner.md, "Saved plans").
	Plan json.RawMessage `json:"plan,omitempty"`
}

func newPlanCommand(o *options) *cobra.Command {
	plan := &cobra.Command{Use: "plan", Short: "Read saved plans"}
	show := viewCommand(o, "show KIND/NAME",
		"Show the plan that waits for approval: its ID, counts, addresses and terraform's plan text",
		readPendingPlan, renderPlan)
	plan.AddCommand(show)
	return plan
}

// readPendingPlan is readPlan for plan show: an error when no plan waits or the plan is corrupt.
func readPendingPlan(ctx context.Context, c client.Client, t target) (PlanView, error) {
	v, err := readPlan(ctx, c, t)
	switch {
	case err != nil:
		return v, err
	case v.Pending == nil:
		return v, &exitError{code: exitFailed, msg: "no plan waits for approval on " + t.ref()}
	case v.Corrupt != "":
		return v, corruptError(v, t.ref())
	}
	return v, nil
}

// readPlan reads the pending plan's record from the object and the plan Secret beside it.
func readPlan(ctx context.Context, c client.Client, t target) (PlanView, error) {
	v := PlanView{objectID: t.id(),
		Pending: infrav1.ParsePlanRecord(t.obj.GetAnnotations()[infrav1.PendingPlanAnnotation])}
	v.Secret = naming.PlanSecretName(naming.StateSuffix(v.Namespace, v.Kind, v.Name))
	if v.Pending != nil && v.Pending.Secret != "" {
		v.Secret = v.Pending.Secret
	}
	if v.Pending == nil {
		return v, nil
	}
	s := &corev1.Secret{}
	err := c.Get(ctx, types.NamespacedName{Namespace: v.Namespace, Name: v.Secret}, s)
	switch {
	case apierrors.IsNotFound(err):
	case apierrors.IsForbidden(err):
		v.SecretUnreadable = err.Error()
	case err != nil:
		return v, fmt.Errorf("get the plan Secret %s/%s: %w", v.Namespace, v.Secret, err)
	default:
		v.SecretPlanID = s.Annotations[runnerapi.PlanIDAnnotation]
		v.ConsumedBy = s.Annotations[runnerapi.PlanConsumedByAnnotation]
		if v.Corrupt = artifactsProblem(v.Pending, v.SecretPlanID, s.Data); v.Corrupt != "" || v.SecretPlanID != v.Pending.ID {
			// Only artifacts bound to the pending plan are shown.
			break
		}
		v.Text = string(s.Data[runnerapi.PlanTextKey])
		if raw := s.Data[runnerapi.PlanJSONKey]; json.Valid(raw) {
			v.Plan = raw
		}
		if raw := s.Data[runnerapi.PlanRecordKey]; len(raw) > 0 {
			rec := &runnerapi.PlanRecord{}
			if err := json.Unmarshal(raw, rec); err == nil {
				v.Record = rec
			}
		}
	}
	if v.Corrupt == "" && v.Pending.IsCorrupt() {
		v.Corrupt = "the controller holds it as corrupt: " + v.Pending.Corrupt
	}
	v.Problem = approvalProblem(v.Pending, t.obj.GetAnnotations(), t.obj.GetTerraformStatus().ActiveJob, v.marks(), "")
	return v, nil
}

// artifactsProblem checks the plan Secret's artifacts (data) against the digests the pending
// plan's record keeps, which only the controller writes (from the Plan Job's result): "" when
// every one matches, or when the Secret holds another plan (superseded, not corrupt); else why
// the plan is corrupt, naming the artifacts.
func artifactsProblem(pending *infrav1.PlanRecord, secretPlanID string, data map[string][]byte) string {
	if secretPlanID != pending.ID {
		return ""
	}
	d := pending.Digests
	if d == nil {
		return "the pending plan's record keeps no digests of its artifacts, so nothing shows that the plan Secret holds what the Plan Job stored"
	}
	if err := (runnerapi.PlanDigests{File: d.File, Record: d.Record, JSON: d.JSON, Text: d.Text}).Verify(data); err != nil {
		return err.Error()
	}
	return ""
}

// corruptError ends plan show and approve of a corrupt plan.
func corruptError(v PlanView, ref string) error {
	return &exitError{code: exitFailed, msg: fmt.Sprintf("plan %s on %s is corrupt and is not shown: %s; it will never be applied (docs/runbooks/plan-corrupt.md)",
		v.Pending.ID, ref, v.Corrupt)}
}

// secretMarks is what the plan Secret's annotations say: the plan it holds ("" for none) and
// the Job it was handed to.
type secretMarks struct{ planID, consumedBy string }

// marks are the plan Secret's marks; nil when the caller may not read the Secret.
func (v PlanView) marks() *secretMarks {
	if v.SecretUnreadable != "" {
		return nil
	}
	return &secretMarks{planID: v.SecretPlanID, consumedBy: v.ConsumedBy}
}

func renderPlan(p *printer, v PlanView) error {
	pp := v.Pending
	kind := "plan"
	switch {
	case pp.RefreshOnly:
		kind = "refresh-only plan (approved, a Refresh Job records it in the state; no infrastructure changes)"
	case pp.Destroy:
		kind = "destroy plan (the object is being deleted; approved, a Destroy Job destroys exactly what it lists)"
	}
	p.line("", "%s %s/%s: %s %s", v.Kind, v.Namespace, v.Name, kind, pp.ID)
	p.line("", "  waits because: %s", pp.Reason)
	p.line("", "  changes:       %s", pp.Counts())
	if pp.Target != "" {
		p.line("", "  carries out:   %s (captf.io/target-operation)", pp.Target)
	}
	p.line("", "  made by Job %s against state serial %d, lineage %s, inputs %s", pp.Job, pp.Serial, pp.Lineage, pp.InputsHash)
	if !pp.Created.IsZero() {
		p.line("", "  made at:       %s", pp.Created.UTC().Format("2006-01-02T15:04:05Z"))
	}
	if v.Record != nil {
		p.line("", "  plan file:     sha256 %s (Secret %s)", v.Record.FileSHA256, v.Secret)
	}
	for _, a := range pp.Addresses {
		p.line("", "    %s", a)
	}
	for _, viol := range pp.Violations {
		p.line("", "  BREAKS A PLAN POLICY RULE: %s", viol)
	}
	if v.Problem != "" {
		p.line("", "  NOT APPROVABLE NOW: %s", v.Problem)
	} else {
		p.line("", "  approve:       kubectl captf approve %s/%s", strings.ToLower(v.Kind), v.Name)
	}
	p.line("", "")
	switch {
	case v.SecretUnreadable != "":
		p.line("", "(the plan text is in Secret %s, which you may not read: %s)", v.Secret, v.SecretUnreadable)
	case v.SecretPlanID != pp.ID:
		p.line("", "(the plan Secret holds another plan; its text is not shown)")
	case v.Text == "":
		p.line("", "(the plan Secret holds no plan text)")
	default:
		p.line("", "%s", strings.TrimRight(v.Text, "\n"))
	}
	return p.err
}

// approvalProblem says why approving the pending plan now would not apply it, or why wanted
// (an ID the caller named; "" for none) is not the plan that waits; "" when the approval
// would be admitted and acted on. It reads only the durable records: the object's
// annotations, its active Job, and the plan Secret's marks (docs/plans.md, "What supersedes a
// plan" and "At most once"); with no marks (the caller may not read the Secret) it judges
// without them, and the controller still never applies a superseded or spent plan.
func approvalProblem(rec *infrav1.PlanRecord, ann map[string]string, active *infrav1.ActiveJob, marks *secretMarks, wanted string) string {
	switch {
	case rec == nil && wanted != "":
		return fmt.Sprintf("plan %s does not wait for approval: no plan waits", wanted)
	case rec == nil:
		return "no plan waits for approval"
	case wanted != "" && wanted != rec.ID:
		return fmt.Sprintf("plan %s is not the one that waits: the plan that waits for approval is %s (%s)", wanted, rec.ID, rec.Counts())
	case ann[infrav1.AppliedPlanAnnotation] == rec.ID:
		return fmt.Sprintf("plan %s was already applied (%s): a plan is applied at most once", rec.ID, infrav1.AppliedPlanAnnotation)
	case active != nil && active.Operation == infrav1.OperationPlan:
		return fmt.Sprintf("Plan Job %s is making a new plan, which supersedes %s: approve the new plan once it waits", active.Name, rec.ID)
	case marks == nil:
		return ""
	case marks.planID == "":
		return fmt.Sprintf("the plan Secret holds no plan, so plan %s can no longer be applied; a new plan follows", rec.ID)
	case marks.planID != rec.ID:
		return fmt.Sprintf("the plan Secret holds plan %s, not %s: the pending plan was superseded", marks.planID, rec.ID)
	case marks.consumedBy != "":
		return fmt.Sprintf("plan %s was already handed to Job %s: a plan is applied at most once", rec.ID, marks.consumedBy)
	}
	return ""
}

func newApproveCommand(o *options) *cobra.Command {
	var yes bool
	var planID string
	cmd := o.objectCommand("approve KIND/NAME",
		"Approve the plan that waits: names its ID (annotation captf.io/approve-plan), after a confirmation unless --yes",
		func(ctx context.Context, c client.Client, t target) error {
			v, err := readPlan(ctx, c, t)
			if err != nil {
				return err
			}
			ann := t.obj.GetAnnotations()
			if v.Pending != nil && v.Corrupt != "" {
				return corruptError(v, t.ref())
			}
			if problem := approvalProblem(v.Pending, ann, t.obj.GetTerraformStatus().ActiveJob, v.marks(), planID); problem != "" {
				return refused("%s on %s", problem, t.ref())
			}
			rec := v.Pending
			if ann[infrav1.ApprovePlanAnnotation] == rec.ID {
				_, err := fmt.Fprintf(o.streams.Out, "plan %s on %s is already approved\n", rec.ID, t.ref())
				return err
			}
			p := &printer{w: o.streams.Out}
			p.line("", "plan %s on %s (%s; waits because: %s):", rec.ID, t.ref(), rec.Counts(), rec.Reason)
			for _, a := range rec.Addresses {
				p.line("", "  %s", a)
			}
			if p.err != nil {
				return p.err
			}
			if err := o.confirm(yes, "Approve plan "+rec.ID+"?"); err != nil {
				return err
			}
			if err := setAnnotation(ctx, c, t, infrav1.ApprovePlanAnnotation, rec.ID); err != nil {
				return err
			}
			_, err = fmt.Fprintf(o.streams.Out, "approved plan %s on %s: the next pass applies exactly this plan, once\n", rec.ID, t.ref())
			return err
		})
	cmd.Flags().BoolVar(&yes, "yes", false, "approve without asking")
	cmd.Flags().StringVar(&planID, "plan-id", "", "approve only if this is the ID of the plan that waits (the ID plan show printed)")
	return cmd
}
