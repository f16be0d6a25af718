package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// withTarget is the RunE of a verb on one object: it builds the client and reads the object.
func (o *options) withTarget(run func(ctx context.Context, c client.Client, t target) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := o.newClient()
		if err != nil {
			return err
		}
		t, err := o.getTarget(cmd.Context(), c, args[0])
		if err != nil {
			return err
		}
		return run(cmd.Context(), c, t)
	}
}

func newRefreshCommand(o *options) *cobra.Command {
	var value string
	cmd := &cobra.Command{
		Use:   "refresh KIND/NAME",
		Short: "Ask for one refresh: record in the state what changed outside Terraform (annotation captf.io/refresh)",
		Args:  cobra.ExactArgs(1),
	}
	cmd.RunE = o.withTarget(func(ctx context.Context, c client.Client, t target) error {
		if value == "" {
			value = time.Now().UTC().Format(time.RFC3339)
		}
		if old := t.obj.GetAnnotations()[infrav1.RefreshAnnotation]; old != "" {
			fmt.Fprintf(o.streams.ErrOut, "a refresh (%s) was still waiting; %s asks for a new one\n", old, value)
		}
		if err := setAnnotation(ctx, c, t, infrav1.RefreshAnnotation, value); err != nil {
			return err
		}
		_, err := fmt.Fprintf(o.streams.Out, "refresh %s requested on %s: a Refresh Job runs once nothing else runs (under applyPolicy Manual a refresh-only plan runs first, and waits for approval when it finds a change)\n", value, t.ref())
		return err
	})
	cmd.Flags().StringVar(&value, "value", "", "the request's value, for example a ticket (default: the current time)")
	return cmd
}

func newRetryCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "retry KIND/NAME",
		Short: "Retry a failed operation now instead of after its backoff (removes captf.io/retry-at)",
		Args:  cobra.ExactArgs(1),
	}
	cmd.RunE = o.withTarget(func(ctx context.Context, c client.Client, t target) error {
		ann := t.obj.GetAnnotations()
		at, ok := ann[infrav1.RetryAtAnnotation]
		if !ok {
			_, err := fmt.Fprintf(o.streams.Out, "nothing waits for a retry on %s (no backoff)\n", t.ref())
			return err
		}
		if msg := ann[infrav1.LastErrorAnnotation]; msg != "" {
			fmt.Fprintf(o.streams.Out, "last failure: %s\n", oneLine(msg))
		}
		if err := removeAnnotation(ctx, c, t, infrav1.RetryAtAnnotation); err != nil {
			return err
		}
		_, err := fmt.Fprintf(o.streams.Out, "retry now on %s (it waited until %s)\n", t.ref(), at)
		return err
	})
	return cmd
}

// BackupList is what restore prints without --serial: the object's backups, newest first.
type BackupList struct {
	Kind      string                `json:"kind"`
	Namespace string                `json:"namespace"`
	Name      string                `json:"name"`
	Backups   []infrav1.StateBackup `json:"backups"`
}

func newRestoreCommand(o *options) *cobra.Command {
	var serial int64
	var yes bool
	cmd := &cobra.Command{
		Use:   "restore KIND/NAME [--serial N]",
		Short: "List the state backups, or restore one (annotation captf.io/restore-state) after a confirmation unless --yes",
		Args:  cobra.ExactArgs(1),
	}
	cmd.RunE = o.withTarget(func(ctx context.Context, c client.Client, t target) error {
		if err := o.checkOutput(); err != nil {
			return err
		}
		backups := t.obj.GetTerraformStatus().StateBackups
		if !cmd.Flags().Changed("serial") {
			list := BackupList{Kind: t.kind.Kind, Namespace: t.obj.GetNamespace(), Name: t.obj.GetName(), Backups: backups}
			if list.Backups == nil {
				list.Backups = []infrav1.StateBackup{}
			}
			if printed, err := o.printData(list); printed || err != nil {
				return err
			}
			return renderBackups(&printer{w: o.streams.Out}, t, backups)
		}
		if !hasBackup(backups, serial) {
			return refused("serial %d is no backup of %s (backups: %s)", serial, t.ref(), serials(backups))
		}
		if !yes {
			ok, err := confirm(o.streams.In, o.streams.Out, fmt.Sprintf("Restore %s to the backup of serial %d?", t.ref(), serial))
			if err != nil {
				return err
			}
			if !ok {
				return declined()
			}
		}
		if err := setAnnotation(ctx, c, t, infrav1.RestoreStateAnnotation, strconv.FormatInt(serial, 10)); err != nil {
			return err
		}
		_, err := fmt.Fprintf(o.streams.Out, "restore of serial %d requested on %s: a Restore Job pushes it as the newest state\n", serial, t.ref())
		return err
	})
	cmd.Flags().Int64Var(&serial, "serial", 0, "the serial of the backup to restore")
	cmd.Flags().BoolVar(&yes, "yes", false, "restore without asking")
	o.addOutputFlag(cmd)
	return cmd
}

func renderBackups(p *printer, t target, backups []infrav1.StateBackup) error {
	if len(backups) == 0 {
		p.line("", "%s has no state backup", t.ref())
		return p.err
	}
	p.line("", "SERIAL\tSECRET\tTIME\tBYTES")
	for _, b := range backups {
		when := ""
		if b.Time != nil {
			when = b.Time.UTC().Format(time.RFC3339)
		}
		p.line("", "%d\t%s\t%s\t%d", b.Serial, b.Secret, when, b.Bytes)
	}
	return p.err
}

func hasBackup(backups []infrav1.StateBackup, serial int64) bool {
	for _, b := range backups {
		if b.Serial == serial {
			return true
		}
	}
	return false
}

func serials(backups []infrav1.StateBackup) string {
	if len(backups) == 0 {
		return "none"
	}
	s := ""
	for i, b := range backups {
		if i > 0 {
			s += ", "
		}
		s += strconv.FormatInt(b.Serial, 10)
	}
	return s
}

func newAbandonCommand(o *options) *cobra.Command {
	var uid string
	cmd := &cobra.Command{
		Use:   "abandon KIND/NAME --uid UID",
		Short: "Let an object go without a destroy (annotation captf.io/abandon-infrastructure): prints what is let go, and needs --uid equal to the object's UID",
		Args:  cobra.ExactArgs(1),
	}
	cmd.RunE = o.withTarget(func(ctx context.Context, c client.Client, t target) error {
		secrets, err := ownedSecrets(ctx, c, t)
		if err != nil {
			return err
		}
		p := &printer{w: o.streams.Out}
		p.line("", "abandoning %s (UID %s) lets go without a destroy:", t.ref(), t.obj.GetUID())
		p.line("", "  the infrastructure its state tracks keeps running, and nothing CAPTF runs will destroy it")
		for _, s := range secrets {
			role := s.Labels[infrav1.SecretRoleLabel]
			if keptOnAbandon[role] {
				p.line("", "  Secret %s (%s) is kept, unowned (%s), for a person to take over", s.Name, role, infrav1.RetainedAnnotation)
			} else {
				p.line("", "  Secret %s (%s) goes with the object", s.Name, role)
			}
		}
		if p.err != nil {
			return p.err
		}
		if uid != string(t.obj.GetUID()) {
			return refused("--uid %q is not the UID of %s (%s): name the UID to confirm the abandon", uid, t.ref(), t.obj.GetUID())
		}
		if err := setAnnotation(ctx, c, t, infrav1.AbandonInfrastructureAnnotation, uid); err != nil {
			return err
		}
		_, err = fmt.Fprintf(o.streams.Out, "abandon requested on %s\n", t.ref())
		return err
	})
	cmd.Flags().StringVar(&uid, "uid", "", "the object's UID (metadata.uid), to confirm")
	return cmd
}

// keptOnAbandon are the roles of the Secrets an abandon hands over like a Retain deletion
// (docs/state.md): the state, its backups and the durable inputs.
var keptOnAbandon = map[string]bool{infrav1.SecretRoleState: true, infrav1.SecretRoleStateBackup: true, infrav1.SecretRoleInputs: true}

// ownedSecrets lists the object's CAPTF Secrets (state, inputs, backups, plan, outputs).
func ownedSecrets(ctx context.Context, c client.Client, t target) ([]corev1.Secret, error) {
	var list corev1.SecretList
	sel := client.MatchingLabels{infrav1.OwnerKindLabel: t.kind.Kind, infrav1.OwnerNameLabel: naming.LabelValue(t.obj.GetName())}
	if err := c.List(ctx, &list, client.InNamespace(t.obj.GetNamespace()), sel, client.HasLabels{infrav1.SecretRoleLabel}); err != nil {
		return nil, fmt.Errorf("list the Secrets of %s: %w", t.ref(), err)
	}
	return list.Items, nil
}
