package webhooks_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// planMarks is an object's marks with these annotations (nil: none at all).
func planMarks(ann map[string]string) *webhooks.Marks {
	m := &webhooks.Marks{}
	m.Annotations = ann
	return m
}

const (
	pendingID = "0123456789abcdef0123456789abcdef"
	oldID     = "fedcba9876543210fedcba9876543210"
)

func pendingRecord() *infrav1.PlanRecord {
	return &infrav1.PlanRecord{ID: pendingID, InputsHash: "sha256:2", Serial: 4, Create: 1, Replace: 1,
		Addresses: []string{"terraform_data.extra[0]", "terraform_data.slow"}}
}

func TestParseGroups(t *testing.T) {
	for in, want := range map[string][]string{
		"":                          nil,
		" , ,":                      nil,
		"platform-approvers":        {"platform-approvers"},
		" a , b,a,,c ":              {"a", "b", "c"},
		"system:masters,oncall:sre": {"system:masters", "oncall:sre"},
	} {
		if got := webhooks.ParseGroups(in); !slices.Equal(got, want) {
			t.Errorf("ParseGroups(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDiffPlan(t *testing.T) {
	pending := pendingRecord().Annotation()
	for _, c := range []struct {
		name          string
		old, new      map[string]string
		approvalSet   bool
		approval      string
		records       []string
		judged        bool
		noAnnotations bool
	}{
		{name: "nothing on either side", old: nil, new: nil},
		{name: "an unrelated annotation", old: nil, new: map[string]string{"note": "x"}},
		{name: "sets approve-plan", old: nil, new: map[string]string{infrav1.ApprovePlanAnnotation: pendingID},
			approvalSet: true, approval: pendingID, judged: true},
		{name: "sets approve-plan to the empty string", old: map[string]string{}, new: map[string]string{infrav1.ApprovePlanAnnotation: ""},
			approvalSet: true, approval: "", judged: true},
		{name: "changes approve-plan", old: map[string]string{infrav1.ApprovePlanAnnotation: oldID},
			new: map[string]string{infrav1.ApprovePlanAnnotation: pendingID}, approvalSet: true, approval: pendingID, judged: true},
		{name: "keeps approve-plan", old: map[string]string{infrav1.ApprovePlanAnnotation: pendingID},
			new: map[string]string{infrav1.ApprovePlanAnnotation: pendingID, "note": "x"}},
		{name: "removes approve-plan (not an approval)", old: map[string]string{infrav1.ApprovePlanAnnotation: pendingID}, new: nil},
		{name: "sets pending-plan", old: nil, new: map[string]string{infrav1.PendingPlanAnnotation: pending},
			records: []string{infrav1.PendingPlanAnnotation}, judged: true},
		{name: "changes pending-plan", old: map[string]string{infrav1.PendingPlanAnnotation: pending},
			new: map[string]string{infrav1.PendingPlanAnnotation: `{"id":"x"}`}, records: []string{infrav1.PendingPlanAnnotation}, judged: true},
		{name: "removes pending-plan", old: map[string]string{infrav1.PendingPlanAnnotation: pending}, new: map[string]string{},
			records: []string{infrav1.PendingPlanAnnotation}, judged: true},
		{name: "sets pending-plan to the empty string", old: map[string]string{}, new: map[string]string{infrav1.PendingPlanAnnotation: ""},
			records: []string{infrav1.PendingPlanAnnotation}, judged: true},
		{name: "sets applied-plan", old: nil, new: map[string]string{infrav1.AppliedPlanAnnotation: pendingID},
			records: []string{infrav1.AppliedPlanAnnotation}, judged: true},
		{name: "removes applied-plan", old: map[string]string{infrav1.AppliedPlanAnnotation: pendingID}, new: nil,
			records: []string{infrav1.AppliedPlanAnnotation}, judged: true},
		{name: "the controller's bookkeeping: applied set, pending and approval removed",
			old:     map[string]string{infrav1.PendingPlanAnnotation: pending, infrav1.ApprovePlanAnnotation: pendingID},
			new:     map[string]string{infrav1.AppliedPlanAnnotation: pendingID},
			records: []string{infrav1.PendingPlanAnnotation, infrav1.AppliedPlanAnnotation}, judged: true},
		{name: "keeps both records", old: map[string]string{infrav1.PendingPlanAnnotation: pending, infrav1.AppliedPlanAnnotation: oldID},
			new: map[string]string{infrav1.PendingPlanAnnotation: pending, infrav1.AppliedPlanAnnotation: oldID, "note": "x"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The plan records are judged with the manager's other records (DiffRecords).
			ch := webhooks.DiffPlan(planMarks(c.old), planMarks(c.new))
			recs := webhooks.DiffRecords(planMarks(c.old), planMarks(c.new)).Records
			if ch.ApprovalSet != c.approvalSet || ch.Approval != c.approval || !slices.Equal(recs, c.records) || (ch.Judged() || len(recs) > 0) != c.judged {
				t.Fatalf("DiffPlan = %+v (judged %v), records %q, want approvalSet %v %q, records %q, judged %v",
					ch, ch.Judged(), recs, c.approvalSet, c.approval, c.records, c.judged)
			}
		})
	}
}

func TestJudgePlan(t *testing.T) {
	ref := webhooks.ObjectRef{Kind: infrav1.TerraformClusterKind, Namespace: "prod", Name: "c"}
	approvers := webhooks.Approvers{Groups: []string{"platform-approvers", "oncall"}}
	approver := authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated", "oncall"}}
	dev := authenticationv1.UserInfo{Username: "dev", Groups: []string{"system:authenticated", "devs"}}
	approve := func(id string) webhooks.PlanChange { return webhooks.PlanChange{ApprovalSet: true, Approval: id} }
	for _, c := range []struct {
		name      string
		ch        webhooks.PlanChange
		user      authenticationv1.UserInfo
		approvers webhooks.Approvers
		pending   *infrav1.PlanRecord
		allowed   bool
		approved  bool
		says      []string
	}{
		{name: "nothing judged", ch: webhooks.PlanChange{}, user: dev, approvers: approvers, allowed: true},
		{name: "an approver approves the pending plan", ch: approve(pendingID), user: approver, approvers: approvers, pending: pendingRecord(),
			allowed: true, approved: true},
		{name: "a user outside the groups", ch: approve(pendingID), user: dev, approvers: approvers, pending: pendingRecord(),
			says: []string{`user "dev" may not approve plans`, "only members of the groups platform-approvers, oncall may approve a plan", "--plan-approver-groups"}},
		{name: "no approver group configured: not even an approver of another install", ch: approve(pendingID), user: approver,
			approvers: webhooks.Approvers{}, pending: pendingRecord(),
			says: []string{"no approver group is configured, so nobody may approve a plan", "--plan-approver-groups=<group>"}},
		{name: "the manager is no approver", ch: approve(pendingID), user: authenticationv1.UserInfo{Username: "system:serviceaccount:captf-system:captf-controller-manager"},
			approvers: approvers, pending: pendingRecord(), says: []string{"may not approve plans"}},
		{name: "an old plan's ID", ch: approve(oldID), user: approver, approvers: approvers, pending: pendingRecord(),
			says: []string{`approves plan "` + oldID + `"`, "the plan that waits for approval is " + pendingID, "create 1, update 0, replace 1, delete 0",
				"kubectl get terraformcluster c"}},
		{name: "an ID while no plan waits", ch: approve(pendingID), user: approver, approvers: approvers, pending: nil,
			says: []string{"no plan waits for approval"}},
		{name: "an empty ID", ch: approve(""), user: approver, approvers: approvers, pending: pendingRecord(),
			says: []string{"the plan that waits for approval is " + pendingID}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := webhooks.JudgePlan(c.ch, c.user, c.approvers, c.pending, ref)
			if v.Allowed != c.allowed {
				t.Fatalf("allowed = %v, want %v: %s", v.Allowed, c.allowed, v.Message)
			}
			if (v.Approved != nil) != c.approved {
				t.Fatalf("approved = %v, want %v", v.Approved, c.approved)
			}
			if c.approved && v.Approved.ID != pendingID {
				t.Fatalf("approved plan %s", v.Approved.ID)
			}
			if v.Allowed && v.Message != "" {
				t.Fatalf("an allowed verdict with a message: %s", v.Message)
			}
			for _, s := range c.says {
				if !strings.Contains(v.Message, s) {
					t.Errorf("message %q does not say %q", v.Message, s)
				}
			}
		})
	}
}

func TestApproversMember(t *testing.T) {
	a := webhooks.Approvers{Groups: []string{"approvers"}}
	if !a.Member(authenticationv1.UserInfo{Groups: []string{"x", "approvers"}}) {
		t.Error("a member is not recognised")
	}
	if a.Member(authenticationv1.UserInfo{Username: "approvers", Groups: []string{"x"}}) {
		t.Error("a username is no group")
	}
	if a.Member(authenticationv1.UserInfo{Groups: []string{""}}) || (webhooks.Approvers{}).Member(authenticationv1.UserInfo{Groups: []string{"approvers"}}) {
		t.Error("an empty group or an empty list admits someone")
	}
}

func TestGuardDeniesAForgedPlanRecordBeforeReadingAnything(t *testing.T) {
	g, reads := guardOver(t, true)
	g.Identities = webhooks.Identities{Manager: "system:serviceaccount:captf-system:captf-controller-manager"}
	forged := machine(true)
	forged.Annotations[infrav1.AppliedPlanAnnotation] = pendingID
	resp := g.Handle(context.Background(), updateRequest(t, "", machine(true), forged))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "only the CAPTF manager may write them") {
		t.Fatalf("a forged applied-plan passed: %+v", resp.Result)
	}
	if *reads != 0 {
		t.Fatalf("%d reads for a refused plan record", *reads)
	}
}
