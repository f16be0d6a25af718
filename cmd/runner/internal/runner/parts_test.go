package runner

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

func TestSelectBinary(t *testing.T) {
	both, tofuOnly, tfOnly, none := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	exe := func(dir, name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	exe(both, "tofu")
	exe(both, "terraform")
	exe(tofuOnly, "tofu")
	exe(tfOnly, "terraform")
	custom := exe(t.TempDir(), "my-terraform")
	if err := os.WriteFile(filepath.Join(none, "tofu"), []byte("not executable"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, flag, env, path string
		want                  string
		missing               bool
	}{
		{"flag wins", custom, filepath.Join(both, "tofu"), both, custom, false},
		{"env next", "", custom, both, custom, false},
		{"flag name on PATH", "terraform", "", both, filepath.Join(both, "terraform"), false},
		{"tofu before terraform", "", "", both, filepath.Join(both, "tofu"), false},
		{"tofu on a later PATH entry still wins", "", "", tfOnly + ":" + tofuOnly, filepath.Join(tofuOnly, "tofu"), false},
		{"terraform alone", "", "", tfOnly, filepath.Join(tfOnly, "terraform"), false},
		{"non-executable is not a binary", "", "", none, "", true},
		{"missing flag path", filepath.Join(none, "nope"), "", both, "", true},
		{"flag name not on PATH", "tofu", "", tfOnly, "", true},
		{"empty PATH", "", "", "", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SelectBinary(tc.flag, tc.env, tc.path)
			if tc.missing {
				if !errors.Is(err, errBinaryMissing) {
					t.Fatalf("got %q, %v; want errBinaryMissing", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestDetectBackendMode(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	cases := []struct {
		name string
		env  map[string]string
		want BackendMode
	}{
		{"none: in-cluster", nil, BackendMode{InCluster: true}},
		{"KUBE_CONFIG_PATH", map[string]string{"KUBE_CONFIG_PATH": "/a"}, BackendMode{ConfigPaths: []string{"/a"}}},
		{"KUBE_CONFIG_PATH wins", map[string]string{"KUBE_CONFIG_PATH": "/a", "KUBECONFIG": "/b"}, BackendMode{ConfigPaths: []string{"/a"}}},
		{"KUBECONFIG list", map[string]string{"KUBECONFIG": "/b:/c"}, BackendMode{ConfigPaths: []string{"/b", "/c"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := DetectBackendMode(env(tc.env))
			if got.InCluster != tc.want.InCluster || !slices.Equal(got.ConfigPaths, tc.want.ConfigPaths) {
				t.Fatalf("got %+v want %+v", got, tc.want)
			}
		})
	}
}

func TestBackendOverridePinsEnvironmentDefaults(t *testing.T) {
	for _, mode := range []BackendMode{{InCluster: true}, {ConfigPaths: []string{"/a", "/b"}}} {
		b, err := BackendOverride(backendFor("ns"), mode)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		// Each of these would otherwise default from KUBE_HOST, KUBE_TOKEN, ... and move the
		// state to whatever cluster the module's kubernetes provider is pointed at.
		for _, pinned := range []string{`"host": ""`, `"token": ""`, `"username": ""`, `"password": ""`, `"insecure": false`,
			`"client_certificate": ""`, `"client_key": ""`, `"cluster_ca_certificate": ""`, `"namespace": "ns"`} {
			if !strings.Contains(s, pinned) {
				t.Errorf("%+v: override lacks %s:\n%s", mode, pinned, s)
			}
		}
		if !mode.InCluster {
			for _, pinned := range []string{`"config_context": ""`, `"config_paths": [`, `"in_cluster_config": false`} {
				if !strings.Contains(s, pinned) {
					t.Errorf("override lacks %s:\n%s", pinned, s)
				}
			}
		}
	}
}

func TestCopyModuleResolvesConfigMapSymlinks(t *testing.T) {
	// The layout the kubelet gives a ConfigMap volume: the keys are symlinks through ..data
	// into a timestamped folder.
	src := t.TempDir()
	ts := filepath.Join(src, "..2026_01_02_03_04_05.000000001")
	if err := os.Mkdir(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"main.tf": `resource "terraform_data" "x" {}`, "variables.tf": `variable "name" {}`, ".terraform.lock.hcl": "# lock"}
	for name, content := range files {
		write(t, filepath.Join(ts, name), content)
	}
	must(t, os.Symlink(filepath.Base(ts), filepath.Join(src, "..data")))
	for name := range files {
		must(t, os.Symlink(filepath.Join("..data", name), filepath.Join(src, name)))
	}
	// An image module may also link folders.
	shared := t.TempDir()
	write(t, filepath.Join(shared, "net.tf"), "# shared")
	must(t, os.Symlink(shared, filepath.Join(src, "modules")))

	dst := filepath.Join(t.TempDir(), "module")
	write(t, filepath.Join(filepath.Dir(dst), "stale"), "") // beside, untouched
	must(t, os.MkdirAll(dst, 0o755))
	write(t, filepath.Join(dst, "old.tf"), "# from an earlier run")
	if err := CopyModule(src, dst); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dst)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{".terraform.lock.hcl", "main.tf", "modules", "variables.tf"}; !slices.Equal(names, want) {
		t.Fatalf("copied %v, want %v", names, want)
	}
	for name, content := range files {
		p := filepath.Join(dst, name)
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("%s is not a regular file: %v %v", name, fi, err)
		}
		if b, _ := os.ReadFile(p); string(b) != content {
			t.Fatalf("%s = %q", name, b)
		}
	}
	if fi, err := os.Lstat(filepath.Join(dst, "modules")); err != nil || !fi.IsDir() {
		t.Fatalf("modules is not a folder: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "modules", "net.tf")); string(b) != "# shared" {
		t.Fatalf("linked folder not copied")
	}
}

func TestCopyModuleRejectsBrokenLinks(t *testing.T) {
	t.Run("dangling", func(t *testing.T) {
		src := t.TempDir()
		must(t, os.Symlink("nowhere.tf", filepath.Join(src, "main.tf")))
		var bad badInputError
		if err := CopyModule(src, filepath.Join(t.TempDir(), "m")); !errors.As(err, &bad) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("loop", func(t *testing.T) {
		src := t.TempDir()
		must(t, os.Mkdir(filepath.Join(src, "sub"), 0o755))
		must(t, os.Symlink(src, filepath.Join(src, "sub", "back")))
		var bad badInputError
		if err := CopyModule(src, filepath.Join(t.TempDir(), "m")); !errors.As(err, &bad) || !strings.Contains(err.Error(), "links back") {
			t.Fatalf("err %v", err)
		}
	})
}

func TestRedactor(t *testing.T) {
	r := NewRedactor([]string{"supersecret", "super", "abc", "", "line-one\nline-two"})
	cases := map[string]string{
		"value supersecret here":                             "value " + Mask + " here",
		"just super":                                         "just " + Mask,
		"abc stays (too short to mask)":                      "abc stays (too short to mask)",
		"line-two alone":                                     Mask + " alone",
		"token: ghp_" + strings.Repeat("a", 36):              "token: " + Mask,
		"key AKIAABCDEFGHIJKLMNOP":                           "key " + Mask,
		`"client_secret": "xyz12345"`:                        `"client_secret": "` + Mask + `"`,
		"password = (sensitive value)":                       "password = (sensitive value)",
		"jwt eyJhbGciOiJSUzI1.eyJpc3MiOiJr.c2lnbmF0dXJlMTIz": "jwt " + Mask,
	}
	for in, want := range cases {
		if got := r.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLineFilterDropsPEMBodies(t *testing.T) {
	var out lockedBuffer
	tail := newTailBuffer(3)
	f := newLineFilter(NewRedactor(nil), &out, tail)
	for _, chunk := range []string{"before\n-----BEGIN EC PRIV", "ATE KEY-----\nAAAAkeymaterial\nBBBB\n-----END EC PRIVATE KEY----- after\nlast line"} {
		_, _ = f.Write([]byte(chunk))
	}
	f.Flush()
	got := out.String()
	if strings.Contains(got, "keymaterial") || strings.Contains(got, "BBBB") {
		t.Fatalf("key body leaked:\n%s", got)
	}
	if want := "before\n" + Mask + "\n" + Mask + " after\nlast line"; got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	if tail.String() != Mask+"\n"+Mask+" after\nlast line" {
		t.Fatalf("tail %q", tail.String())
	}
}

func backendFor(ns string) runnerapi.Backend {
	return runnerapi.Backend{Namespace: ns, SecretSuffix: testSuffix}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestCABundleOfferedOnlyToImagesWithout(t *testing.T) {
	offered := filepath.Join(t.TempDir(), CABundleName)
	write(t, offered, "certs")
	system := filepath.Join(t.TempDir(), "ca.crt")
	saved := systemCABundles
	t.Cleanup(func() { systemCABundles = saved })
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

	systemCABundles = []string{filepath.Join(t.TempDir(), "absent.crt")}
	if got := caBundleFor(env(nil), offered); got != offered {
		t.Fatalf("image without CAs: got %q", got)
	}
	if got := caBundleFor(env(map[string]string{"SSL_CERT_FILE": "/mine"}), offered); got != "" {
		t.Fatalf("SSL_CERT_FILE set: got %q", got)
	}
	if got := caBundleFor(env(nil), filepath.Join(t.TempDir(), "missing")); got != "" {
		t.Fatalf("nothing installed: got %q", got)
	}
	write(t, system, "system")
	systemCABundles = []string{system}
	if got := caBundleFor(env(nil), offered); got != "" {
		t.Fatalf("image with CAs: got %q", got)
	}

	// install copies the bundle of the image it runs in beside the runner.
	dest := filepath.Join(t.TempDir(), "runner")
	if err := Install(dest); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(dest), CABundleName)); err != nil || string(b) != "system" {
		t.Fatalf("bundle not installed: %q %v", b, err)
	}
}
