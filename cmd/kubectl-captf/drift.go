package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

func newDriftCommand(o *options) *cobra.Command {
	drift := &cobra.Command{Use: "drift", Short: "Drift checks"}
	var value string
	check := &cobra.Command{
		Use:   "check KIND/NAME [--value V]",
		Short: "Ask for one drift check now, whatever the schedule says (annotation captf.io/drift-check)",
		Args:  cobra.ExactArgs(1),
	}
	check.RunE = o.withTarget(func(ctx context.Context, c client.Client, t target) error {
		if value == "" {
			value = time.Now().UTC().Format(time.RFC3339)
		}
		if old := t.obj.GetAnnotations()[infrav1.DriftCheckAnnotation]; old != "" {
			fmt.Fprintf(o.streams.ErrOut, "a drift check (%s) was still waiting; %s asks for a new one\n", old, value)
		}
		if err := setAnnotation(ctx, c, t, infrav1.DriftCheckAnnotation, value); err != nil {
			return err
		}
		_, err := fmt.Fprintf(o.streams.Out, "drift check %s requested on %s: %s\n", value, t.ref(), driftCheckWhen(t.obj))
		return err
	})
	check.Flags().StringVar(&value, "value", "", "the request's value, for example a ticket (default: the current time)")
	drift.AddCommand(check)
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
