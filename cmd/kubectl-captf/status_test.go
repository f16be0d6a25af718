package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// runStatus runs `status args...` in namespace prod against a fake client holding objs, and
// returns what it printed and the error it ended with.
func runStatus(t *testing.T, objs []client.Object, args ...string) (string, error) {
	t.Helper()
	return runPlugin(t, context.Background(), fakeClient(t, objs...), &bytes.Buffer{}, append([]string{"status"}, args...)...)
}

// fakeClient is a fake client of the plugin's scheme holding objs.
func fakeClient(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	s, err := scheme()
	if err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

// runPlugin runs the plugin with args (after -n prod) against c, writing to out, and returns
// what it printed and the error it ended with.
func runPlugin(t *testing.T, ctx context.Context, c client.WithWatch, out io.Writer, args ...string) (string, error) {
	t.Helper()
	return runPluginAt(t, ctx, c, out, nil, args...)
}

// runPluginAt is runPlugin with the plugin's clock set to now (nil: time.Now).
func runPluginAt(t *testing.T, ctx context.Context, c client.WithWatch, out io.Writer, now func() time.Time, args ...string) (string, error) {
	t.Helper()
	// No kubeconfig is read: the namespace comes from -n and the client is the fake one.
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	var errOut bytes.Buffer
	o := &options{flags: genericclioptions.NewConfigFlags(true), streams: genericiooptions.IOStreams{In: os.Stdin, Out: out, ErrOut: &errOut}}
	o.flags.ClusterName = nil
	o.newClient = func() (client.WithWatch, error) { return c, nil }
	o.now = now
	root := newRoot(o)
	root.SetArgs(append([]string{"-n", "prod"}, args...))
	root.SetOut(out)
	root.SetErr(&errOut)
	err := root.ExecuteContext(ctx)
	if s, ok := out.(fmt.Stringer); ok {
		return s.String(), err
	}
	return "", err
}

// inventorySecret is the inventory Secret the manager writes for o, from an inventory.
func inventorySecret(t *testing.T, o *infrav1.TerraformCluster, inv state.Inventory) *corev1.Secret {
	t.Helper()
	s, err := state.InventorySecret(o, infrav1.GroupVersion.WithKind(infrav1.TerraformClusterKind),
		naming.StateSuffix(o.Namespace, infrav1.TerraformClusterKind, o.Name), inv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStatusShowsTheInventory(t *testing.T) {
	applied := waitingCluster()
	delete(applied.Annotations, infrav1.PendingPlanAnnotation) // Ready and nothing waits: exit 0
	applied.Status.Conditions = applied.Status.Conditions[:1]
	inv := state.Inventory{Serial: 5, Lineage: "lin-1", Total: 3, Managed: 2, Resources: []state.InventoryResource{
		{Address: "data.http.ip", Type: "http", Mode: "data"},
		{Address: `terraform_data.n["a"]`, Type: "terraform_data", Mode: "managed"},
		{Address: `module.x.terraform_data.web[0]`, Type: "terraform_data", Mode: "managed", Module: "module.x"},
	}}
	objs := []client.Object{applied, inventorySecret(t, applied, inv)}

	t.Run("the tree prints the count", func(t *testing.T) {
		out, err := runStatus(t, objs, "tfc/prod")
		if err != nil {
			t.Fatalf("status: %v\n%s", err, out)
		}
		if !strings.Contains(out, "\n  resources: 3 (2 managed, 1 data) at serial 5\n") {
			t.Fatalf("no count line:\n%s", out)
		}
		if strings.Contains(out, `terraform_data.n["a"]`) {
			t.Fatalf("addresses without --resources:\n%s", out)
		}
	})
	t.Run("--resources lists the addresses", func(t *testing.T) {
		out, err := runStatus(t, objs, "tfc/prod", "--resources")
		if err != nil {
			t.Fatalf("status: %v\n%s", err, out)
		}
		want := "  resources: 3 (2 managed, 1 data) at serial 5\n    data.http.ip\n    terraform_data.n[\"a\"]\n    module.x.terraform_data.web[0]\n"
		if !strings.Contains(out, want) {
			t.Fatalf("tree:\n%s\nwant it to hold:\n%s", out, want)
		}
	})
	t.Run("-o json carries the list", func(t *testing.T) {
		out, err := runStatus(t, objs, "tfc/prod", "-o", "json")
		if err != nil {
			t.Fatalf("status: %v\n%s", err, out)
		}
		var rep struct {
			Objects []struct {
				Inventory *state.Inventory `json:"inventory"`
			} `json:"objects"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if len(rep.Objects) != 1 || rep.Objects[0].Inventory == nil {
			t.Fatalf("no inventory: %s", out)
		}
		got := rep.Objects[0].Inventory
		if got.Total != 3 || len(got.Resources) != 3 || got.Resources[2].Module != "module.x" || got.Resources[0].Mode != "data" {
			t.Fatalf("inventory: %+v", got)
		}
	})
	t.Run("-o yaml carries the list", func(t *testing.T) {
		out, err := runStatus(t, objs, "tfc/prod", "-o", "yaml")
		if err != nil {
			t.Fatalf("status: %v\n%s", err, out)
		}
		if !strings.Contains(out, "address: module.x.terraform_data.web[0]") {
			t.Fatalf("yaml:\n%s", out)
		}
	})
	t.Run("a truncated list says so", func(t *testing.T) {
		cut := inv
		cut.Total, cut.Managed, cut.Truncated = 1500, 1499, true
		out, err := runStatus(t, []client.Object{applied, inventorySecret(t, applied, cut)}, "tfc/prod", "--resources")
		if err != nil {
			t.Fatalf("status: %v\n%s", err, out)
		}
		for _, want := range []string{"resources: 1500 (1499 managed, 1 data) at serial 5, 3 listed (truncated)\n", "  ... 1497 more not listed\n"} {
			if !strings.Contains(out, want) {
				t.Fatalf("tree:\n%s\nwant it to hold %q", out, want)
			}
		}
	})
	t.Run("no inventory yet: no line, no error", func(t *testing.T) {
		out, err := runStatus(t, []client.Object{applied}, "tfc/prod", "--resources")
		if err != nil {
			t.Fatalf("status: %v\n%s", err, out)
		}
		if strings.Contains(out, "resources:") {
			t.Fatalf("a resources line without an inventory:\n%s", out)
		}
	})
	t.Run("an unreadable inventory is an error that names it", func(t *testing.T) {
		bad := inventorySecret(t, applied, inv)
		bad.Data[state.InventoryKey] = []byte("{not json")
		_, err := runStatus(t, []client.Object{applied, bad}, "tfc/prod")
		if err == nil || !strings.Contains(err.Error(), bad.Name) {
			t.Fatalf("want an error naming %s, got %v", bad.Name, err)
		}
	})
}

// The inventory of another object of the namespace is not shown on this one.
func TestStatusReadsEachObjectsOwnInventory(t *testing.T) {
	a, b := waitingCluster(), waitingCluster()
	b.Name, b.UID = "other", "uid-2"
	one := func(addr string) state.Inventory {
		return state.Inventory{Serial: 1, Total: 1, Managed: 1, Resources: []state.InventoryResource{{Address: addr, Type: "terraform_data", Mode: "managed"}}}
	}
	out, err := runStatus(t, []client.Object{a, b, inventorySecret(t, a, one("terraform_data.a")), inventorySecret(t, b, one("terraform_data.b"))}, "--resources")
	var exit *exitError
	if !errors.As(err, &exit) || exit.code != exitAttention {
		t.Fatalf("want exit %d (the plans wait), got %v", exitAttention, err)
	}
	ia, ib := strings.Index(out, "TerraformCluster/other"), strings.Index(out, "TerraformCluster/prod")
	if ia < 0 || ib < 0 {
		t.Fatalf("tree:\n%s", out)
	}
	other, prod := out[ia:ib], out[ib:]
	if !strings.Contains(other, "terraform_data.b") || strings.Contains(other, "terraform_data.a") ||
		!strings.Contains(prod, "terraform_data.a") || strings.Contains(prod, "terraform_data.b") {
		t.Fatalf("each object lists its own addresses:\n%s", out)
	}
}

// status of a namespace that does not exist fails (exit 1, as every error), instead of
// reporting an empty, healthy namespace; an existing empty namespace is reported as such.
func TestStatusOfAMissingNamespaceFails(t *testing.T) {
	_, err := runStatus(t, nil)
	if err == nil || !strings.Contains(err.Error(), `namespace "prod" not found`) {
		t.Fatalf("status of a missing namespace: %v", err)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		t.Fatalf("a missing namespace is an error (exit 1), not a report: exit %d", ee.code)
	}
	prod := &corev1.Namespace{}
	prod.Name = "prod"
	if out, err := runStatus(t, []client.Object{prod}); err != nil {
		t.Fatalf("status of an empty namespace: %v\n%s", err, out)
	}
}
