package certs_test

import (
	"bytes"
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/certs"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// controlPlane is the package's kube-apiserver for InjectCABundle: the first test that needs it
// starts it, TestMain stops it.
var controlPlane envtest.Shared

// TestMain stops the control plane a test started, if any (envtest.Shared.Main).
func TestMain(m *testing.M) { controlPlane.Main(m) }

// webhookClientConfig is the client configuration of one webhook of a configuration, calling a service, with no CA bundle yet.
func webhookClientConfig(path string) admissionregistrationv1.WebhookClientConfig {
	return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "captf-system", Name: "webhook", Path: ptr.To(path)}}
}

// TestInjectCABundle: every webhook of the named validating and mutating configurations gets the
// CA bundle, in the API server; an unnamed configuration is left alone, and a named one that does
// not exist is an error naming it.
func TestInjectCABundle(t *testing.T) {
	_, c := controlPlane.Get(t)
	ctx := context.Background()
	side := admissionregistrationv1.SideEffectClassNone
	validating := func(name string) *admissionregistrationv1.ValidatingWebhookConfiguration {
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, hook := range []string{"a", "b"} {
			v.Webhooks = append(v.Webhooks, admissionregistrationv1.ValidatingWebhook{Name: hook + "." + name + ".captf.io",
				ClientConfig: webhookClientConfig("/" + hook), SideEffects: &side, AdmissionReviewVersions: []string{"v1"}})
		}
		return v
	}
	mutating := func(name string) *admissionregistrationv1.MutatingWebhookConfiguration {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, hook := range []string{"a", "b"} {
			m.Webhooks = append(m.Webhooks, admissionregistrationv1.MutatingWebhook{Name: hook + "." + name + ".captf.io",
				ClientConfig: webhookClientConfig("/" + hook), SideEffects: &side, AdmissionReviewVersions: []string{"v1"}})
		}
		return m
	}
	objs := []client.Object{validating("inject-v"), validating("inject-v-other"), mutating("inject-m")}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	ca := []byte("-----BEGIN CERTIFICATE-----\ninject test\n-----END CERTIFICATE-----\n")
	if err := certs.InjectCABundle(ctx, c, ca, []string{"inject-v"}, []string{"inject-m"}); err != nil {
		t.Fatalf("InjectCABundle: %v", err)
	}
	// Twice: a second call finds nothing to change and succeeds.
	if err := certs.InjectCABundle(ctx, c, ca, []string{"inject-v"}, []string{"inject-m"}); err != nil {
		t.Fatalf("InjectCABundle again: %v", err)
	}
	bundles := func(o client.Object) [][]byte {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
		var out [][]byte
		switch cfg := o.(type) {
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			for _, w := range cfg.Webhooks {
				out = append(out, w.ClientConfig.CABundle)
			}
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			for _, w := range cfg.Webhooks {
				out = append(out, w.ClientConfig.CABundle)
			}
		}
		return out
	}
	for _, o := range []client.Object{objs[0], objs[2]} {
		got := bundles(o)
		if len(got) != 2 || !bytes.Equal(got[0], ca) || !bytes.Equal(got[1], ca) {
			t.Errorf("%s: CA bundles %q, want the CA on both webhooks", o.GetName(), got)
		}
	}
	for _, b := range bundles(objs[1]) {
		if len(b) != 0 {
			t.Errorf("%s was not named, yet got a CA bundle %q", objs[1].GetName(), b)
		}
	}

	for _, tc := range []struct {
		validating, mutating []string
		want                 string
	}{
		{validating: []string{"inject-missing"}, want: "inject ca bundle into validating webhook configuration inject-missing: "},
		{mutating: []string{"inject-missing"}, want: "inject ca bundle into mutating webhook configuration inject-missing: "},
	} {
		err := certs.InjectCABundle(ctx, c, ca, tc.validating, tc.mutating)
		if err == nil || !bytes.HasPrefix([]byte(err.Error()), []byte(tc.want)) {
			t.Errorf("InjectCABundle(%v, %v) = %v, want an error starting %q", tc.validating, tc.mutating, err, tc.want)
		}
	}
}
