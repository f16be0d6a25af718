package tfregistry

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Module is one module version the registry serves: its address parts and its files.
type Module struct {
	Namespace, Name, Provider, Version string
	// Files are the module's files by name (main.tf, ...).
	Files map[string]string
}

func (m Module) key() string { return m.Namespace + "/" + m.Name + "/" + m.Provider }

// Source is the module's registry address on host, for a module block's source.
func (m Module) Source(host string) string { return host + "/" + m.key() }

// Server is a running registry. Close stops it.
type Server struct {
	// Host is the registry's host with its port (127.0.0.1:PORT), as module sources
	// and credentials name it. Not localhost: Terraform and OpenTofu refuse a registry host
	// without a dot.
	Host string
	// URL is https://Host.
	URL string
	// CAFile is the PEM file of the CA that signed the server's certificate.
	CAFile string

	token    string
	nonce    string
	srv      *http.Server
	ln       net.Listener
	done     chan struct{}
	modules  map[string][]Module
	archives map[string][]byte
	mirror   map[string][]byte

	mu  sync.Mutex
	log []string
}

// Start serves modules on a loopback port with TLS, requiring token as a bearer token on every
// registry request (discovery aside). dir receives the CA file.
func Start(dir, token string, modules ...Module) (*Server, error) {
	ca, err := newTestCA()
	if err != nil {
		return nil, err
	}
	caFile := filepath.Join(dir, "registry-ca.pem")
	if err := os.WriteFile(caFile, ca.caPEM, 0o600); err != nil {
		return nil, fmt.Errorf("write ca file: %w", err)
	}
	nonce := make([]byte, 12)
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("nonce: %w", err)
	}
	s := &Server{CAFile: caFile, token: token, nonce: hex.EncodeToString(nonce), done: make(chan struct{}),
		modules: map[string][]Module{}, archives: map[string][]byte{}, mirror: map[string][]byte{}}
	for _, m := range modules {
		archive, err := tarGz(m.Files)
		if err != nil {
			return nil, err
		}
		s.modules[m.key()] = append(s.modules[m.key()], m)
		s.archives[s.archivePath(m)] = archive
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s.ln = ln
	s.Host = fmt.Sprintf("127.0.0.1:%d", ln.Addr().(*net.TCPAddr).Port)
	s.URL = "https://" + s.Host
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{ca.leaf}, MinVersion: tls.VersionTLS12}}
	go func() {
		defer close(s.done)
		_ = s.srv.ServeTLS(ln, "", "")
	}()
	return s, nil
}

// Close stops the server and waits for it.
func (s *Server) Close() {
	_ = s.srv.Close()
	<-s.done
}

// Log lists the requests served so far, one "METHOD PATH STATUS" line each.
func (s *Server) Log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

func (s *Server) archivePath(m Module) string {
	return "/archives/" + s.nonce + "/" + m.Namespace + "-" + m.Name + "-" + m.Provider + "-" + m.Version + ".tar.gz"
}

// ServeHTTP implements the discovery document, the module registry protocol's versions and
// download endpoints, the archives, and the provider network mirror's files.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	s.serve(rec, r)
	s.mu.Lock()
	s.log = append(s.log, fmt.Sprintf("%s %s %d", r.Method, r.URL.Path, rec.status))
	s.mu.Unlock()
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == "/.well-known/terraform.json":
		writeJSON(w, map[string]string{"modules.v1": "/v1/modules/"})
	case strings.HasPrefix(p, "/archives/"):
		archive, ok := s.archives[p]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/x-gzip")
		_, _ = w.Write(archive)
	case strings.HasPrefix(p, "/v1/modules/"):
		if !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, `{"errors":["missing or wrong bearer token"]}`, http.StatusUnauthorized)
			return
		}
		s.serveModules(w, r, strings.TrimPrefix(p, "/v1/modules/"))
	case strings.HasPrefix(p, "/mirror/"):
		body, ok := s.mirror[strings.TrimPrefix(p, "/mirror/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		// The protocol's JSON documents must say so; terraform refuses them otherwise.
		if strings.HasSuffix(p, ".json") {
			w.Header().Set("Content-Type", "application/json")
		} else {
			w.Header().Set("Content-Type", "application/zip")
		}
		_, _ = w.Write(body)
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) authorized(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) == 1
}

// serveModules answers <ns>/<name>/<provider>/versions and
// <ns>/<name>/<provider>/<version>/download.
func (s *Server) serveModules(w http.ResponseWriter, r *http.Request, rest string) {
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 4 && parts[3] == "versions":
		mods := s.modules[strings.Join(parts[:3], "/")]
		if len(mods) == 0 {
			http.NotFound(w, r)
			return
		}
		versions := []map[string]string{}
		for _, m := range mods {
			versions = append(versions, map[string]string{"version": m.Version})
		}
		writeJSON(w, map[string]any{"modules": []any{map[string]any{"versions": versions}}})
	case len(parts) == 5 && parts[4] == "download":
		for _, m := range s.modules[strings.Join(parts[:3], "/")] {
			if m.Version == parts[3] {
				w.Header().Set("X-Terraform-Get", s.URL+s.archivePath(m))
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		http.NotFound(w, r)
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// tarGz packs files into a gzipped tar archive, in name order.
func tarGz(files map[string]string) ([]byte, error) {
	if len(files) == 0 {
		return nil, errors.New("a module needs at least one file")
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		body := []byte(files[n])
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			return nil, fmt.Errorf("tar %s: %w", n, err)
		}
		if _, err := tw.Write(body); err != nil {
			return nil, fmt.Errorf("tar %s: %w", n, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	if err := gz.Close(); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return buf.Bytes(), nil
}
