package main

import (
	"context"
	"strings"

	"github.com/spf13/cobra"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Shell completion. kubectl completes `kubectl captf ...` by running kubectl_complete-captf
// (hack/krew) with the words after the plugin's name; that script runs cobra's hidden
// __complete command, which calls these functions. A completion never fails loudly: when the
// cluster cannot be read it offers nothing.

// completeKindName completes KIND/NAME: the kinds (with their slash) until one is typed, then
// the objects of that kind in the namespace of -n or of the kubeconfig's context.
func (o *options) completeKindName(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	kindPart, _, typed := strings.Cut(toComplete, "/")
	if !typed {
		var out []cobra.Completion
		for _, k := range kinds {
			if strings.HasPrefix(k.names[0], strings.ToLower(kindPart)) {
				out = append(out, k.names[0]+"/")
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
	k, _, err := parseKindName(kindPart + "/x")
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names, err := o.listNames(cmd.Context(), func(ctx context.Context, c client.Client, ns string) ([]string, error) {
		objs, err := k.list(ctx, c, client.InNamespace(ns))
		if err != nil {
			return nil, err
		}
		out := make([]string, 0, len(objs))
		for _, obj := range objs {
			out = append(out, obj.GetName())
		}
		return out, nil
	})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, n := range names {
		if c := kindPart + "/" + n; strings.HasPrefix(c, toComplete) {
			out = append(out, c)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeClusterName completes status --cluster: the Cluster API Clusters of the namespace.
func (o *options) completeClusterName(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	names, err := o.listNames(cmd.Context(), func(ctx context.Context, c client.Client, ns string) ([]string, error) {
		var l clusterv1.ClusterList
		if err := c.List(ctx, &l, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		out := make([]string, 0, len(l.Items))
		for _, cl := range l.Items {
			out = append(out, cl.Name)
		}
		return out, nil
	})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, n := range names {
		if strings.HasPrefix(n, toComplete) {
			out = append(out, n)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// listNames runs list with the client and the namespace of the flags.
func (o *options) listNames(ctx context.Context, list func(context.Context, client.Client, string) ([]string, error)) ([]string, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	ns, err := o.namespace()
	if err != nil {
		return nil, err
	}
	c, err := o.newClient()
	if err != nil {
		return nil, err
	}
	return list(ctx, c, ns)
}
