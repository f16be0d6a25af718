package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// InventoryKey is the one data key of the inventory Secret.
const InventoryKey = "inventory.json"

// InventoryRole is the value of infrav1.SecretRoleLabel on the inventory Secret.
const InventoryRole = "inventory"

// MaxInventoryResources is the most instance addresses an inventory lists; past it the list is
// cut and Truncated set, Total still counts every one.
const MaxInventoryResources = 1000

// MaxInventoryBytes bounds the encoded list of an inventory (long for_each keys make long
// addresses): an entry that would take the list past it is left out, with Truncated set.
const MaxInventoryBytes = 256 << 10

// Inventory is what an object's state records after an apply: the address of every resource
// instance, without any attribute. It is the JSON of the inventory Secret (InventoryKey).
type Inventory struct {
	// Serial and Lineage identify the state revision the inventory was taken from.
	Serial  uint64 `json:"serial"`
	Lineage string `json:"lineage"`
	// Total is how many instance addresses the state records, data sources included; Managed
	// how many of them are managed resources. Both count every instance, listed or not.
	Total   int `json:"total"`
	Managed int `json:"managed"`
	// Truncated is true when Resources lists fewer than Total addresses (MaxInventoryResources
	// or MaxInventoryBytes was reached).
	Truncated bool `json:"truncated"`
	// Resources are the instance addresses in state order (Terraform sorts them), at most
	// MaxInventoryResources of them.
	Resources []InventoryResource `json:"resources"`
}

// InventoryResource is one resource instance of an inventory.
type InventoryResource struct {
	// Address is the instance address as terraform prints it: module.x.aws_instance.web[0],
	// terraform_data.n["a"], data.http.ip.
	Address string `json:"address"`
	// Type is the resource type, Mode "managed" or "data".
	Type string `json:"type"`
	Mode string `json:"mode"`
	// Module is the module instance address, absent for the root module.
	Module string `json:"module,omitempty"`
	// Provider is the provider configuration as the state records it.
	Provider string `json:"provider,omitempty"`
}

// InventoryOf lists the resource instances of a state, bounded by MaxInventoryResources and
// MaxInventoryBytes. Data sources are listed (mode "data") as terraform state list lists them:
// they are what the module read at its last apply. A deposed object shares its instance's
// address and is listed once. A nil state gives an empty inventory.
func InventoryOf(s *State) Inventory {
	inv := Inventory{Resources: []InventoryResource{}}
	if s == nil {
		return inv
	}
	inv.Serial, inv.Lineage = s.Serial, s.Lineage
	size := 0
	for _, r := range s.Resources {
		seen := make(map[string]bool, len(r.keys))
		for _, key := range r.keys {
			addr := instanceAddress(r, key)
			if seen[addr] {
				continue
			}
			seen[addr] = true
			inv.Total++
			if r.Mode == "managed" {
				inv.Managed++
			}
			if inv.Truncated {
				continue
			}
			e := InventoryResource{Address: addr, Type: r.Type, Mode: r.Mode, Module: r.Module, Provider: r.Provider}
			n := entrySize(e)
			if len(inv.Resources) >= MaxInventoryResources || size+n > MaxInventoryBytes {
				inv.Truncated = true
				continue
			}
			size += n
			inv.Resources = append(inv.Resources, e)
		}
	}
	return inv
}

// entrySize is the encoded size of an entry with its separating comma.
func entrySize(e InventoryResource) int {
	b, err := json.Marshal(e)
	if err != nil {
		return MaxInventoryBytes + 1
	}
	return len(b) + 1
}

// instanceAddress is the address terraform prints for an instance of r with this key.
func instanceAddress(r Resource, key json.RawMessage) string {
	var b strings.Builder
	if r.Module != "" {
		b.WriteString(r.Module)
		b.WriteByte('.')
	}
	if r.Mode == "data" {
		b.WriteString("data.")
	}
	b.WriteString(r.Type)
	b.WriteByte('.')
	b.WriteString(r.Name)
	b.WriteString(keyString(key))
	return b.String()
}

// keyString is an instance key as terraform prints it: [0] for a count index, ["a"] for a
// for_each key (quoted as HCL quotes it), nothing for none.
func keyString(key json.RawMessage) string {
	key = bytes.TrimSpace(key)
	if len(key) == 0 || string(key) == "null" {
		return ""
	}
	if key[0] == '"' {
		var s string
		if err := json.Unmarshal(key, &s); err == nil {
			return "[" + hclQuote(s) + "]"
		}
		return "[" + string(key) + "]"
	}
	if n, err := strconv.ParseInt(string(key), 10, 64); err == nil {
		return "[" + strconv.FormatInt(n, 10) + "]"
	}
	return "[" + string(key) + "]"
}

// hclQuote quotes s as terraform quotes a string instance key: HCL's escapes, and a template
// introducer (${ or %{) doubled so the address parses back.
func hclQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i, r := range s {
		switch r {
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '$', '%':
			b.WriteRune(r)
			if strings.HasPrefix(s[i+1:], "{") {
				b.WriteRune(r)
			}
		default:
			switch {
			case unicode.IsPrint(r):
				b.WriteRune(r)
			case r < 0x10000:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// InventorySecret builds the object's inventory Secret (naming.InventorySecretName(suffix)):
// the key InventoryKey holding inv as JSON. It is owned by the object and labelled like the
// outputs Secret (owner labels with the shard, the clusterctl move label, role InventoryRole),
// but it is not offered to variablesFrom.
func InventorySecret(owner metav1.Object, gvk schema.GroupVersionKind, suffix string, inv Inventory) (*corev1.Secret, error) {
	if err := checkOwner("inventory secret", owner, gvk, suffix); err != nil {
		return nil, err
	}
	b, err := json.Marshal(inv)
	if err != nil {
		return nil, fmt.Errorf("encode inventory: %w", err)
	}
	return movedSecret(owner, gvk, naming.InventorySecretName(suffix), infrav1.SecretRoleLabel, InventoryRole,
		map[string][]byte{InventoryKey: b}), nil
}

// ParseInventory reads the inventory Secret's data.
func ParseInventory(data map[string][]byte) (*Inventory, error) {
	b, ok := data[InventoryKey]
	if !ok {
		return nil, fmt.Errorf("inventory: no key %s", InventoryKey)
	}
	inv := &Inventory{}
	if err := json.Unmarshal(b, inv); err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	return inv, nil
}
