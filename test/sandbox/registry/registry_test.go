package registry

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestRegistryRefusesAllButItsCredentials pushes an image with the registry's credentials and
// pulls it with them, anonymously and with a wrong password: only the first pull works, and
// the refusals carry the registry's reason.
func TestRegistryRefusesAllButItsCredentials(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Stop() }()
	if !strings.HasPrefix(r.Host(), "127.0.0.1:") {
		t.Fatalf("host %s is not on loopback", r.Host())
	}
	img, err := ModuleImage{WorkingDir: "/workspace", Program: "tofu", Files: map[string]string{"main.tf": "# module"}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	refStr, err := r.Push(ctx, "modules/net", "v1", img)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(refStr)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(ref, remote.WithAuth(r.Auth()), remote.WithContext(ctx))
	if err != nil {
		t.Fatalf("pull with the registry's credentials: %v", err)
	}
	want, _ := img.Digest()
	if got, err := pulled.Digest(); err != nil || got != want {
		t.Fatalf("pulled digest %s (%v), want %s", got, err, want)
	}
	for _, tc := range []struct {
		name   string
		auth   authn.Authenticator
		reason string
	}{
		{"anonymous", authn.Anonymous, "no credentials"},
		{"wrong password", authn.FromConfig(authn.AuthConfig{Username: r.Username(), Password: "wrong"}), "wrong username or password"},
		{"wrong user", authn.FromConfig(authn.AuthConfig{Username: "other", Password: r.Password()}), "wrong username or password"},
	} {
		before := r.Refused()
		_, err := remote.Image(ref, remote.WithAuth(tc.auth), remote.WithContext(ctx))
		if err == nil {
			t.Errorf("%s: the pull was allowed", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), "UNAUTHORIZED") || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s: error %q does not carry the registry's reason %q", tc.name, err, tc.reason)
		}
		if r.Refused() == before {
			t.Errorf("%s: the registry counted no refusal", tc.name)
		}
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Image(ref, remote.WithAuth(r.Auth()), remote.WithContext(ctx)); err == nil {
		t.Fatal("a stopped registry still serves")
	}
}

// TestDockerConfigJSON checks the Secret content is what kubectl create secret docker-registry
// writes: username, password and their base64 auth under the host.
func TestDockerConfigJSON(t *testing.T) {
	got := string(DockerConfigJSON("127.0.0.1:5000", "u", "p"))
	want := `{"auths":{"127.0.0.1:5000":{"username":"u","password":"p","auth":"dTpw"}}}`
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
