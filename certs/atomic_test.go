package certs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/captf/cluster-api-provider-terraform/certs"
)

func TestWriteAtomicLaysFilesOutLikeASecretVolume(t *testing.T) {
	dir := t.TempDir()
	if err := certs.WriteAtomic(dir, map[string][]byte{"a": []byte("1"), "b": []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if err := certs.WriteAtomic(dir, map[string][]byte{"a": []byte("2"), "b": []byte("2")}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b"} {
		link, err := os.Readlink(filepath.Join(dir, n))
		if err != nil || link != filepath.Join("..data", n) {
			t.Fatalf("%s is not a symlink through ..data: %q %v", n, link, err)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, n)); string(b) != "2" {
			t.Fatalf("%s holds %q, want the second generation", n, b)
		}
	}
	entries, _ := os.ReadDir(dir)
	gens := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..gen-") {
			gens++
		}
	}
	if gens != 1 {
		t.Fatalf("%d generations left, want only the current one", gens)
	}
	for _, bad := range []string{"../x", "..data", "a/b", ""} {
		if err := certs.WriteAtomic(dir, map[string][]byte{bad: nil}); err == nil {
			t.Errorf("file name %q was accepted", bad)
		}
	}
}
