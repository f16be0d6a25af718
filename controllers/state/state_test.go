package state_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

const secretValue = "super-secret-token-value"

func expectStateError(t *testing.T, err error, reason string) *state.StateError {
	t.Helper()
	if err == nil {
		t.Fatalf("want a StateError %s, got no error", reason)
	}
	if errors.Is(err, state.ErrNoState) {
		t.Fatalf("an unreadable state was reported as no state: %v", err)
	}
	se, ok := state.AsStateError(err)
	if !ok {
		t.Fatalf("want a StateError %s, got %T: %v", reason, err, err)
	}
	if se.Reason != reason {
		t.Fatalf("want reason %s, got %s: %v", reason, se.Reason, err)
	}
	return se
}

func TestParseRejectsWhatIsNotAState(t *testing.T) {
	cases := []struct {
		name, json, reason string
	}{
		{"not JSON", `this is not json`, state.ReasonStateCorrupt},
		{"a JSON list", `[1, 2]`, state.ReasonStateCorrupt},
		{"no version", `{"serial": 1, "outputs": {}}`, state.ReasonStateCorrupt},
		{"version 3", `{"version": 3, "serial": 1}`, state.ReasonStateVersionUnsupported},
		{"outputs not a map", `{"version": 4, "outputs": []}`, state.ReasonStateCorrupt},
		{"trailing data", `{"version": 4} {"version": 4}`, state.ReasonStateCorrupt},
		{"encrypted", `{"serial": 1, "lineage": "l", "meta": {"key_provider.pbkdf2.k": "x"}, "encrypted_data": "AAAA", "encryption_version": "v0"}`, state.ReasonStateEncrypted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := state.Parse([]byte(tc.json))
			_ = expectStateError(t, err, tc.reason)
		})
	}
}

func TestParseReadsOutputsAndResources(t *testing.T) {
	raw := `{
  "version": 4, "terraform_version": "1.10.0", "serial": 7, "lineage": "abc",
  "outputs": {
    "plain": {"value": {"b": [1, 2],
       "a": "x"}, "type": ["object", {"a": "string", "b": ["list", "number"]}]},
    "secret": {"value": "` + secretValue + `", "type": "string", "sensitive": true}
  },
  "resources": [
    {"mode": "managed", "type": "terraform_data", "name": "r", "instances": [{"attributes": {}}, {"attributes": {}}]},
    {"module": "module.net", "mode": "data", "type": "x", "name": "d", "instances": [{}]}
  ]
}`
	s, err := state.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if s.Serial != 7 || s.Lineage != "abc" || s.TerraformVersion != "1.10.0" || s.Version != 4 {
		t.Errorf("identity: %+v", s)
	}
	v, err := s.Outputs["plain"].Value()
	if err != nil || string(v) != `{"b":[1,2],"a":"x"}` {
		t.Errorf("plain output = %s, %v", v, err)
	}
	if _, err := s.Outputs["secret"].Value(); !errors.Is(err, state.ErrSensitive) {
		t.Errorf("a sensitive output's value was returned: %v", err)
	}
	if got := strings.Join(s.OutputNames(), ","); got != "plain,secret" {
		t.Errorf("output names %s", got)
	}
	want := []state.Resource{{Mode: "managed", Type: "terraform_data", Name: "r", Instances: 2}, {Module: "module.net", Mode: "data", Type: "x", Name: "d", Instances: 1}}
	// The instance keys are private (state.InventoryOf reads them): compare the summary.
	var got []state.Resource
	for _, r := range s.Resources {
		got = append(got, state.Resource{Module: r.Module, Mode: r.Mode, Type: r.Type, Name: r.Name, Provider: r.Provider, Instances: r.Instances})
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("resources %+v", got)
	}
	if !bytes.Equal(s.Bytes(), []byte(raw)) {
		t.Errorf("Bytes does not return the state as read")
	}
}

func TestNothingPrintsASensitiveValue(t *testing.T) {
	s, err := state.Parse([]byte(`{"version": 4, "outputs": {"secret": {"value": "` + secretValue + `", "type": "string", "sensitive": true}}}`))
	if err != nil {
		t.Fatal(err)
	}
	printed := strings.Join([]string{
		fmt.Sprint(s), fmt.Sprintf("%v %+v %#v", s, s, s), fmt.Sprintf("%v %+v %#v", *s, *s, *s),
		fmt.Sprintf("%v %+v %#v", s.Outputs, s.Outputs, s.Outputs), fmt.Sprint(s.Outputs["secret"]),
		fmt.Sprintf("%s %q %x", s.Outputs["secret"], s.Outputs["secret"], s.Outputs["secret"]),
		fmt.Sprintf("%s %q", s.Outputs, *s),
	}, "\n")
	// fmt prints a []byte field as decimal bytes (%v), as text (%s, %q) or as hex (%x).
	forms := []string{secretValue, strings.Trim(fmt.Sprint([]byte(secretValue)), "[]"), fmt.Sprintf("%x", secretValue)} //nolint:staticcheck // the decimal byte form is what fmt prints for a []byte field
	for _, f := range forms {
		if strings.Contains(printed, f) {
			t.Fatalf("a sensitive value was printed (as %q):\n%s", f, printed)
		}
	}
	if strings.Contains(printed, "super-secret") {
		t.Fatalf("a sensitive value was printed:\n%s", printed)
	}
	b, err := json.Marshal(s.Outputs)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), secretValue) {
		t.Fatalf("a sensitive value was JSON-encoded: %s", b)
	}
	if got := state.ClusterOutputsForMachines(s); len(got) != 0 {
		t.Fatalf("a sensitive output is offered to machines: %v", got)
	}
	_, err = state.Machine(stateWithSecretProviderID(t))
	if err == nil || strings.Contains(err.Error(), secretValue) {
		t.Fatalf("a sensitive contract output was accepted or printed: %v", err)
	}
}

func stateWithSecretProviderID(t *testing.T) *state.State {
	t.Helper()
	s, err := state.Parse([]byte(`{"version": 4, "outputs": {"provider_id": {"value": "` + secretValue + `", "type": "string", "sensitive": true}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStateEmpty(t *testing.T) {
	resources := func(rs string) *state.State {
		s, err := state.Parse([]byte(`{"version": 4, "resources": ` + rs + `}`))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cases := []struct {
		name  string
		state *state.State
		empty bool
	}{
		{"no state secret", nil, true},
		{"no resources", resources(`[]`), true},
		{"resources null", resources(`null`), true},
		{"data sources only", resources(`[{"mode": "data", "type": "x", "name": "d", "instances": [{}]}]`), true},
		{"managed resource without instances", resources(`[{"mode": "managed", "type": "x", "name": "r", "instances": []}]`), true},
		{"a managed instance", resources(`[{"mode": "managed", "type": "x", "name": "r", "instances": [{}]}]`), false},
		{"a managed instance in a module", resources(`[{"module": "module.a", "mode": "managed", "type": "x", "name": "r", "instances": [{}]}]`), false},
		{"unknown mode, no instances", resources(`[{"mode": "ephemeral", "type": "x", "name": "e", "instances": []}]`), false},
		{"no mode", resources(`[{"type": "x", "name": "r", "instances": [{}]}]`), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := state.StateEmpty(tc.state); got != tc.empty {
				t.Fatalf("StateEmpty = %v, want %v", got, tc.empty)
			}
		})
	}
}

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	out, err := state.Compress(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestFromSecretLayouts(t *testing.T) {
	good, err := statetest.Machine("p://m").JSON()
	if err != nil {
		t.Fatal(err)
	}
	secret := func(data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tfstate-default-x"}, Data: data}
	}
	t.Run("single tfstate key", func(t *testing.T) {
		s, err := state.FromSecret(secret(map[string][]byte{"tfstate": gz(t, good)}))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := s.Outputs["provider_id"]; !ok {
			t.Fatalf("outputs not read: %v", s.OutputNames())
		}
	})
	t.Run("no data is no state", func(t *testing.T) {
		_, err := state.FromSecret(secret(nil))
		if !errors.Is(err, state.ErrNoState) {
			t.Fatalf("want ErrNoState, got %v", err)
		}
	})
	t.Run("chunk-like keys without tfstate", func(t *testing.T) {
		_, err := state.FromSecret(secret(map[string][]byte{"tfstate.0": gz(t, good[:10]), "tfstate.1": gz(t, good[10:])}))
		se := expectStateError(t, err, state.ReasonStateLayoutUnknown)
		if !strings.Contains(se.Error(), "tfstate.0, tfstate.1") || !strings.Contains(se.Error(), "ns/tfstate-default-x") {
			t.Fatalf("message does not list the keys and the Secret: %v", se)
		}
	})
	t.Run("tfstate plus an unknown key", func(t *testing.T) {
		_, err := state.FromSecret(secret(map[string][]byte{"tfstate": gz(t, good), "chunks": []byte("2")}))
		_ = expectStateError(t, err, state.ReasonStateLayoutUnknown)
	})
	t.Run("plain JSON, not gzip", func(t *testing.T) {
		_, err := state.FromSecret(secret(map[string][]byte{"tfstate": good}))
		_ = expectStateError(t, err, state.ReasonStateCorrupt)
	})
	t.Run("truncated gzip", func(t *testing.T) {
		z := gz(t, good)
		_, err := state.FromSecret(secret(map[string][]byte{"tfstate": z[:len(z)-10]}))
		_ = expectStateError(t, err, state.ReasonStateCorrupt)
	})
	t.Run("gzip of a bad state", func(t *testing.T) {
		_, err := state.FromSecret(secret(map[string][]byte{"tfstate": gz(t, []byte(`{"version": 4, "outputs": "x"}`))}))
		se := expectStateError(t, err, state.ReasonStateCorrupt)
		if se.Secret != "ns/tfstate-default-x" {
			t.Fatalf("the error does not name the Secret: %v", se)
		}
	})
	t.Run("gzip bomb", func(t *testing.T) {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		chunk := make([]byte, 1<<20)
		for i := 0; i <= state.MaxStateBytes>>20; i++ {
			if _, err := zw.Write(chunk); err != nil {
				t.Fatal(err)
			}
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		_, err := state.FromSecret(secret(map[string][]byte{"tfstate": buf.Bytes()}))
		_ = expectStateError(t, err, state.ReasonStateTooLarge)
	})
}

func TestClusterOutputsForMachines(t *testing.T) {
	s, err := state.Parse([]byte(`{"version": 4, "outputs": {
		"vpc_id": {"value": "vpc-1", "type": "string"},
		"subnets": {"value": ["a", "b"], "type": ["list", "string"]},
		"nothing": {"value": null, "type": "string"},
		"token": {"value": "` + secretValue + `", "type": "string", "sensitive": true}}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := state.ClusterOutputsForMachines(s)
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if strings.Join(keys, ",") != "nothing,subnets,vpc_id" {
		t.Fatalf("keys %v", keys)
	}
	if string(got["subnets"]) != `["a","b"]` || string(got["vpc_id"]) != `"vpc-1"` || string(got["nothing"]) != `null` {
		t.Fatalf("values %s %s %s", got["subnets"], got["vpc_id"], got["nothing"])
	}
	if len(state.ClusterOutputsForMachines(nil)) != 0 {
		t.Fatal("a nil state offers outputs")
	}
}

func TestOutputsSecret(t *testing.T) {
	owner := objects.Cluster("ns", "c").Cluster("capi-c").UID("uid-c").Obj()
	gvk := infrav1.GroupVersion.WithKind(infrav1.TerraformClusterKind)
	s, err := state.Parse([]byte(`{"version": 4, "outputs": {
		"vpc_id": {"value": "vpc-1", "type": "string"},
		"token": {"value": "` + secretValue + `", "type": "string", "sensitive": true}}}`))
	if err != nil {
		t.Fatal(err)
	}
	sec, err := state.OutputsSecret(owner, gvk, "0123456789abcdef", s)
	if err != nil {
		t.Fatal(err)
	}
	if sec.Name != naming.OutputsSecretName("0123456789abcdef") || sec.Namespace != "ns" {
		t.Errorf("name %s/%s", sec.Namespace, sec.Name)
	}
	if string(sec.Data["vpc_id"]) != `"vpc-1"` || string(sec.Data["token"]) != `"`+secretValue+`"` || len(sec.Data) != 2 {
		t.Errorf("data %v", sec.Data)
	}
	o := sec.OwnerReferences
	if len(o) != 1 || o[0].UID != "uid-c" || o[0].Kind != infrav1.TerraformClusterKind || o[0].APIVersion != infrav1.GroupVersion.String() {
		t.Errorf("owner %+v", o)
	}
	if v, ok := sec.Labels[state.MoveLabel]; !ok || v != "" {
		t.Errorf("move label missing: %v", sec.Labels)
	}
	for k, v := range naming.OwnerLabels(infrav1.TerraformClusterKind, "c", "capi-c", "") {
		if sec.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, sec.Labels[k], v)
		}
	}
	empty, err := state.OutputsSecret(owner, gvk, "0123456789abcdef", nil)
	if err != nil || len(empty.Data) != 0 {
		t.Errorf("nil state: %v %v", empty, err)
	}
	noUID := owner.DeepCopy()
	noUID.UID = ""
	if _, err := state.OutputsSecret(noUID, gvk, "0123456789abcdef", s); err == nil {
		t.Error("an owner without uid was accepted")
	}
	big, err := state.Parse([]byte(`{"version": 4, "outputs": {"blob": {"value": "` + strings.Repeat("b", 1<<20) + `", "type": "string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := state.OutputsSecret(owner, gvk, "0123456789abcdef", big); err == nil {
		t.Error("outputs over 1 MiB were accepted")
	} else if oe, ok := state.AsOutputError(err); !ok || oe.Reason != infrav1.OutputInvalidReason {
		t.Errorf("want an OutputInvalid error, got %v", err)
	}
}
