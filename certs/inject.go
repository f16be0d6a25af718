package certs

import (
	"bytes"
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// InjectCABundle sets caBundle on every webhook of the named validating and mutating webhook
// configurations: what cert-manager's cainjector does in a cluster, for tests that run without
// cert-manager (the sandbox runs cert-manager's own cainjector). A configuration that does not exist is an error.
func InjectCABundle(ctx context.Context, c client.Client, caPEM []byte, validating, mutating []string) error {
	for _, name := range validating {
		if err := inject(ctx, c, name, &admissionregistrationv1.ValidatingWebhookConfiguration{}, caPEM); err != nil {
			return fmt.Errorf("inject ca bundle into validating webhook configuration %s: %w", name, err)
		}
	}
	for _, name := range mutating {
		if err := inject(ctx, c, name, &admissionregistrationv1.MutatingWebhookConfiguration{}, caPEM); err != nil {
			return fmt.Errorf("inject ca bundle into mutating webhook configuration %s: %w", name, err)
		}
	}
	return nil
}

// clientConfigs points at the client configuration of each webhook of a validating or mutating
// webhook configuration.
func clientConfigs(cfg client.Object) []*admissionregistrationv1.WebhookClientConfig {
	var out []*admissionregistrationv1.WebhookClientConfig
	switch cfg := cfg.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range cfg.Webhooks {
			out = append(out, &cfg.Webhooks[i].ClientConfig)
		}
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range cfg.Webhooks {
			out = append(out, &cfg.Webhooks[i].ClientConfig)
		}
	}
	return out
}

// inject reads obj (a validating or mutating webhook configuration), sets caPEM on the client
// configs of its webhooks and updates it when that changed anything, retrying on conflicts.
func inject(ctx context.Context, c client.Client, name string, obj client.Object, caPEM []byte) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, types.NamespacedName{Name: name}, obj); err != nil {
			return err
		}
		changed := false
		for _, cc := range clientConfigs(obj) {
			if !bytes.Equal(cc.CABundle, caPEM) {
				cc.CABundle = bytes.Clone(caPEM)
				changed = true
			}
		}
		if !changed {
			return nil
		}
		return c.Update(ctx, obj)
	})
}
