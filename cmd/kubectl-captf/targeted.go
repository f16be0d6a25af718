package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

func newReplaceCommand(o *options) *cobra.Command {
	return o.targetedCommand("replace KIND/NAME ADDRESS",
		"Replace one resource on the next apply (terraform -replace; annotation captf.io/target-operation)", 1,
		func(rest []string) string { return runnerapi.TargetReplace + " " + rest[0] })
}

func newImportCommand(o *options) *cobra.Command {
	return o.targetedCommand("import KIND/NAME ADDRESS ID",
		"Import one existing object to a resource address on the next apply (an import block; annotation captf.io/target-operation)", 2,
		func(rest []string) string { return runnerapi.TargetImport + " " + rest[0] + " " + rest[1] })
}

func newForgetCommand(o *options) *cobra.Command {
	return o.targetedCommand("forget KIND/NAME ADDRESS",
		"Forget one resource the module no longer declares on the next apply, keeping its objects (a removed block; annotation captf.io/target-operation)", 1,
		func(rest []string) string { return runnerapi.TargetForget + " " + rest[0] })
}

// targetedCommand asks for one targeted operation (docs/state.md, "Targeted operations"): the
// request value is built from the arguments after KIND/NAME (more of them) and checked as
// the controller reads it, and refused where it makes no sense (an object being deleted, one
// that has not applied yet, one whose state is held).
func (o *options) targetedCommand(use, short string, more int, value func(rest []string) string) *cobra.Command {
	return o.objectCommandArgs(use, short, more, func(ctx context.Context, c client.Client, t target, rest []string) error {
		req := value(rest)
		if _, err := runnerapi.ParseTarget(req); err != nil {
			return refused("%s: %v", req, err)
		}
		return o.requestTarget(ctx, c, t, req)
	})
}

// requestTarget writes the request req on t, unless TargetRefusal refuses it.
func (o *options) requestTarget(ctx context.Context, c client.Client, t target, req string) error {
	if why := TargetRefusal(t.obj.GetDeletionTimestamp(), t.obj.GetAnnotations(), t.obj.GetTerraformStatus()); why != "" {
		return refused("%s on %s: %s", req, t.ref(), why)
	}
	if old := t.obj.GetAnnotations()[infrav1.TargetOperationAnnotation]; old != "" && old != req {
		fmt.Fprintf(o.streams.ErrOut, "the targeted operation %q was still waiting; %q replaces it\n", old, req)
	}
	if err := setAnnotation(ctx, c, t, infrav1.TargetOperationAnnotation, req); err != nil {
		return err
	}
	_, err := fmt.Fprintf(o.streams.Out, "%s requested on %s: the next apply carries it out once nothing else runs "+
		"(through a plan that waits for approval when the object's plans are judged: see plan show and approve); "+
		"bookkeeping removes the annotation once that apply ended, and an event TargetOperationDone or TargetOperationFailed says how\n", req, t.ref())
	return err
}

// TargetRefusal says why a targeted operation makes no sense on an object now ("" when it
// does): it is being deleted (nothing is applied any more), it has not applied yet (there is
// no state to target), or its state is held (StateReadable=False: resolve that first).
func TargetRefusal(deleting *metav1.Time, ann map[string]string, st *infrav1.TerraformStatus) string {
	switch {
	case !deleting.IsZero():
		return "the object is being deleted: nothing is applied any more"
	case ann[infrav1.AppliedHashAnnotation] == "" && (st.Initialization == nil || st.Initialization.Provisioned == nil || !*st.Initialization.Provisioned):
		return "the object has not applied yet: there is no state to replace, import into or forget from; its first apply creates what its module declares"
	}
	if c := meta.FindStatusCondition(st.Conditions, infrav1.StateReadableCondition); c != nil && c.Status == metav1.ConditionFalse {
		return fmt.Sprintf("its state is held (StateReadable=False, %s: %s); resolve that first (docs/state.md)", c.Reason, c.Message)
	}
	return ""
}
