package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// statusQuery is what status was asked to show: one object (Arg, KIND/NAME), a Cluster and its
// objects (Cluster), every object of the namespace, or of every namespace (AllNamespaces).
type statusQuery struct {
	Arg, Cluster  string
	AllNamespaces bool
	// AllConditions and Resources are the tree's --all-conditions and --resources.
	AllConditions, Resources bool
}

func newStatusCommand(o *options) *cobra.Command {
	var q statusQuery
	var watch bool
	cmd := &cobra.Command{
		Use:   "status [KIND/NAME | --cluster NAME | -A]",
		Short: "Show a Cluster's CAPTF objects (or one object, or every object of the namespace or of all namespaces) as a tree or a table; exit 2 when one is not Ready, 3 when a plan waits or drift was found",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.output != outputWide {
				if err := o.checkOutput(); err != nil {
					return err
				}
			}
			if len(args) == 1 {
				q.Arg = args[0]
			}
			if err := q.check(); err != nil {
				return err
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			if watch {
				return o.watchStatus(cmd.Context(), c, q)
			}
			r, err := o.gatherReport(cmd.Context(), c, q)
			if err != nil {
				return err
			}
			if err := o.printReport(r, o.clock()); err != nil {
				return err
			}
			if r.ExitCode != exitOK {
				return &exitError{code: r.ExitCode}
			}
			return nil
		},
		ValidArgsFunction: o.completeKindName,
	}
	cmd.Flags().StringVar(&q.Cluster, "cluster", "", "show the Cluster API Cluster of this name and every CAPTF object labelled with it")
	cmd.Flags().BoolVarP(&q.AllNamespaces, "all-namespaces", "A", false, "show the CAPTF objects of every namespace, grouped by namespace and Cluster")
	cmd.Flags().BoolVar(&q.AllConditions, "all-conditions", false, "list every condition, not only those that need a look")
	cmd.Flags().BoolVar(&q.Resources, "resources", false, "list the resource addresses of each object's inventory under its count")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "print the report again each time it changes, until interrupted; the exit code is the last report's")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: json, yaml, or wide (a table, one object a row) (default: the tree)")
	_ = cmd.RegisterFlagCompletionFunc("cluster", o.completeClusterName)
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml", outputWide}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// check refuses a query that names two scopes at once.
func (q statusQuery) check() error {
	switch {
	case q.Cluster != "" && q.Arg != "":
		return errors.New("name either KIND/NAME or --cluster, not both")
	case q.AllNamespaces && (q.Cluster != "" || q.Arg != ""):
		return errors.New("-A shows every namespace: KIND/NAME and --cluster name objects of one namespace (use -n instead)")
	}
	return nil
}

// printReport prints r in the output format asked for: JSON, YAML, the wide table or the tree.
func (o *options) printReport(r Report, now time.Time) error {
	printed, err := o.printData(r)
	switch {
	case err != nil:
		return err
	case printed:
		return nil
	case o.output == outputWide:
		err = renderTable(o.streams.Out, r, now)
	default:
		err = renderTree(o.streams.Out, r, now, r.allConditions)
	}
	if err != nil {
		return fmt.Errorf("print: %w", err)
	}
	return nil
}

// gatherReport reads what status shows: one object, a Cluster and its objects, or every
// object of the namespace (of every namespace with -A), and sets the exit code.
func (o *options) gatherReport(ctx context.Context, c client.Client, q statusQuery) (Report, error) {
	ns, err := o.namespace()
	if err != nil {
		return Report{}, err
	}
	if q.AllNamespaces {
		ns = ""
	}
	var objs []target
	switch {
	case q.Arg != "":
		t, err := o.getTarget(ctx, c, q.Arg)
		if err != nil {
			return Report{}, err
		}
		objs = []target{t}
	default:
		if objs, err = listTargets(ctx, c, ns, q.Cluster); err != nil {
			return Report{}, err
		}
	}
	r := Report{Objects: []ObjectNode{}, grouped: q.Arg == "" && q.Cluster == "", allNamespaces: q.AllNamespaces,
		resources: q.Resources, allConditions: q.AllConditions}
	if q.Cluster != "" {
		cn, err := clusterNode(ctx, c, ns, q.Cluster)
		if err != nil {
			return Report{}, err
		}
		r.Cluster = cn
	}
	if r.Cluster != nil {
		holder, err := leaseHolder(ctx, c, ns, naming.ClusterLeaseName(ns, q.Cluster))
		if err != nil {
			return Report{}, fmt.Errorf("get the cluster lease of %s/%s: %w", ns, q.Cluster, err)
		}
		r.Cluster.ClusterLease = holder
	}
	for _, t := range objs {
		suffix := naming.StateSuffix(t.obj.GetNamespace(), t.kind.Kind, t.obj.GetName())
		holder, err := leaseHolder(ctx, c, t.obj.GetNamespace(), naming.RunLeaseName(suffix))
		if err != nil {
			return Report{}, fmt.Errorf("get the run lease of %s: %w", t.ref(), err)
		}
		n := objectNode(t.kind.Kind, t.obj, holder)
		if n.Inventory, err = inventoryOf(ctx, c, t.obj.GetNamespace(), suffix); err != nil {
			return Report{}, fmt.Errorf("get the inventory of %s: %w", t.ref(), err)
		}
		r.Objects = append(r.Objects, n)
	}
	sortObjects(r.Objects)
	r.ExitCode = exitCode(r)
	return r, nil
}

// listTargets lists every CAPTF object of the namespace (of every namespace when ns is ""), or
// those labelled with the Cluster when cluster is set. Finding none in one namespace, it checks
// that the namespace exists (namespaceExists).
func listTargets(ctx context.Context, c client.Client, ns, cluster string) ([]target, error) {
	sel := []client.ListOption{client.InNamespace(ns)}
	if cluster != "" {
		sel = append(sel, client.MatchingLabels{infrav1.ClusterNameLabel: cluster})
	}
	var objs []target
	for _, k := range kinds {
		items, err := k.list(ctx, c, sel...)
		if err != nil {
			return nil, err
		}
		for _, obj := range items {
			objs = append(objs, target{kind: k, obj: obj})
		}
	}
	if len(objs) == 0 && ns != "" {
		return nil, namespaceExists(ctx, c, ns)
	}
	return objs, nil
}

// namespaceExists fails when the namespace does not exist, so that status of a typo is an
// error rather than an empty, healthy namespace. A caller who may not read namespaces gets no
// error: the empty report stands.
func namespaceExists(ctx context.Context, c client.Client, ns string) error {
	found, err := getIfExists(ctx, c, "namespace", types.NamespacedName{Name: ns}, &corev1.Namespace{})
	switch {
	case apierrors.IsForbidden(err):
		return nil
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("namespace %q not found", ns)
	}
	return nil
}

// sortObjects orders the tree: by namespace, by Cluster, then TerraformCluster before machines
// and pools, then by name.
func sortObjects(objs []ObjectNode) {
	rank := map[string]int{infrav1.TerraformClusterKind: 0, infrav1.TerraformMachinePoolKind: 1, infrav1.TerraformMachineKind: 2}
	sort.SliceStable(objs, func(i, j int) bool {
		a, b := objs[i], objs[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Cluster != b.Cluster {
			return a.Cluster < b.Cluster
		}
		if rank[a.Kind] != rank[b.Kind] {
			return rank[a.Kind] < rank[b.Kind]
		}
		return a.Name < b.Name
	})
}

func clusterNode(ctx context.Context, c client.Client, ns, name string) (*ClusterNode, error) {
	cl := &clusterv1.Cluster{}
	found, err := getIfExists(ctx, c, "Cluster", types.NamespacedName{Namespace: ns, Name: name}, cl)
	if err != nil {
		return nil, err
	}
	if !found {
		return &ClusterNode{Namespace: ns, Name: name, Missing: true}, nil
	}
	return &ClusterNode{Namespace: ns, Name: name, Phase: cl.Status.Phase, Paused: cl.Spec.Paused != nil && *cl.Spec.Paused,
		Available: meta.FindStatusCondition(cl.Status.Conditions, clusterv1.ClusterAvailableCondition)}, nil
}

// inventoryOf reads an object's inventory Secret: nil when it does not exist yet or the caller
// may not read it (status still shows the rest), an error when it cannot be parsed.
func inventoryOf(ctx context.Context, c client.Client, ns, suffix string) (*state.Inventory, error) {
	s := &corev1.Secret{}
	if found, err := getIfReadable(ctx, c, "secret", types.NamespacedName{Namespace: ns, Name: naming.InventorySecretName(suffix)}, s); err != nil || !found {
		return nil, err
	}
	inv, err := state.ParseInventory(s.Data)
	if err != nil {
		return nil, fmt.Errorf("read secret %s/%s: %w", ns, s.Name, err)
	}
	return inv, nil
}

// leaseHolder is the holder of a CAPTF Lease, "" when it is free, absent or not readable by
// the caller (status still shows the rest).
func leaseHolder(ctx context.Context, c client.Client, ns, name string) (string, error) {
	l := &coordinationv1.Lease{}
	if found, err := getIfReadable(ctx, c, "lease", types.NamespacedName{Namespace: ns, Name: name}, l); err != nil || !found {
		return "", err
	}
	if l.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *l.Spec.HolderIdentity, nil
}
