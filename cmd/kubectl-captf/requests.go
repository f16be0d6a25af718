package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// objectCommand is a verb on one object, KIND/NAME: before run it checks the output format (of
// a verb with -o), builds the client and reads the object.
func (o *options) objectCommand(use, short string, run func(ctx context.Context, c client.Client, t target) error) *cobra.Command {
	return o.objectCommandArgs(use, short, 0, func(ctx context.Context, c client.Client, t target, _ []string) error { return run(ctx, c, t) })
}

// objectCommandArgs is objectCommand for a verb that takes more arguments after KIND/NAME
// (exactly more of them), which run receives.
func (o *options) objectCommandArgs(use, short string, more int, run func(ctx context.Context, c client.Client, t target, rest []string) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1 + more),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			t, err := o.getTarget(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			return run(cmd.Context(), c, t, args[1:])
		},
		ValidArgsFunction: o.completeKindName,
	}
}

// show prints a verb's data: as JSON or YAML with -o, else as text through render.
func (o *options) show(v any, render func(p *printer) error) error {
	if printed, err := o.printData(v); printed || err != nil {
		return err
	}
	return render(&printer{w: o.streams.Out})
}

// viewCommand is a verb that reads a view of one object and prints it: as JSON or YAML with
// -o, else as text through render.
func viewCommand[V any](o *options, use, short string, read func(context.Context, client.Client, target) (V, error), render func(*printer, V) error) *cobra.Command {
	cmd := o.objectCommand(use, short, func(ctx context.Context, c client.Client, t target) error {
		v, err := read(ctx, c, t)
		if err != nil {
			return err
		}
		return o.show(v, func(p *printer) error { return render(p, v) })
	})
	o.addOutputFlag(cmd)
	return cmd
}

// requestCommand asks for one run by an annotation whose value names the request (refresh,
// drift check): the value defaults to the current time, and it replaces a request that still
// waits, saying so. what names the request; next says what happens now.
func (o *options) requestCommand(use, short, what, annotation string, next func(t target) string) *cobra.Command {
	var value string
	cmd := o.objectCommand(use, short, func(ctx context.Context, c client.Client, t target) error {
		if value == "" {
			value = time.Now().UTC().Format(time.RFC3339)
		}
		if old := t.obj.GetAnnotations()[annotation]; old != "" {
			fmt.Fprintf(o.streams.ErrOut, "a %s (%s) was still waiting; %s asks for a new one\n", what, old, value)
		}
		if err := setAnnotation(ctx, c, t, annotation, value); err != nil {
			return err
		}
		_, err := fmt.Fprintf(o.streams.Out, "%s %s requested on %s: %s\n", what, value, t.ref(), next(t))
		return err
	})
	cmd.Flags().StringVar(&value, "value", "", "the request's value, for example a ticket (default: the current time)")
	return cmd
}

func newRefreshCommand(o *options) *cobra.Command {
	return o.requestCommand("refresh KIND/NAME",
		"Ask for one refresh: record in the state what changed outside Terraform (annotation captf.io/refresh)",
		"refresh", infrav1.RefreshAnnotation, func(target) string {
			return "a Refresh Job runs once nothing else runs (under applyPolicy Manual a refresh-only plan runs first, and waits for approval when it finds a change)"
		})
}

func newRetryCommand(o *options) *cobra.Command {
	return o.objectCommand("retry KIND/NAME", "Retry a failed operation now instead of after its backoff (removes captf.io/retry-at)",
		func(ctx context.Context, c client.Client, t target) error {
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
}

// BackupList is what restore prints without --serial: the object's backups, newest first, and
// the versions the replica store was last seen to hold (status.stateReplica), newest first.
type BackupList struct {
	objectID
	Backups []infrav1.StateBackup         `json:"backups"`
	Replica []infrav1.StateReplicaVersion `json:"replica"`
}

func newRestoreCommand(o *options) *cobra.Command {
	var serial int64
	var yes bool
	var cmd *cobra.Command
	cmd = o.objectCommand("restore KIND/NAME [--serial N]",
		"List the state backups and the replica store's versions, or restore one (annotation captf.io/restore-state) after a confirmation unless --yes",
		func(ctx context.Context, c client.Client, t target) error {
			st := t.obj.GetTerraformStatus()
			backups, held := st.StateBackups, st.StateReplica
			if !cmd.Flags().Changed("serial") {
				list := BackupList{objectID: t.id(), Backups: backups, Replica: held}
				if list.Backups == nil {
					list.Backups = []infrav1.StateBackup{}
				}
				if list.Replica == nil {
					list.Replica = []infrav1.StateReplicaVersion{}
				}
				return o.show(list, func(p *printer) error { return renderBackups(p, t, backups, held) })
			}
			from := "the backup"
			if !hasBackup(backups, serial) {
				if !inReplica(held, serial) {
					return refused("serial %d is no backup of %s and not a version the replica store was seen to hold (backups: %s; replica store: %s)",
						serial, t.ref(), serials(backups), replicaSerials(held))
				}
				from = "the replica store's version"
			}
			if err := o.confirm(yes, fmt.Sprintf("Restore %s to %s of serial %d?", t.ref(), from, serial)); err != nil {
				return err
			}
			if err := setAnnotation(ctx, c, t, infrav1.RestoreStateAnnotation, strconv.FormatInt(serial, 10)); err != nil {
				return err
			}
			_, err := fmt.Fprintf(o.streams.Out, "restore of serial %d requested on %s: a Restore Job pushes it as the newest state\n", serial, t.ref())
			return err
		})
	cmd.Flags().Int64Var(&serial, "serial", 0, "the serial to restore: a backup's, or a version the replica store holds")
	cmd.Flags().BoolVar(&yes, "yes", false, "restore without asking")
	o.addOutputFlag(cmd)
	return cmd
}

func renderBackups(p *printer, t target, backups []infrav1.StateBackup, held []infrav1.StateReplicaVersion) error {
	if len(backups) == 0 {
		p.line("", "%s has no state backup", t.ref())
	} else {
		p.line("", "SERIAL\tSECRET\tTIME\tBYTES")
		for _, b := range backups {
			p.line("", "%d\t%s\t%s\t%d", b.Serial, b.Secret, rfc3339(b.Time), b.Bytes)
		}
	}
	if len(held) == 0 {
		return p.err
	}
	p.line("", "")
	p.line("", "In the replica store (as the controller last listed it):")
	p.line("", "SERIAL\tLINEAGE\tTIME")
	for _, v := range held {
		p.line("", "%d\t%s\t%s", v.Serial, v.Lineage, rfc3339(v.Time))
	}
	return p.err
}

func rfc3339(t *metav1.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func hasBackup(backups []infrav1.StateBackup, serial int64) bool {
	for _, b := range backups {
		if b.Serial == serial {
			return true
		}
	}
	return false
}

func inReplica(held []infrav1.StateReplicaVersion, serial int64) bool {
	for _, v := range held {
		if v.Serial == serial {
			return true
		}
	}
	return false
}

func serials(backups []infrav1.StateBackup) string {
	out := make([]int64, 0, len(backups))
	for _, b := range backups {
		out = append(out, b.Serial)
	}
	return joinSerials(out)
}

func replicaSerials(held []infrav1.StateReplicaVersion) string {
	out := make([]int64, 0, len(held))
	for _, v := range held {
		out = append(out, v.Serial)
	}
	return joinSerials(out)
}

func joinSerials(serials []int64) string {
	if len(serials) == 0 {
		return "none"
	}
	s := ""
	for i, n := range serials {
		if i > 0 {
			s += ", "
		}
		s += strconv.FormatInt(n, 10)
	}
	return s
}

func newAbandonCommand(o *options) *cobra.Command {
	var uid string
	cmd := o.objectCommand("abandon KIND/NAME --uid UID",
		"Let an object go without a destroy (annotation captf.io/abandon-infrastructure): prints what is let go, and needs --uid equal to the object's UID",
		func(ctx context.Context, c client.Client, t target) error {
			secrets, err := ownedSecrets(ctx, c, t)
			if err != nil {
				return err
			}
			p := &printer{w: o.streams.Out}
			p.line("", "abandoning %s (UID %s) lets go without a destroy:", t.ref(), t.obj.GetUID())
			p.line("", "  the infrastructure its state tracks keeps running, and nothing CAPTF runs will destroy it")
			for _, s := range secrets {
				role := s.Labels[infrav1.SecretRoleLabel]
				if state.Retained(role) {
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

// ownedSecrets lists the object's CAPTF Secrets (state, inputs, backups, plan, outputs).
func ownedSecrets(ctx context.Context, c client.Client, t target) ([]corev1.Secret, error) {
	var list corev1.SecretList
	sel := state.SecretSelector(t.kind.Kind, t.obj.GetName())
	if err := c.List(ctx, &list, client.InNamespace(t.obj.GetNamespace()), sel, client.HasLabels{infrav1.SecretRoleLabel}); err != nil {
		return nil, fmt.Errorf("list the Secrets of %s: %w", t.ref(), err)
	}
	return list.Items, nil
}
