package main

import (
	"fmt"
	"strings"

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
	names     []string
	newObject func() terraformObject
	// list lists the kind's objects and returns them.
	newList func() (client.ObjectList, func() []terraformObject)
}

var kinds = []kindInfo{
	{
		Kind:      infrav1.TerraformClusterKind,
		names:     []string{"terraformcluster", "terraformclusters", "tfc"},
		newObject: func() terraformObject { return &infrav1.TerraformCluster{} },
		newList: func() (client.ObjectList, func() []terraformObject) {
			l := &infrav1.TerraformClusterList{}
			return l, func() []terraformObject {
				out := make([]terraformObject, 0, len(l.Items))
				for i := range l.Items {
					out = append(out, &l.Items[i])
				}
				return out
			}
		},
	},
	{
		Kind:      infrav1.TerraformMachineKind,
		names:     []string{"terraformmachine", "terraformmachines", "tfm"},
		newObject: func() terraformObject { return &infrav1.TerraformMachine{} },
		newList: func() (client.ObjectList, func() []terraformObject) {
			l := &infrav1.TerraformMachineList{}
			return l, func() []terraformObject {
				out := make([]terraformObject, 0, len(l.Items))
				for i := range l.Items {
					out = append(out, &l.Items[i])
				}
				return out
			}
		},
	},
	{
		Kind:      infrav1.TerraformMachinePoolKind,
		names:     []string{"terraformmachinepool", "terraformmachinepools", "tfmp"},
		newObject: func() terraformObject { return &infrav1.TerraformMachinePool{} },
		newList: func() (client.ObjectList, func() []terraformObject) {
			l := &infrav1.TerraformMachinePoolList{}
			return l, func() []terraformObject {
				out := make([]terraformObject, 0, len(l.Items))
				for i := range l.Items {
					out = append(out, &l.Items[i])
				}
				return out
			}
		},
	},
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
