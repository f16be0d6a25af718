package channel

import (
	"strings"
	"testing"

	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// The channel checks a lock holder's Job by its owner-name label, which the controller writes
// with naming.LabelValue; the runner keeps its own copy of that function.
func TestLabelValueIsNamingLabelValue(t *testing.T) {
	for _, name := range []string{"m", strings.Repeat("a", 63), strings.Repeat("b", 64), strings.Repeat("c-", 100), "x." + strings.Repeat("y", 70)} {
		if got, want := labelValue(name), naming.LabelValue(name); got != want {
			t.Errorf("%d chars: %q, naming says %q", len(name), got, want)
		}
	}
}

func TestParseStatePath(t *testing.T) {
	cases := map[string]bool{
		"/state/ns/0123456789abcdef": true, "/state/ns/": false, "/state//x": false, "/state/ns/x/y": false,
		"/state/ns": false, "/other/ns/x": false, "/state/ns/x/../y": false,
	}
	for p, want := range cases {
		if _, _, ok := parseStatePath(p); ok != want {
			t.Errorf("%s: %t", p, ok)
		}
	}
}

func TestConfigRefusesMissingFlags(t *testing.T) {
	_, err := parse([]string{"--namespace=ns", "--suffix=s"}, []string{"KUBERNETES_SERVICE_HOST=10.0.0.1", "KUBERNETES_SERVICE_PORT=443", "POD_NAME=p"}, &strings.Builder{})
	for _, flag := range []string{"job", "run-lease", "owner-kind", "owner-name", "owner-uid"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("missing --%s not reported: %v", flag, err)
		}
	}
	_, err = parse([]string{"--namespace=ns", "--suffix=s", "--job=j", "--run-lease=r", "--owner-kind=k", "--owner-name=n", "--owner-uid=u"},
		[]string{"KUBERNETES_SERVICE_HOST=10.0.0.1", "KUBERNETES_SERVICE_PORT=443", "POD_NAME=p", "POD_NAMESPACE=other"}, &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "namespace other") {
		t.Errorf("a namespace other than the pod's was accepted: %v", err)
	}
	cfg, err := parse([]string{"--namespace=ns", "--suffix=s", "--job=j", "--run-lease=r", "--owner-kind=k", "--owner-name=n", "--owner-uid=u"},
		[]string{"KUBERNETES_SERVICE_HOST=fd00::1", "KUBERNETES_SERVICE_PORT=443", "POD_NAME=p", "POD_NAMESPACE=ns"}, &strings.Builder{})
	if err != nil || cfg.APIServer != "https://[fd00::1]:443" || cfg.TokenFile != "/var/run/secrets/captf.io/serviceaccount/token" {
		t.Errorf("%+v %v", cfg, err)
	}
}
