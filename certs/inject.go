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
// configurations: what cert-manager's cainjector does in a cluster, for the sandbox and tests
// that run without cert-manager. A configuration that does not exist is an error.
func InjectCABundle(ctx context.Context, c client.Client, caPEM []byte, validating, mutating []string) error {
	for _, name := range validating {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var cfg admissionregistrationv1.ValidatingWebhookConfiguration
			if err := c.Get(ctx, types.NamespacedName{Name: name}, &cfg); err != nil {
				return err
			}
			changed := false
			for i := range cfg.Webhooks {
				if !bytes.Equal(cfg.Webhooks[i].ClientConfig.CABundle, caPEM) {
					cfg.Webhooks[i].ClientConfig.CABundle = caPEM
					changed = true
				}
			}
			if !changed {
				return nil
			}
			return c.Update(ctx, &cfg)
		})
		if err != nil {
			return fmt.Errorf("inject ca bundle into validating webhook configuration %s: %w", name, err)
		}
	}
	for _, name := range mutating {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var cfg admissionregistrationv1.MutatingWebhookConfiguration
			if err := c.Get(ctx, types.NamespacedName{Name: name}, &cfg); err != nil {
				return err
			}
			changed := false
			for i := range cfg.Webhooks {
				if !bytes.Equal(cfg.Webhooks[i].ClientConfig.CABundle, caPEM) {
					cfg.Webhooks[i].ClientConfig.CABundle = caPEM
					changed = true
				}
			}
			if !changed {
				return nil
			}
			return c.Update(ctx, &cfg)
		})
		if err != nil {
			return fmt.Errorf("inject ca bundle into mutating webhook configuration %s: %w", name, err)
		}
	}
	return nil
}
