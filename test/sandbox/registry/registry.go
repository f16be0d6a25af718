package registry

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcr "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Realm is the basic auth realm the registry challenges with.
const Realm = "captf-sandbox-registry"

// Registry is an OCI registry on a loopback port: go-containerregistry's in-memory registry
// behind basic auth. Every request needs the one user's credentials, pulls included.
type Registry struct {
	host     string
	username string
	password string
	srv      *http.Server
	done     chan struct{}
	// refused counts the requests refused for missing or wrong credentials.
	refused atomic.Int64
}

// Start starts a registry on 127.0.0.1 with a random port and generated credentials; it stops
// when ctx ends or Stop is called.
func Start(ctx context.Context) (*Registry, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the registry: %w", err)
	}
	pw := make([]byte, 16)
	_, _ = rand.Read(pw)
	r := &Registry{host: ln.Addr().String(), username: "captf", password: hex.EncodeToString(pw), done: make(chan struct{})}
	r.srv = &http.Server{
		Handler:           r.withBasicAuth(ggcr.New(ggcr.Logger(log.New(io.Discard, "", 0)))),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		defer close(r.done)
		_ = r.srv.Serve(ln)
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = r.Stop()
		case <-r.done:
		}
	}()
	return r, nil
}

// Stop closes the listener and every connection, and waits until the server returned.
func (r *Registry) Stop() error {
	err := r.srv.Close()
	<-r.done
	if err != nil {
		return fmt.Errorf("stop the registry: %w", err)
	}
	return nil
}

// Host is the registry's host:port, the first part of an image reference.
func (r *Registry) Host() string { return r.host }

// Username and Password are the credentials the registry accepts.
func (r *Registry) Username() string { return r.username }

// Password is the password of Username.
func (r *Registry) Password() string { return r.password }

// Refused is how many requests the registry refused for missing or wrong credentials.
func (r *Registry) Refused() int64 { return r.refused.Load() }

// Auth is the registry's credentials for go-containerregistry's clients.
func (r *Registry) Auth() authn.Authenticator {
	return authn.FromConfig(authn.AuthConfig{Username: r.username, Password: r.password})
}

// Reference is the reference of repo:tag in this registry.
func (r *Registry) Reference(repo, tag string) string { return r.host + "/" + repo + ":" + tag }

// Push uploads img as repo:tag with the registry's credentials and returns its reference by
// tag.
func (r *Registry) Push(ctx context.Context, repo, tag string, img v1.Image) (string, error) {
	ref, err := name.ParseReference(r.Reference(repo, tag))
	if err != nil {
		return "", fmt.Errorf("parse reference: %w", err)
	}
	if err := remote.Write(ref, img, remote.WithAuth(r.Auth()), remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	return ref.String(), nil
}

// DockerConfigJSON is the content of a kubernetes.io/dockerconfigjson Secret's .dockerconfigjson
// key holding username and password for host, as kubectl create secret docker-registry writes
// it.
func DockerConfigJSON(host, username, password string) []byte {
	type entry struct {
		Username string `json:"username"`
		Password string `json:"password"`
		Auth     string `json:"auth"`
	}
	b, _ := json.Marshal(map[string]map[string]entry{"auths": {host: {
		Username: username, Password: password,
		Auth: base64.StdEncoding.EncodeToString([]byte(username + ":" + password)),
	}}})
	return b
}

// DockerConfigJSON is a .dockerconfigjson holding the registry's own credentials.
func (r *Registry) DockerConfigJSON() []byte { return DockerConfigJSON(r.host, r.username, r.password) }

// withBasicAuth refuses every request without the registry's credentials, the way a
// registry with basic auth answers: 401, a Basic challenge, and an OCI error body whose message
// says what was wrong.
func (r *Registry) withBasicAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		user, pass, ok := req.BasicAuth()
		if ok && subtle.ConstantTimeCompare([]byte(user), []byte(r.username)) == 1 &&
			subtle.ConstantTimeCompare([]byte(pass), []byte(r.password)) == 1 {
			next.ServeHTTP(w, req)
			return
		}
		r.refused.Add(1)
		msg := "authentication required: no credentials for the sandbox registry"
		if ok {
			msg = fmt.Sprintf("authentication failed: wrong username or password for user %q", user)
		}
		w.Header().Set("WWW-Authenticate", fmt.Sprintf("Basic realm=%q", Realm))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": "UNAUTHORIZED", "message": msg}}})
	})
}
