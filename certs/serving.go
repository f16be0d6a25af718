package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Default intervals of Serving.
const (
	// DefaultPollInterval is how often the files are re-read besides the file-change events
	// (a backstop for file systems whose events do not reach the pod). It keeps a rotation
	// served within 10 s even when no event arrives.
	DefaultPollInterval = 5 * time.Second
	// DefaultWaitInterval is how often Serving looks for the files before the first load.
	DefaultWaitInterval = time.Second
)

// ErrNotLoaded is returned by GetCertificate before the first certificate is loaded.
var ErrNotLoaded = errors.New("serving certificate not loaded yet")

// ServingOptions locate the certificate files.
type ServingOptions struct {
	// Dir holds the certificate and key (the mounted cert-manager Secret).
	Dir string
	// CertName and KeyName are the file names (default tls.crt and tls.key).
	CertName, KeyName string
	// PollInterval is how often the files are re-read besides file events (DefaultPollInterval).
	PollInterval time.Duration
	// WaitInterval is how often Start looks for the files until they load (DefaultWaitInterval).
	WaitInterval time.Duration
}

// Serving provides the webhook server's certificate from files that may not exist yet and
// may be replaced at any time. It is a manager Runnable: Start waits for the files, then runs
// certwatcher until the context ends. Give GetCertificate to the TLS config (ConfigureTLS).
type Serving struct {
	opts ServingOptions

	mu      sync.RWMutex
	watcher *certwatcher.CertWatcher
	loaded  chan struct{}
}

// NewServing returns a Serving for the files in o.Dir.
func NewServing(o ServingOptions) *Serving {
	if o.CertName == "" {
		o.CertName = CertName
	}
	if o.KeyName == "" {
		o.KeyName = KeyName
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.WaitInterval <= 0 {
		o.WaitInterval = DefaultWaitInterval
	}
	return &Serving{opts: o, loaded: make(chan struct{})}
}

func (s *Serving) certPath() string { return filepath.Join(s.opts.Dir, s.opts.CertName) }
func (s *Serving) keyPath() string  { return filepath.Join(s.opts.Dir, s.opts.KeyName) }

// Start waits until the certificate and key load, then watches them until ctx ends. Missing
// or mismatched files are not an error: cert-manager may not have issued the certificate yet.
func (s *Serving) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("webhook-certificate").WithValues("dir", s.opts.Dir)
	var w *certwatcher.CertWatcher
	var lastErr error
	waited := false
	err := wait.PollUntilContextCancel(ctx, s.opts.WaitInterval, true, func(context.Context) (bool, error) {
		var err error
		w, err = certwatcher.New(s.certPath(), s.keyPath())
		if err != nil {
			if !waited || err.Error() != errString(lastErr) {
				log.Info("waiting for the serving certificate", "reason", err.Error())
			}
			waited, lastErr = true, err
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		// The context ended before a certificate appeared: a normal shutdown.
		return nil
	}
	w = w.WithWatchInterval(s.opts.PollInterval)
	w.RegisterCallback(func(c tls.Certificate) { logLoaded(log, c) })
	s.mu.Lock()
	s.watcher = w
	close(s.loaded)
	s.mu.Unlock()
	if err := w.Start(ctx); err != nil {
		return fmt.Errorf("watch serving certificate: %w", err)
	}
	return nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func logLoaded(log logr.Logger, c tls.Certificate) {
	leaf := c.Leaf
	if leaf == nil && len(c.Certificate) > 0 {
		leaf, _ = x509.ParseCertificate(c.Certificate[0])
	}
	if leaf == nil {
		log.Info("serving certificate loaded")
		return
	}
	log.Info("serving certificate loaded", "serial", leaf.SerialNumber.String(),
		"dnsNames", leaf.DNSNames, "notAfter", leaf.NotAfter.UTC().Format(time.RFC3339))
}

// NeedLeaderElection is false: every replica serves webhooks.
func (s *Serving) NeedLeaderElection() bool { return false }

// Loaded reports whether a certificate has been loaded.
func (s *Serving) Loaded() bool {
	select {
	case <-s.loaded:
		return true
	default:
		return false
	}
}

// WaitLoaded blocks until a certificate is loaded or ctx ends.
func (s *Serving) WaitLoaded(ctx context.Context) error {
	select {
	case <-s.loaded:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for serving certificate in %s: %w", s.opts.Dir, ctx.Err())
	}
}

// GetCertificate returns the current certificate, or ErrNotLoaded (the handshake fails).
func (s *Serving) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.RLock()
	w := s.watcher
	s.mu.RUnlock()
	if w == nil {
		return nil, ErrNotLoaded
	}
	return w.GetCertificate(hello)
}

// ConfigureTLS makes a TLS config serve this certificate (a webhook.Options TLSOpts entry).
func (s *Serving) ConfigureTLS(c *tls.Config) { c.GetCertificate = s.GetCertificate }

// Checker is the readiness check of the webhook server: it fails until a certificate is loaded,
// then it is the server's own check (started, answering TLS).
func (s *Serving) Checker(serverStarted healthz.Checker) healthz.Checker {
	return func(req *http.Request) error {
		if !s.Loaded() {
			return fmt.Errorf("%w from %s", ErrNotLoaded, s.opts.Dir)
		}
		return serverStarted(req)
	}
}
