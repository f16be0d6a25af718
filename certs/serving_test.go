package certs_test

import (
	"errors"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/captf/cluster-api-provider-terraform/certs"
)

var hosts = []string{"127.0.0.1", "captf-webhook-service.captf-system.svc"}

func TestServingWaitsForTheCertificateAndGatesReadiness(t *testing.T) {
	dir := t.TempDir()
	s := certs.NewServing(certs.ServingOptions{Dir: dir, WaitInterval: 50 * time.Millisecond})
	startServing(t, s)
	serverUp := func(*http.Request) error { return nil }
	serverDown := func(*http.Request) error { return errors.New("not started") }

	// No files: nothing is served and readiness fails even though the server is up.
	if _, err := s.GetCertificate(nil); !errors.Is(err, certs.ErrNotLoaded) {
		t.Fatalf("GetCertificate before the files exist: got %v, want ErrNotLoaded", err)
	}
	if err := s.Checker(serverUp)(nil); !errors.Is(err, certs.ErrNotLoaded) {
		t.Fatalf("readiness before the certificate: got %v, want ErrNotLoaded", err)
	}

	ca, err := certs.SelfSigned(dir, hosts)
	if err != nil {
		t.Fatal(err)
	}
	waitLoaded(t, s)
	c, err := s.GetCertificate(nil)
	if err != nil || c == nil {
		t.Fatalf("GetCertificate after the files appeared: %v", err)
	}
	if err := s.Checker(serverUp)(nil); err != nil {
		t.Fatalf("readiness with a certificate and a started server: %v", err)
	}
	// A loaded certificate is not enough: the server must answer too.
	if err := s.Checker(serverDown)(nil); err == nil {
		t.Fatal("readiness passed although the webhook server check failed")
	}
	// The CA written beside the pair is the one that signed it.
	caFile, err := os.ReadFile(filepath.Join(dir, certs.CAName))
	if err != nil || string(caFile) != string(ca.CertPEM) {
		t.Fatalf("ca.crt does not hold the CA: %v", err)
	}
}

// servedSerial asks the server with a fresh connection and returns the serial it presents.
func servedSerial(c *http.Client, url string) (*big.Int, error) {
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(resp.Status)
	}
	return resp.TLS.PeerCertificates[0].SerialNumber, nil
}

// TestRotationIsServedWithoutARestartAndWithoutFailedRequests replaces the certificate the way
// the kubelet updates a cert-manager Secret volume while clients send requests on new and
// reused connections, trusting only the CA (as the API server does with the caBundle).
func TestRotationIsServedWithoutARestartAndWithoutFailedRequests(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA("test-ca", 0)
	if err != nil {
		t.Fatal(err)
	}
	first, err := ca.Issue(hosts, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.WriteAtomic(dir, first.Files(ca)); err != nil {
		t.Fatal(err)
	}
	s := certs.NewServing(certs.ServingOptions{Dir: dir}) // the deployed intervals
	startServing(t, s)
	waitLoaded(t, s)
	_, url := startWebhookServer(t, s)

	fresh := trusting(ca, false)
	if sn, err := servedSerial(fresh, url); err != nil || sn.Cmp(first.Serial) != 0 {
		t.Fatalf("first certificate not served: serial %v, err %v", sn, err)
	}

	var ok, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		c := trusting(ca, i%2 == 0) // half reuse connections, half handshake every time
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := servedSerial(c, url); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				} else {
					ok.Add(1)
				}
			}
		}()
	}

	// Requests flow before the rotation...
	for ok.Load() < 100 && failed.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	second, err := ca.Issue(hosts, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rotated := time.Now()
	if err := certs.WriteAtomic(dir, second.Files(ca)); err != nil {
		t.Fatal(err)
	}
	var took time.Duration
	for {
		sn, err := servedSerial(fresh, url)
		if err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, err.Error())
		} else if sn.Cmp(second.Serial) == 0 {
			took = time.Since(rotated)
			break
		}
		if time.Since(rotated) > 10*time.Second {
			close(stop)
			wg.Wait()
			t.Fatalf("the rotated certificate was not served within 10s (still serial %v)", sn)
		}
	}
	// ...and after it, then stop.
	before := ok.Load()
	for ok.Load() < before+300 {
		if failed.Load() > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d requests failed during the rotation, first: %v", n, firstErr.Load())
	}
	t.Logf("rotated certificate served %v after the write; %d requests succeeded, 0 failed", took, ok.Load())
}

func TestAHalfWrittenPairKeepsTheOldCertificate(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA("test-ca", 0)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := ca.Issue(hosts, time.Hour)
	second, _ := ca.Issue(hosts, time.Hour)
	if err := certs.WriteAtomic(dir, first.Files(ca)); err != nil {
		t.Fatal(err)
	}
	s := certs.NewServing(certs.ServingOptions{Dir: dir, PollInterval: 100 * time.Millisecond})
	startServing(t, s)
	waitLoaded(t, s)
	_, url := startWebhookServer(t, s)
	fresh := trusting(ca, false)

	// A writer that replaces the certificate but not (yet) the key, the way a non-atomic copy
	// would: the new certificate must not be served with the old key, and nothing fails.
	if err := certs.WriteAtomic(dir, map[string][]byte{certs.CertName: second.CertPEM, certs.KeyName: first.KeyPEM, certs.CAName: ca.CertPEM}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second) // ten polls
	for time.Now().Before(deadline) {
		sn, err := servedSerial(fresh, url)
		if err != nil {
			t.Fatalf("request failed with a mismatched pair on disk: %v", err)
		}
		if sn.Cmp(first.Serial) != 0 {
			t.Fatalf("served serial %v, want the old %v", sn, first.Serial)
		}
	}
	if err := certs.WriteAtomic(dir, second.Files(ca)); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); ; {
		sn, err := servedSerial(fresh, url)
		if err == nil && sn.Cmp(second.Serial) == 0 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the complete pair was not served: %v %v", sn, err)
		}
	}
}
