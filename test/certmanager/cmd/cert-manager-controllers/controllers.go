package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	crapprover "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	// The issuer types the Issuer and ClusterIssuer controllers may set up (they register
	// themselves in init): SelfSigned and CA, and no other.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// controllerNames are the cert-manager controllers this program runs, by the names their
// packages register them under.
var controllerNames = []string{
	issuers.ControllerName,
	clusterissuers.ControllerName,
	trigger.ControllerName,
	keymanager.ControllerName,
	requestmanager.ControllerName,
	issuing.ControllerName,
	readiness.ControllerName,
	revisionmanager.ControllerName,
	crapprover.ControllerName,
	crselfsigned.CRControllerName,
	crca.CRControllerName,
}

// contextOptions are the options cert-manager's controller binary would take from its
// configuration file, at that file's defaults where this program has no flag.
func contextOptions(o options) controllerpkg.ContextOptions {
	return controllerpkg.ContextOptions{
		Kubeconfig:         o.kubeconfig,
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		IssuerOptions: controllerpkg.IssuerOptions{
			ClusterResourceNamespace: o.clusterResourceNamespace,
		},
		CertificateOptions: controllerpkg.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	}
}

// runControllers builds the chosen controllers over one shared context, starts their
// informers and runs them until ctx ends.
func runControllers(ctx context.Context, o options) error {
	factory, err := controllerpkg.NewContextFactory(ctx, contextOptions(o))
	if err != nil {
		return fmt.Errorf("build controller context: %w", err)
	}
	known := controllerpkg.Known()
	var running []controllerpkg.Interface
	for _, name := range controllerNames {
		construct, ok := known[name]
		if !ok {
			return fmt.Errorf("controller %s is not registered", name)
		}
		c, err := construct(factory)
		if err != nil {
			return fmt.Errorf("construct controller %s: %w", name, err)
		}
		running = append(running, c)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(running))
	var wg sync.WaitGroup
	for i, c := range running {
		wg.Go(func() {
			if err := c.Run(o.workers, ctx); err != nil {
				errs <- fmt.Errorf("controller %s: %w", controllerNames[i], err)
				cancel()
			}
		})
	}
	// The controllers registered their informers as they were built; the factories are
	// shared by every context the factory builds, so starting them once starts them all.
	shared, err := factory.Build()
	if err != nil {
		cancel()
		wg.Wait()
		return fmt.Errorf("build informer context: %w", err)
	}
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.SharedInformerFactory.Start(ctx.Done())
	shared.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}
