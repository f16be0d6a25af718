package setup

import (
	"crypto/tls"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/captf/cluster-api-provider-terraform/certs"
)

// webhookServer builds the webhook server over the certificate files of o.WebhookCertDir, which
// may appear after the manager started and may be replaced while it runs (certs.Serving).
func webhookServer(o Options) (webhook.Server, *certs.Serving) {
	serving := certs.NewServing(certs.ServingOptions{Dir: o.WebhookCertDir, PollInterval: o.WebhookCertPollInterval})
	return webhook.NewServer(webhook.Options{
		Port:    o.WebhookPort,
		CertDir: o.WebhookCertDir,
		TLSOpts: []func(*tls.Config){serving.ConfigureTLS},
	}), serving
}

// addServingCertificate runs the certificate loader and makes /readyz fail until a certificate
// is loaded and the manager's webhook server (started by asking for it) answers TLS.
func addServingCertificate(mgr manager.Manager, serving *certs.Serving) error {
	if serving == nil {
		return nil
	}
	if err := mgr.Add(serving); err != nil {
		return fmt.Errorf("add webhook certificate loader: %w", err)
	}
	if err := mgr.AddReadyzCheck("webhook", serving.Checker(mgr.GetWebhookServer().StartedChecker())); err != nil {
		return fmt.Errorf("add webhook readiness check: %w", err)
	}
	return nil
}
