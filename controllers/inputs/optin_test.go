package inputs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// TestVariablesSourcesMustOptIn proves that Assemble reads a variablesFrom Secret or ConfigMap
// only when it carries captf.io/variables=true, that a refusal names the source and the exact
// command that opts it in, and that it never carries a value of the refused source.
func TestVariablesSourcesMustOptIn(t *testing.T) {
	const value = "s3cr3t-db-password"
	labelled := func(o client.Object, v string) client.Object {
		o.SetLabels(map[string]string{"app": "db", VariablesLabel: v})
		return o
	}
	foreignSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns, Labels: map[string]string{"app": "db"}},
		Data: map[string][]byte{"password": []byte(value)}}
	foreignConfigMap := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Data: map[string]string{"password": value}}

	for _, tc := range []struct {
		name    string
		obj     client.Object
		src     infrav1.VariablesSource
		command string // "" means the source is read
	}{
		{name: "unlabelled Secret", obj: foreignSecret, src: fromSecret("db", false),
			command: "kubectl label secret db -n " + ns + " captf.io/variables=true"},
		{name: "unlabelled ConfigMap", obj: foreignConfigMap, src: fromConfigMap("db", false),
			command: "kubectl label configmap db -n " + ns + " captf.io/variables=true"},
		{name: "unlabelled optional Secret: optional covers a missing source, not a foreign one", obj: foreignSecret, src: fromSecret("db", true),
			command: "kubectl label secret db -n " + ns + " captf.io/variables=true"},
		{name: "unlabelled optional ConfigMap", obj: foreignConfigMap, src: fromConfigMap("db", true),
			command: "kubectl label configmap db -n " + ns + " captf.io/variables=true"},
		{name: "Secret labelled false", obj: labelled(foreignSecret.DeepCopy(), "false"), src: fromSecret("db", false),
			command: "kubectl label secret db -n " + ns + " captf.io/variables=true --overwrite"},
		{name: "ConfigMap labelled with another value", obj: labelled(foreignConfigMap.DeepCopy(), "yes"), src: fromConfigMap("db", false),
			command: "kubectl label configmap db -n " + ns + " captf.io/variables=true --overwrite"},
		{name: "Secret that opted in", obj: labelled(foreignSecret.DeepCopy(), "true"), src: fromSecret("db", false)},
		{name: "ConfigMap that opted in", obj: labelled(foreignConfigMap.DeepCopy(), "true"), src: fromConfigMap("db", true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := assemble(t, fakeReader(t, tc.obj), infrav1.TerraformSpec{VariablesFrom: []infrav1.VariablesSource{tc.src}}, contractFor("m"))
			if tc.command == "" {
				if err != nil {
					t.Fatalf("a source that opted in was refused: %v", err)
				}
				if got := decodeVars(t, in)["password"]; got != value {
					t.Fatalf("password = %v, want the source's value", got)
				}
				return
			}
			msg := expectReason(t, err, infrav1.VariablesSourceNotOptedInReason)
			kind := "Secret"
			if tc.src.ConfigMapRef != nil {
				kind = "ConfigMap"
			}
			if want := "variablesFrom[0] (" + kind + " " + ns + "/db)"; !strings.Contains(msg, want) {
				t.Errorf("the message does not name the source %q: %s", want, msg)
			}
			if !strings.HasSuffix(msg, "run: "+tc.command) {
				t.Errorf("the message does not end with the command %q: %s", tc.command, msg)
			}
			if strings.Contains(msg, value) {
				t.Errorf("the message carries the refused source's value: %s", msg)
			}
			if in != nil {
				t.Errorf("inputs were returned with the error: %v", in)
			}
		})
	}
}

// TestOneForeignSourceRefusesTheWholeAssembly: a source that did not opt in stops the assembly
// even when the other sources did, so no Job runs with part of the variables.
func TestOneForeignSourceRefusesTheWholeAssembly(t *testing.T) {
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other-app", Namespace: ns}, Data: map[string][]byte{"token": []byte("t")}}
	r := fakeReader(t, configMap("defaults", map[string]string{"region": "eu-west-1"}), foreign, secret("creds", map[string]string{"key": "k"}))
	_, err := assemble(t, r, infrav1.TerraformSpec{VariablesFrom: []infrav1.VariablesSource{
		fromConfigMap("defaults", false), fromSecret("other-app", false), fromSecret("creds", false),
	}}, contractFor("m"))
	msg := expectReason(t, err, infrav1.VariablesSourceNotOptedInReason)
	if !strings.Contains(msg, "variablesFrom[1] (Secret "+ns+"/other-app)") {
		t.Errorf("the message does not name the foreign entry: %s", msg)
	}
}

// TestAPIDocDescribesTheOptIn keeps docs/api.md in step with the rule.
func TestAPIDocDescribesTheOptIn(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatalf("read docs/api.md: %v", err)
	}
	for _, w := range []string{VariablesLabel + "=" + VariablesLabelValue, infrav1.VariablesSourceNotOptedInReason, "kubectl label"} {
		if !strings.Contains(string(b), w) {
			t.Errorf("docs/api.md does not mention %s", w)
		}
	}
}
