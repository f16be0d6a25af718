package main

import (
	"slices"
	"testing"
)

// TestGroupFlagsAreReadWithTheOneParser: every group-list flag is trimmed, and empty and
// repeated entries are dropped (a group " platform" would never match anyone).
func TestGroupFlagsAreReadWithTheOneParser(t *testing.T) {
	o, _, err := parseFlags([]string{"--guard-override-groups", "sre, platform ,,sre", "--plan-approver-groups", " approvers ,oncall:sre"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"sre", "platform"}; !slices.Equal(o.GuardOverrideGroups, want) {
		t.Errorf("--guard-override-groups = %q, want %q", o.GuardOverrideGroups, want)
	}
	if want := []string{"approvers", "oncall:sre"}; !slices.Equal(o.PlanApproverGroups, want) {
		t.Errorf("--plan-approver-groups = %q, want %q", o.PlanApproverGroups, want)
	}
	o, _, err = parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.GuardOverrideGroups != nil || o.PlanApproverGroups != nil || o.DisableClusterOperationGate {
		t.Errorf("defaults: override %q, approvers %q, gate off %v", o.GuardOverrideGroups, o.PlanApproverGroups, o.DisableClusterOperationGate)
	}
}
