package main

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// terraformObject is what the three kinds share.
type terraformObject interface {
	client.Object
	GetTerraformSpec() *infrav1.TerraformSpec
	GetTerraformStatus() *infrav1.TerraformStatus
}

// kindInfo describes one of the three reconciled kinds.
type kindInfo struct {
	// Kind is the kind's name (infrav1.TerraformClusterKind, ...).
	Kind string
	// names are the lower-case spellings a person may use before the slash.
	names []string
}

var kinds = []kindInfo{
	{Kind: infrav1.TerraformClusterKind, names: []string{"terraformcluster", "terraformclusters", "tfc"}},
	{Kind: infrav1.TerraformMachineKind, names: []string{"terraformmachine", "terraformmachines", "tfm"}},
	{Kind: infrav1.TerraformMachinePoolKind, names: []string{"terraformmachinepool", "terraformmachinepools", "tfmp"}},
}

// newObject is an empty object of the kind, made by the client's scheme.
func (k kindInfo) newObject(c client.Client) (terraformObject, error) {
	o, err := c.Scheme().New(infrav1.GroupVersion.WithKind(k.Kind))
	if err != nil {
		return nil, fmt.Errorf("new %s: %w", k.Kind, err)
	}
	obj, ok := o.(terraformObject)
	if !ok {
		return nil, fmt.Errorf("new %s: %T is not a CAPTF object", k.Kind, o)
	}
	return obj, nil
}

// list lists the kind's objects.
func (k kindInfo) list(ctx context.Context, c client.Client, opts ...client.ListOption) ([]terraformObject, error) {
	o, err := c.Scheme().New(infrav1.GroupVersion.WithKind(k.Kind + "List"))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", k.Kind, err)
	}
	l, ok := o.(client.ObjectList)
	if !ok {
		return nil, fmt.Errorf("list %s: %T is not a list", k.Kind, o)
	}
	if err := c.List(ctx, l, opts...); err != nil {
		return nil, fmt.Errorf("list %s: %w", k.Kind, err)
	}
	items, err := meta.ExtractList(l)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", k.Kind, err)
	}
	out := make([]terraformObject, 0, len(items))
	for _, item := range items {
		obj, ok := item.(terraformObject)
		if !ok {
			return nil, fmt.Errorf("list %s: %T is not a CAPTF object", k.Kind, item)
		}
		out = append(out, obj)
	}
	return out, nil
}

// parseKindName reads KIND/NAME: the kind as its name, plural, short name or fully qualified
// resource (terraformclusters.infrastructure.cluster.x-k8s.io), in any case.
func parseKindName(arg string) (kindInfo, string, error) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok || kind == "" || name == "" || strings.Contains(name, "/") {
		return kindInfo{}, "", fmt.Errorf("want KIND/NAME (for example terraformcluster/prod), got %q", arg)
	}
	kind = strings.ToLower(kind)
	kind = strings.TrimSuffix(kind, "."+infrav1.GroupVersion.Group)
	for _, k := range kinds {
		for _, n := range k.names {
			if kind == n {
				return k, name, nil
			}
		}
	}
	return kindInfo{}, "", fmt.Errorf("unknown kind %q: use terraformcluster (tfc), terraformmachine (tfm) or terraformmachinepool (tfmp)", kind)
}

// kindArg is the kind as a person types it before the slash (terraformcluster).
func kindArg(kind string) string {
	for _, k := range kinds {
		if k.Kind == kind {
			return k.names[0]
		}
	}
	return kind
}
