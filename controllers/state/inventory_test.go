package state_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// inventoryState is a state as terraform writes it: count and for_each instances, a nested
// module instance, a data source, a deposed object beside its current one, and attributes that
// must never reach the inventory.
const inventoryState = `{
  "version": 4, "terraform_version": "1.9.8", "serial": 7, "lineage": "lin-7", "outputs": {},
  "resources": [
    {"mode": "data", "type": "http", "name": "ip", "provider": "provider[\"registry.terraform.io/hashicorp/http\"]",
     "instances": [{"schema_version": 0, "attributes": {"body": "` + secretValue + `"}}]},
    {"mode": "managed", "type": "terraform_data", "name": "n", "provider": "provider[\"terraform.io/builtin/terraform\"]",
     "instances": [
       {"index_key": "a", "schema_version": 0, "attributes": {"id": "1"}},
       {"index_key": "b \"q\" ${x}", "schema_version": 0, "attributes": {"id": "2"}}
     ]},
    {"mode": "managed", "type": "terraform_data", "name": "single", "provider": "provider[\"terraform.io/builtin/terraform\"]",
     "instances": [
       {"schema_version": 0, "attributes": {"id": "3"}},
       {"deposed": "00000001", "schema_version": 0, "attributes": {"id": "4"}}
     ]},
    {"module": "module.x[\"eu\"].module.y", "mode": "managed", "type": "aws_instance", "name": "web",
     "provider": "module.x.provider[\"registry.terraform.io/hashicorp/aws\"]",
     "instances": [
       {"index_key": 0, "schema_version": 1, "attributes": {"id": "i-0"}},
       {"index_key": 1, "schema_version": 1, "attributes": {"id": "i-1"}}
     ]},
    {"module": "module.x[\"eu\"]", "mode": "data", "type": "aws_ami", "name": "img",
     "provider": "module.x.provider[\"registry.terraform.io/hashicorp/aws\"]",
     "instances": [{"index_key": 0, "schema_version": 0, "attributes": {}}]}
  ]
}`

func TestInventoryListsEveryInstanceAddressAsTerraformPrintsIt(t *testing.T) {
	st, err := state.Parse([]byte(inventoryState))
	if err != nil {
		t.Fatal(err)
	}
	inv := state.InventoryOf(st)
	var got []string
	for _, r := range inv.Resources {
		got = append(got, r.Address)
	}
	want := []string{
		`data.http.ip`,
		`terraform_data.n["a"]`,
		`terraform_data.n["b \"q\" $${x}"]`,
		`terraform_data.single`,
		`module.x["eu"].module.y.aws_instance.web[0]`,
		`module.x["eu"].module.y.aws_instance.web[1]`,
		`module.x["eu"].data.aws_ami.img[0]`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("addresses:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if inv.Serial != 7 || inv.Lineage != "lin-7" || inv.Total != 7 || inv.Managed != 5 || inv.Truncated {
		t.Fatalf("header: serial %d lineage %q total %d managed %d truncated %v", inv.Serial, inv.Lineage, inv.Total, inv.Managed, inv.Truncated)
	}
	web := inv.Resources[4]
	if web.Type != "aws_instance" || web.Mode != "managed" || web.Module != `module.x["eu"].module.y` ||
		web.Provider != `module.x.provider["registry.terraform.io/hashicorp/aws"]` {
		t.Fatalf("module resource: %+v", web)
	}
	if ip := inv.Resources[0]; ip.Mode != "data" || ip.Type != "http" || ip.Module != "" {
		t.Fatalf("data source: %+v", ip)
	}
	b, err := json.Marshal(inv)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), secretValue) || strings.Contains(string(b), "i-0") {
		t.Fatalf("the inventory carries attribute values: %s", b)
	}
}

// manyInstances is a state of one resource with n count instances whose names are pad long.
func manyInstances(t *testing.T, n, pad int) *state.State {
	t.Helper()
	inst := make([]any, n)
	for i := range inst {
		inst[i] = map[string]any{"index_key": i, "schema_version": 0, "attributes": map[string]any{}}
	}
	b, err := json.Marshal(map[string]any{"version": 4, "serial": 1, "lineage": "l", "resources": []any{
		map[string]any{"mode": "managed", "type": "terraform_data", "name": "n" + strings.Repeat("x", pad), "instances": inst},
	}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestInventoryIsBoundedAndSaysSo(t *testing.T) {
	t.Run("at the bound it is whole", func(t *testing.T) {
		inv := state.InventoryOf(manyInstances(t, state.MaxInventoryResources, 0))
		if inv.Truncated || inv.Total != state.MaxInventoryResources || len(inv.Resources) != state.MaxInventoryResources {
			t.Fatalf("truncated %v total %d listed %d", inv.Truncated, inv.Total, len(inv.Resources))
		}
	})
	t.Run("past the count bound", func(t *testing.T) {
		inv := state.InventoryOf(manyInstances(t, state.MaxInventoryResources+5, 0))
		if !inv.Truncated || inv.Total != state.MaxInventoryResources+5 || inv.Managed != inv.Total || len(inv.Resources) != state.MaxInventoryResources {
			t.Fatalf("truncated %v total %d managed %d listed %d", inv.Truncated, inv.Total, inv.Managed, len(inv.Resources))
		}
		if last := inv.Resources[len(inv.Resources)-1].Address; last != fmt.Sprintf("terraform_data.n[%d]", state.MaxInventoryResources-1) {
			t.Fatalf("the list keeps the first addresses in state order, ends with %s", last)
		}
	})
	t.Run("past the byte bound", func(t *testing.T) {
		// 500 instances with 1,000-character names: well under the count bound, over the bytes.
		inv := state.InventoryOf(manyInstances(t, 500, 1000))
		b, err := json.Marshal(inv.Resources)
		if err != nil {
			t.Fatal(err)
		}
		if !inv.Truncated || inv.Total != 500 || len(inv.Resources) == 0 || len(inv.Resources) >= 500 || len(b) > state.MaxInventoryBytes {
			t.Fatalf("truncated %v total %d listed %d encoded %d bytes", inv.Truncated, inv.Total, len(inv.Resources), len(b))
		}
	})
}

func TestInventoryOfNothing(t *testing.T) {
	inv := state.InventoryOf(nil)
	if inv.Total != 0 || inv.Truncated || inv.Resources == nil {
		t.Fatalf("nil state: %+v", inv)
	}
	b, err := json.Marshal(inv)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"resources":[]`) {
		t.Fatalf("an empty inventory lists an empty array, not null: %s", b)
	}
}

func TestInventorySecretIsOwnedLabelledAndRoundTrips(t *testing.T) {
	owner := &metav1.ObjectMeta{Namespace: "ns", Name: "m", UID: "uid-1",
		Labels: map[string]string{infrav1.ClusterNameLabel: "c1", infrav1.WatchFilterLabel: "shard-a"}}
	gvk := infrav1.GroupVersion.WithKind(infrav1.TerraformMachineKind)
	st, err := state.Parse([]byte(inventoryState))
	if err != nil {
		t.Fatal(err)
	}
	s, err := state.InventorySecret(owner, gvk, "0123456789abcdef", state.InventoryOf(st))
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != naming.InventorySecretName("0123456789abcdef") || s.Namespace != "ns" {
		t.Fatalf("name: %s/%s", s.Namespace, s.Name)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != "uid-1" || s.OwnerReferences[0].Controller == nil || !*s.OwnerReferences[0].Controller {
		t.Fatalf("owner: %+v", s.OwnerReferences)
	}
	for k, v := range map[string]string{
		state.MoveLabel: "", infrav1.WatchFilterLabel: "shard-a", infrav1.ClusterNameLabel: "c1",
		infrav1.OwnerKindLabel: infrav1.TerraformMachineKind, infrav1.SecretRoleLabel: state.InventoryRole,
	} {
		if got, ok := s.Labels[k]; !ok || got != v {
			t.Fatalf("label %s: %q (present %v), want %q", k, got, ok, v)
		}
	}
	if _, ok := s.Labels[infrav1.VariablesLabel]; ok {
		t.Fatal("the inventory is not offered to variablesFrom")
	}
	if len(s.Data) != 1 {
		t.Fatalf("one key: %v", s.Data)
	}
	back, err := state.ParseInventory(s.Data)
	if err != nil {
		t.Fatal(err)
	}
	if back.Total != 7 || len(back.Resources) != 7 || back.Resources[1].Address != `terraform_data.n["a"]` {
		t.Fatalf("round trip: %+v", back)
	}
	if _, err := state.ParseInventory(map[string][]byte{}); err == nil {
		t.Fatal("a Secret without the key parsed")
	}
	if _, err := state.InventorySecret(&metav1.ObjectMeta{Name: "m"}, gvk, "s", state.Inventory{}); err == nil {
		t.Fatal("an owner without namespace and uid was accepted")
	}
}
