package certs_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/captf/cluster-api-provider-terraform/certs"
)

// freePort returns a port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startWebhookServer runs controller-runtime's webhook server with s's certificate and one
// handler at /ok, as the manager runs it. It stops when the test ends.
func startWebhookServer(t *testing.T, s *certs.Serving) (webhook.Server, string) {
	t.Helper()
	port := freePort(t)
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, TLSOpts: []func(*tls.Config){s.ConfigureTLS}})
	srv.Register("/ok", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ok"))
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook server: %v", err)
		}
	})
	// Wait until it answers TLS (the manager's readiness check does the same).
	started := srv.StartedChecker()
	for deadline := time.Now().Add(10 * time.Second); started(nil) != nil; {
		if time.Now().After(deadline) {
			t.Fatalf("webhook server did not start: %v", started(nil))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return srv, "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/ok"
}

// startServing runs s until the test ends.
func startServing(t *testing.T, s *certs.Serving) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serving: %v", err)
		}
	})
}

// trusting returns an HTTP client that trusts only ca, like the API server with a caBundle.
func trusting(ca *certs.CA, keepAlive bool) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"},
		DisableKeepAlives: !keepAlive,
	}}
}

func waitLoaded(t *testing.T, s *certs.Serving) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
}
