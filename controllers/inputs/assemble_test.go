package inputs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

const ns = "team-a"

func contractFor(name string) ContractInputs {
	return ContractInputs{Kind: infrav1.TerraformMachineKind, Name: name, Namespace: ns, ClusterName: "c1"}
}

// optIn are the labels of a variables source that opted in.
func optIn() map[string]string { return map[string]string{VariablesLabel: VariablesLabelValue} }

// secret is a Secret that opted in as a variables source.
func secret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: optIn()}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// configMap is a ConfigMap that opted in as a variables source.
func configMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: optIn()}, Data: data}
}

func fakeReader(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

func fromSecret(name string, optional bool) infrav1.VariablesSource {
	return infrav1.VariablesSource{SecretRef: &infrav1.LocalObjectReference{Name: name}, Optional: optional}
}

func fromConfigMap(name string, optional bool) infrav1.VariablesSource {
	return infrav1.VariablesSource{ConfigMapRef: &infrav1.LocalObjectReference{Name: name}, Optional: optional}
}

func rawVars(s string) *runtime.RawExtension {
	return &runtime.RawExtension{Raw: []byte(s)}
}

func assemble(t *testing.T, r client.Reader, spec infrav1.TerraformSpec, c ContractInputs) (*Inputs, error) {
	t.Helper()
	return Assemble(context.Background(), r, ns, &spec, c)
}

func mustAssemble(t *testing.T, r client.Reader, spec infrav1.TerraformSpec, c ContractInputs) *Inputs {
	t.Helper()
	in, err := assemble(t, r, spec, c)
	if err != nil {
		t.Fatalf("assemble: %v", err)
	}
	return in
}

func decodeVars(t *testing.T, in *Inputs) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(in.Variables)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("variables are not a JSON object: %v\n%s", err, in.Variables)
	}
	return m
}

// expectReason fails unless err is an *InputsError with reason, and returns its message.
func expectReason(t *testing.T, err error, reason string) string {
	t.Helper()
	if err == nil {
		t.Fatalf("expected an InputsError with reason %s, got no error", reason)
	}
	ie, ok := AsInputsError(err)
	if !ok {
		t.Fatalf("expected an InputsError with reason %s, got %T: %v", reason, err, err)
	}
	if ie.Reason != reason {
		t.Fatalf("expected reason %s, got %s: %s", reason, ie.Reason, ie.Message)
	}
	return ie.Message
}

func TestPrecedence(t *testing.T) {
	r := fakeReader(t,
		configMap("first", map[string]string{"a": "from-first", "b": "from-first", "c": "from-first"}),
		secret("second", map[string]string{"b": "from-second", "c": "from-second"}),
	)
	spec := infrav1.TerraformSpec{
		VariablesFrom: []infrav1.VariablesSource{fromConfigMap("first", false), fromSecret("second", false)},
		Variables:     rawVars(`{"c": "from-spec"}`),
	}
	vars := decodeVars(t, mustAssemble(t, r, spec, contractFor("m")))
	want := map[string]string{"a": "from-first", "b": "from-second", "c": "from-spec"}
	for k, v := range want {
		if vars[k] != v {
			t.Errorf("variable %s = %v, want %v", k, vars[k], v)
		}
	}
}

func TestValuesParseAsJSONElseString(t *testing.T) {
	values := map[string]string{
		"boolean":  "true",
		"integer":  "42",
		"decimal":  "4.50",
		"big":      "9007199254740993",
		"object":   `{"k": [1, 2]}`,
		"quoted":   `"quoted"`,
		"text":     "hello world",
		"empty":    "",
		"padded":   " 7 ",
		"twovals":  "1 2",
		"nullval":  "null",
		"notjson":  "{broken",
		"leadzero": "0123",
	}
	r := fakeReader(t, configMap("vals", values))
	in := mustAssemble(t, r, infrav1.TerraformSpec{VariablesFrom: []infrav1.VariablesSource{fromConfigMap("vals", false)}}, contractFor("m"))
	var got map[string]json.RawMessage
	if err := json.Unmarshal(in.Variables, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"boolean":  `true`,
		"integer":  `42`,
		"decimal":  `4.50`,
		"big":      `9007199254740993`,
		"object":   `{"k":[1,2]}`,
		"quoted":   `"quoted"`,
		"text":     `"hello world"`,
		"empty":    `""`,
		"padded":   `7`,
		"twovals":  `"1 2"`,
		"nullval":  `null`,
		"notjson":  `"{broken"`,
		"leadzero": `"0123"`,
	}
	for k, w := range want {
		if string(got[k]) != w {
			t.Errorf("variable %s = %s, want %s", k, got[k], w)
		}
	}
}

func TestCanonicalVariablesAndHash(t *testing.T) {
	r := fakeReader(t)
	a := mustAssemble(t, r, infrav1.TerraformSpec{Variables: rawVars(`{"zeta": {"y": 1, "x": [ {"b": 2, "a": 1} ]}, "alpha": "a"}`)}, contractFor("m"))
	b := mustAssemble(t, r, infrav1.TerraformSpec{Variables: rawVars(`{ "alpha":"a",
		"zeta": {"x": [{"a": 1, "b": 2}], "y": 1}}`)}, contractFor("m"))
	if string(a.Variables) != string(b.Variables) || a.Hash != b.Hash {
		t.Fatalf("same inputs in a different order differ:\n%s\n%s", a.Variables, b.Variables)
	}
	if !strings.Contains(string(a.Variables), `"zeta":{"x":[{"a":1,"b":2}],"y":1}`) {
		t.Errorf("variables are not canonical (sorted keys, no whitespace): %s", a.Variables)
	}
	if strings.ContainsAny(string(a.Variables), " \n\t") {
		t.Errorf("canonical variables contain whitespace: %s", a.Variables)
	}
	c := mustAssemble(t, r, infrav1.TerraformSpec{Variables: rawVars(`{"alpha": "a", "zeta": {"x": [{"a": 1, "b": 3}], "y": 1}}`)}, contractFor("m"))
	if c.Hash == a.Hash {
		t.Fatalf("a changed value kept the hash %s", a.Hash)
	}
	d := mustAssemble(t, r, infrav1.TerraformSpec{Variables: rawVars(`{"alpha": "a", "zeta": {"x": [{"a": 1, "b": 2}], "y": 1}}`)}, contractFor("other"))
	if d.Hash == a.Hash {
		t.Fatalf("a changed contract input kept the hash %s", a.Hash)
	}
}

func TestHashIsVersioned(t *testing.T) {
	in := mustAssemble(t, fakeReader(t), infrav1.TerraformSpec{}, contractFor("m"))
	if !strings.HasPrefix(in.Hash, HashVersion+"-") {
		t.Fatalf("hash %q lacks the version prefix %q", in.Hash, HashVersion+"-")
	}
	plain := sha256.Sum256(in.Variables)
	if strings.TrimPrefix(in.Hash, HashVersion+"-") == hex.EncodeToString(plain[:]) {
		t.Fatalf("hash %q does not bind the scheme version: it is the plain SHA-256 of the variables", in.Hash)
	}
	if got := Hash(in.Module, in.Variables); got != in.Hash {
		t.Fatalf("Hash = %s, Assemble gave %s", got, in.Hash)
	}
	if IsLegacyHash(in.Hash) || !IsLegacyHash(LegacyHash(in.Variables)) || LegacyHash(in.Variables) == in.Hash {
		t.Fatalf("the schemes are not told apart: %s, legacy %s", in.Hash, LegacyHash(in.Variables))
	}
}

// The module's source is hashed with the variables: another image, another path or another
// ConfigMap of the same variables is another hash, so it is applied or planned; the same
// source written again is the same hash.
func TestModuleSourceChangesTheHash(t *testing.T) {
	r := fakeReader(t)
	vars := rawVars(`{"size":"small"}`)
	hashOf := func(m infrav1.ModuleSource) string {
		t.Helper()
		return mustAssemble(t, r, infrav1.TerraformSpec{Module: m, Variables: vars}, contractFor("m")).Hash
	}
	base := hashOf(infrav1.ModuleSource{Image: "registry.example/net:1"})
	if again := hashOf(infrav1.ModuleSource{Image: "registry.example/net:1"}); again != base {
		t.Fatalf("the same module gave %s, then %s", base, again)
	}
	seen := map[string]string{base: "image net:1"}
	for name, m := range map[string]infrav1.ModuleSource{
		"image net:2":       {Image: "registry.example/net:2"},
		"image net:1, path": {Image: "registry.example/net:1", Path: "modules/net"},
		"configMap net":     {ConfigMap: &infrav1.ConfigMapModule{Name: "net"}},
		"configMap net-v2":  {ConfigMap: &infrav1.ConfigMapModule{Name: "net-v2"}},
	} {
		h := hashOf(m)
		if prev, ok := seen[h]; ok {
			t.Errorf("%s and %s have the same inputs hash %s", name, prev, h)
		}
		seen[h] = name
	}
}

func TestReservedAndInvalidNames(t *testing.T) {
	cases := []struct {
		name string
		spec infrav1.TerraformSpec
		objs []client.Object
		ok   bool
	}{
		{name: "captf in spec.variables", spec: infrav1.TerraformSpec{Variables: rawVars(`{"captf": {"kind": "x"}}`)}},
		{name: "captf in a Secret", objs: []client.Object{secret("s", map[string]string{"captf": "x"})},
			spec: infrav1.TerraformSpec{VariablesFrom: []infrav1.VariablesSource{fromSecret("s", false)}}},
		{name: "captf in a ConfigMap", objs: []client.Object{configMap("c", map[string]string{"captf": "x"})},
			spec: infrav1.TerraformSpec{VariablesFrom: []infrav1.VariablesSource{fromConfigMap("c", false)}}},
		{name: "dotted key", objs: []client.Object{configMap("c", map[string]string{"my.var": "x"})},
			spec: infrav1.TerraformSpec{VariablesFrom: []infrav1.VariablesSource{fromConfigMap("c", false)}}},
		{name: "leading digit", spec: infrav1.TerraformSpec{Variables: rawVars(`{"1abc": 1}`)}},
		{name: "leading hyphen", spec: infrav1.TerraformSpec{Variables: rawVars(`{"-abc": 1}`)}},
		{name: "empty name", spec: infrav1.TerraformSpec{Variables: rawVars(`{"": 1}`)}},
		{name: "terraform reserved", spec: infrav1.TerraformSpec{Variables: rawVars(`{"count": 1}`)}},
		{name: "spec.variables not an object", spec: infrav1.TerraformSpec{Variables: rawVars(`[1, 2]`)}},
		{name: "spec.variables not JSON", spec: infrav1.TerraformSpec{Variables: rawVars(`{"a": `)}},
		{name: "valid names", ok: true, spec: infrav1.TerraformSpec{Variables: rawVars(`{"a-b_c": 1, "_x": 2, "Zed9": 3}`)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := assemble(t, fakeReader(t, tc.objs...), tc.spec, contractFor("m"))
			if tc.ok {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			expectReason(t, err, infrav1.InvalidInputsReason)
		})
	}
}

func TestExportedNameChecks(t *testing.T) {
	for _, n := range []string{"a", "_", "a-b", "A_1"} {
		if !IsValidVariableName(n) {
			t.Errorf("IsValidVariableName(%q) = false", n)
		}
	}
	for _, n := range []string{"", "1a", "-a", "a.b", "a b", "é"} {
		if IsValidVariableName(n) {
			t.Errorf("IsValidVariableName(%q) = true", n)
		}
	}
	names := ReservedVariableNames()
	if names[0] != CaptfVariable {
		t.Fatalf("ReservedVariableNames()[0] = %q, want %q", names[0], CaptfVariable)
	}
	for _, n := range names {
		if !IsReservedVariableName(n) {
			t.Errorf("%q is listed as reserved but IsReservedVariableName says no", n)
		}
		if ValidateVariableName(n, "test") == nil {
			t.Errorf("ValidateVariableName accepts the reserved name %q", n)
		}
	}
}

func TestMissingSources(t *testing.T) {
	t.Run("required Secret", func(t *testing.T) {
		_, err := assemble(t, fakeReader(t), infrav1.TerraformSpec{VariablesFrom: []infrav1.VariablesSource{fromSecret("gone", false)}}, contractFor("m"))
		msg := expectReason(t, err, infrav1.InputsSourceMissingReason)
		if !strings.Contains(msg, "Secret "+ns+"/gone") {
			t.Errorf("message does not name the Secret: %s", msg)
		}
	})
	t.Run("required ConfigMap", func(t *testing.T) {
		_, err := assemble(t, fakeReader(t), infrav1.TerraformSpec{VariablesFrom: []infrav1.VariablesSource{fromConfigMap("gone", false)}}, contractFor("m"))
		msg := expectReason(t, err, infrav1.InputsSourceMissingReason)
		if !strings.Contains(msg, "ConfigMap "+ns+"/gone") {
			t.Errorf("message does not name the ConfigMap: %s", msg)
		}
	})
	t.Run("optional sources", func(t *testing.T) {
		r := fakeReader(t, configMap("here", map[string]string{"a": "1"}))
		in := mustAssemble(t, r, infrav1.TerraformSpec{VariablesFrom: []infrav1.VariablesSource{
			fromSecret("gone", true), fromConfigMap("here", false), fromConfigMap("gone", true),
		}}, contractFor("m"))
		if decodeVars(t, in)["a"] != json.Number("1") {
			t.Errorf("the present source was not read: %s", in.Variables)
		}
	})
	t.Run("other API errors are not user errors", func(t *testing.T) {
		boom := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "s", errors.New("rbac"))
		r := interceptor.NewClient(fakeReader(t), interceptor.Funcs{
			Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
				return boom
			},
		})
		_, err := assemble(t, r, infrav1.TerraformSpec{VariablesFrom: []infrav1.VariablesSource{fromSecret("s", true)}}, contractFor("m"))
		if err == nil || !apierrors.IsForbidden(err) {
			t.Fatalf("want the wrapped Forbidden error, got %v", err)
		}
		if _, ok := AsInputsError(err); ok {
			t.Fatalf("an API error was reported as a user error: %v", err)
		}
	})
}

func TestNonUTF8ValueIsRefused(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bin", Namespace: ns, Labels: optIn()}, BinaryData: map[string][]byte{"blob": {0xff, 0xfe, 0x00}}}
	_, err := assemble(t, fakeReader(t, cm), infrav1.TerraformSpec{VariablesFrom: []infrav1.VariablesSource{fromConfigMap("bin", false)}}, contractFor("m"))
	expectReason(t, err, infrav1.InvalidInputsReason)
}

func TestSizeLimit(t *testing.T) {
	t.Run("a large ConfigMap value", func(t *testing.T) {
		big := strings.Repeat("x", MaxRunSecretBytes)
		r := fakeReader(t, configMap("big", map[string]string{"blob": big}))
		_, err := assemble(t, r, infrav1.TerraformSpec{VariablesFrom: []infrav1.VariablesSource{fromConfigMap("big", false)}}, contractFor("m"))
		msg := expectReason(t, err, infrav1.InputsTooLargeReason)
		if !strings.Contains(msg, "1048576") {
			t.Errorf("message does not state the limit: %s", msg)
		}
	})
	t.Run("the redact list counts too", func(t *testing.T) {
		// 600 kB of variables fit alone; the same value also in redact.json does not.
		val := strings.Repeat("s", 600*1024)
		cmIn := mustAssemble(t, fakeReader(t, configMap("v", map[string]string{"blob": val})),
			infrav1.TerraformSpec{VariablesFrom: []infrav1.VariablesSource{fromConfigMap("v", false)}}, contractFor("m"))
		if len(cmIn.Variables) < 600*1024 {
			t.Fatalf("variables unexpectedly small: %d", len(cmIn.Variables))
		}
		_, err := assemble(t, fakeReader(t, secret("v", map[string]string{"blob": val})),
			infrav1.TerraformSpec{VariablesFrom: []infrav1.VariablesSource{fromSecret("v", false)}}, contractFor("m"))
		expectReason(t, err, infrav1.InputsTooLargeReason)
	})
	t.Run("just under the limit", func(t *testing.T) {
		in := mustAssemble(t, fakeReader(t), infrav1.TerraformSpec{}, contractFor("m"))
		size, err := runSecretSize(in, ns, fixedLengthSuffix, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Fill the rest with a ConfigMap variable: "blob" plus `,"blob":""` is the overhead.
		room := MaxRunSecretBytes - size - len(`,"blob":""`)
		r := fakeReader(t, configMap("v", map[string]string{"blob": strings.Repeat("y", room)}))
		in, err = assemble(t, r, infrav1.TerraformSpec{VariablesFrom: []infrav1.VariablesSource{fromConfigMap("v", false)}}, contractFor("m"))
		if err != nil {
			t.Fatalf("inputs at exactly the limit were refused: %v", err)
		}
		if size, _ := runSecretSize(in, ns, fixedLengthSuffix, nil); size != MaxRunSecretBytes {
			t.Fatalf("test setup: size %d, want exactly %d", size, MaxRunSecretBytes)
		}
		r = fakeReader(t, configMap("v", map[string]string{"blob": strings.Repeat("y", room+1)}))
		_, err = assemble(t, r, infrav1.TerraformSpec{VariablesFrom: []infrav1.VariablesSource{fromConfigMap("v", false)}}, contractFor("m"))
		expectReason(t, err, infrav1.InputsTooLargeReason)
	})
}

func TestRedactList(t *testing.T) {
	r := fakeReader(t,
		secret("creds", map[string]string{
			"password": "hunter2",
			"db":       `{"user": "admin", "pass": "s3cr3t-pass", "port": 5432}`,
			"empty":    "",
		}),
		configMap("plain", map[string]string{"region": "eu-west-1"}),
	)
	c := contractFor("m")
	c.BootstrapData = "#cloud-config\nruncmd: [kubeadm join]\n"
	in := mustAssemble(t, r, infrav1.TerraformSpec{VariablesFrom: []infrav1.VariablesSource{fromSecret("creds", false), fromConfigMap("plain", false)}}, c)
	has := map[string]bool{}
	for _, s := range in.Redact {
		if s == "" {
			t.Errorf("the redact list contains an empty string")
		}
		has[s] = true
	}
	for _, want := range []string{
		"hunter2", "s3cr3t-pass", "admin", "5432",
		`{"user": "admin", "pass": "s3cr3t-pass", "port": 5432}`,
		`{"pass":"s3cr3t-pass","port":5432,"user":"admin"}`,
		c.BootstrapData,
		`#cloud-config\nruncmd: [kubeadm join]\n`,
	} {
		if !has[want] {
			t.Errorf("redact list lacks %q", want)
		}
	}
	if has["eu-west-1"] {
		t.Errorf("a ConfigMap value is in the redact list")
	}
	for i := 1; i < len(in.Redact); i++ {
		if len(in.Redact[i]) > len(in.Redact[i-1]) {
			t.Fatalf("redact list is not longest first: %q before %q", in.Redact[i-1], in.Redact[i])
		}
	}
	if s := fmt.Sprintf("%v %+v %#v %s %q %v %s", in, in, in, in, in, *in, *in); strings.Contains(s, "hunter2") || strings.Contains(s, "104 117 110") {
		t.Errorf("Inputs.String leaks a value: %s", s)
	}
}

func TestCaptfObject(t *testing.T) {
	t.Run("every field present, null when unset", func(t *testing.T) {
		in := mustAssemble(t, fakeReader(t), infrav1.TerraformSpec{}, ContractInputs{Kind: infrav1.TerraformClusterKind, Name: "c", Namespace: ns})
		captf, ok := decodeVars(t, in)[CaptfVariable].(map[string]any)
		if !ok {
			t.Fatalf("captf is not an object: %s", in.Variables)
		}
		for _, f := range ContractFields() {
			if _, ok := captf[f]; !ok {
				t.Errorf("captf lacks the field %s", f)
			}
		}
		if len(captf) != len(ContractFields()) {
			t.Errorf("captf has %d fields, ContractFields lists %d", len(captf), len(ContractFields()))
		}
		for _, f := range []string{FieldClusterName, FieldControlPlaneEndpoint, FieldClusterNetwork, FieldBootstrapData, FieldFailureDomain, FieldVersion} {
			if captf[f] != nil {
				t.Errorf("unset field %s = %v, want null", f, captf[f])
			}
		}
		if o, ok := captf[FieldClusterOutputs].(map[string]any); !ok || len(o) != 0 {
			t.Errorf("cluster_outputs = %v, want {}", captf[FieldClusterOutputs])
		}
	})
	t.Run("a pool's replicas, which only pools have", func(t *testing.T) {
		three := int32(3)
		for _, c := range []struct {
			in   ContractInputs
			want any // absent: the key is missing
		}{
			{ContractInputs{Kind: infrav1.TerraformMachinePoolKind, Name: "p", Namespace: ns, Replicas: &three}, json.Number("3")},
			{ContractInputs{Kind: infrav1.TerraformMachinePoolKind, Name: "p", Namespace: ns}, nil},
			{ContractInputs{Kind: infrav1.TerraformMachineKind, Name: "m", Namespace: ns, Replicas: &three}, "absent"},
			{ContractInputs{Kind: infrav1.TerraformClusterKind, Name: "c", Namespace: ns}, "absent"},
		} {
			in := mustAssemble(t, fakeReader(t), infrav1.TerraformSpec{}, c.in)
			captf := decodeVars(t, in)[CaptfVariable].(map[string]any)
			got, ok := captf[FieldReplicas]
			switch {
			case c.want == "absent" && ok:
				t.Errorf("%s: captf has replicas = %v, want no such field", c.in.Kind, got)
			case c.want != "absent" && !ok:
				t.Errorf("%s: captf lacks replicas", c.in.Kind)
			case c.want != "absent" && fmt.Sprint(got) != fmt.Sprint(c.want):
				t.Errorf("%s: replicas = %v, want %v", c.in.Kind, got, c.want)
			}
			fields := ContractFields()
			if c.in.Kind == infrav1.TerraformMachinePoolKind {
				fields = PoolContractFields()
			}
			if len(captf) != len(fields) {
				t.Errorf("%s: captf has %d fields, want %d", c.in.Kind, len(captf), len(fields))
			}
		}
	})
	t.Run("machine fields", func(t *testing.T) {
		c := ContractInputs{
			Kind: infrav1.TerraformMachineKind, Name: "m", Namespace: ns, ClusterName: "c1",
			ControlPlaneEndpoint: &clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 6443},
			ClusterNetwork: &clusterv1.ClusterNetwork{
				Pods:          clusterv1.NetworkRanges{CIDRBlocks: []string{"192.168.0.0/16"}},
				ServiceDomain: "cluster.local",
			},
			BootstrapData:  "boot",
			FailureDomain:  "az1",
			Version:        "v1.36.0",
			ClusterOutputs: map[string]json.RawMessage{"vpc_id": json.RawMessage(`"vpc-1"`), "subnets": json.RawMessage(`{"b": 2, "a": 1}`)},
		}
		in := mustAssemble(t, fakeReader(t), infrav1.TerraformSpec{}, c)
		var v struct {
			Captf json.RawMessage `json:"captf"`
		}
		if err := json.Unmarshal(in.Variables, &v); err != nil {
			t.Fatal(err)
		}
		want := `{"bootstrap_data":"boot","cluster_name":"c1","cluster_network":{"api_server_port":null,"pods":["192.168.0.0/16"],"service_domain":"cluster.local","services":[]},` +
			`"cluster_outputs":{"subnets":{"a":1,"b":2},"vpc_id":"vpc-1"},"control_plane_endpoint":{"host":"10.0.0.1","port":6443},` +
			`"failure_domain":"az1","kind":"TerraformMachine","name":"m","namespace":"team-a","version":"v1.36.0"}`
		if string(v.Captf) != want {
			t.Fatalf("captf =\n%s\nwant\n%s", v.Captf, want)
		}
	})
	t.Run("bad cluster output", func(t *testing.T) {
		c := contractFor("m")
		c.ClusterOutputs = map[string]json.RawMessage{"x": json.RawMessage(`{`)}
		_, err := assemble(t, fakeReader(t), infrav1.TerraformSpec{}, c)
		expectReason(t, err, infrav1.InvalidInputsReason)
	})
	t.Run("incomplete contract is a programming error", func(t *testing.T) {
		_, err := assemble(t, fakeReader(t), infrav1.TerraformSpec{}, ContractInputs{Kind: infrav1.TerraformMachineKind})
		if err == nil {
			t.Fatal("no error for a contract without name and namespace")
		}
		if _, ok := AsInputsError(err); ok {
			t.Fatalf("a programming error was reported as a user error: %v", err)
		}
	})
}
