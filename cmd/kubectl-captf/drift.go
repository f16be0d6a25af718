package main

import (
	"github.com/spf13/cobra"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

func newDriftCommand(o *options) *cobra.Command {
	drift := &cobra.Command{Use: "drift", Short: "Drift checks"}
	drift.AddCommand(o.requestCommand("check KIND/NAME [--value V]",
		"Ask for one drift check now, whatever the schedule says (annotation captf.io/drift-check)",
		"drift check", infrav1.DriftCheckAnnotation, func(t target) string { return driftCheckWhen(t.obj) }))
	return drift
}

// driftCheckWhen says when the controller starts the check asked for, from what the object
// shows: the rules are the controller's (docs/drift.md, "A check now"), this is only a hint.
func driftCheckWhen(obj terraformObject) string {
	ann, st := obj.GetAnnotations(), obj.GetTerraformStatus()
	_, paused := ann[infrav1.PausedAnnotation]
	const then = "; bookkeeping removes the annotation once the check ended, and an event DriftCheckAnswered says how"
	switch {
	case paused:
		return "the object is paused: the Drift Job runs once it is unpaused" + then
	case ann[infrav1.AppliedHashAnnotation] == "" && !st.IsProvisioned():
		return "the object has not applied yet: the Drift Job runs after its first apply" + then
	case st.ActiveJob != nil && st.ActiveJob.Name != "":
		return "Job " + st.ActiveJob.Name + " runs now: the Drift Job follows it, after any apply, restore or refresh that is wanted" + then
	}
	return "a Drift Job runs as soon as nothing else runs (an apply, restore or refresh that is wanted goes first), whatever the schedule" + then
}
