//go:build linux

package executor

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"

	"github.com/captf/cluster-api-provider-terraform/test/sandbox/registry"
)

// rawLayer is a layer of the given tar headers (regular files get their name as content).
func rawLayer(t *testing.T, headers ...*tar.Header) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range headers {
		data := []byte(h.Name)
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func imageOf(t *testing.T, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestUnpackAppliesWhiteoutsAndKeepsLinksInside unpacks two layers: the upper one deletes a
// file and hides a folder of the lower one; an absolute link points into the image; a hard
// link shares its file.
func TestUnpackAppliesWhiteoutsAndKeepsLinksInside(t *testing.T) {
	lower, err := registry.Layer(
		registry.File{Path: "m/main.tf", Data: []byte("main")},
		registry.File{Path: "m/old.tf", Data: []byte("old")},
		registry.File{Path: "m/d/hidden", Data: []byte("hidden")},
		registry.File{Path: "etc/conf", Data: []byte("conf")},
	)
	if err != nil {
		t.Fatal(err)
	}
	upper := rawLayer(t,
		&tar.Header{Name: "m/.wh.old.tf", Typeflag: tar.TypeReg, Mode: 0o644},
		&tar.Header{Name: "m/d/.wh..wh..opq", Typeflag: tar.TypeReg, Mode: 0o644},
		&tar.Header{Name: "m/d/new", Typeflag: tar.TypeReg, Mode: 0o644},
		&tar.Header{Name: "m/conf", Typeflag: tar.TypeSymlink, Linkname: "/etc/conf"},
		&tar.Header{Name: "m/main-link", Typeflag: tar.TypeLink, Linkname: "m/main.tf"},
	)
	root := filepath.Join(t.TempDir(), "rootfs")
	if err := unpack(imageOf(t, lower, upper), root); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"m/main.tf": "main", "m/d/new": "m/d/new", "m/conf": "conf", "m/main-link": "main"} {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil || string(b) != want {
			t.Errorf("%s: %q (%v), want %q", p, b, err, want)
		}
	}
	for _, p := range []string{"m/old.tf", "m/d/hidden", "m/.wh.old.tf", "m/d/.wh..wh..opq"} {
		if _, err := os.Lstat(filepath.Join(root, p)); !os.IsNotExist(err) {
			t.Errorf("%s exists (%v), want it gone", p, err)
		}
	}
	if target, err := os.Readlink(filepath.Join(root, "m/conf")); err != nil || !strings.HasPrefix(target, root+"/") {
		t.Errorf("absolute link points at %q (%v), want a path inside %s", target, err, root)
	}
}

// TestUnpackRefusesOtherEntries fails on a fifo with its name, instead of skipping it.
func TestUnpackRefusesOtherEntries(t *testing.T) {
	img := imageOf(t, rawLayer(t, &tar.Header{Name: "m/pipe", Typeflag: tar.TypeFifo, Mode: 0o644}))
	err := unpack(img, filepath.Join(t.TempDir(), "rootfs"))
	if !errors.Is(err, errUnsupported) || !strings.Contains(err.Error(), "m/pipe") {
		t.Fatalf("want an unsupported error naming m/pipe, got %v", err)
	}
}

func TestInRootRefusesPathsThatLeave(t *testing.T) {
	for _, p := range []string{"../x", "a/../../x", ".."} {
		if _, err := inRoot("/r", p); !errors.Is(err, errUnsupported) {
			t.Errorf("%s: %v, want refused", p, err)
		}
	}
	if p, err := inRoot("/r", "/a/./b"); err != nil || p != "/r/a/b" {
		t.Errorf("/a/./b: %s %v", p, err)
	}
}

// TestDockerCredentialsMatchTheRegistry reads the credentials of the image's registry only,
// from both Secret types, preferring the auth field.
func TestDockerCredentialsMatchTheRegistry(t *testing.T) {
	js := &corev1.Secret{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{".dockerconfigjson": []byte(
		`{"auths":{"https://127.0.0.1:5000/v1/":{"auth":"dTpw"},"registry.example.com":{"username":"x","password":"y"}}}`)}}
	got := dockerCredentials(js, "127.0.0.1:5000")
	if len(got) != 1 || got[0].Username != "u" || got[0].Password != "p" {
		t.Fatalf("dockerconfigjson: %+v", got)
	}
	cfg := &corev1.Secret{Type: corev1.SecretTypeDockercfg, Data: map[string][]byte{".dockercfg": []byte(`{"127.0.0.1:5000":{"username":"a","password":"b"}}`)}}
	if got := dockerCredentials(cfg, "127.0.0.1:5000"); len(got) != 1 || got[0].Username != "a" {
		t.Fatalf("dockercfg: %+v", got)
	}
	opaque := &corev1.Secret{Type: corev1.SecretTypeOpaque, Data: js.Data}
	if got := dockerCredentials(opaque, "127.0.0.1:5000"); len(got) != 0 {
		t.Fatalf("an Opaque secret holds no pull credentials, got %+v", got)
	}
}
