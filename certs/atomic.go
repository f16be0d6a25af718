package certs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// dataLink is the symlink that names the current generation of files, as in a Secret volume.
const dataLink = "..data"

// WriteAtomic writes files into dir the way the kubelet updates a Secret volume: the new
// content goes into a fresh hidden folder, the ..data symlink is switched to it with one
// rename, and each visible name (tls.crt, ...) is a symlink through ..data. A reader therefore
// sees either all old files or all new ones. The previous generation is removed afterwards.
func WriteAtomic(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create certificate folder: %w", err)
	}
	gen, err := os.MkdirTemp(dir, "..gen-")
	if err != nil {
		return fmt.Errorf("create certificate generation: %w", err)
	}
	if err := os.Chmod(gen, 0o755); err != nil {
		return fmt.Errorf("open certificate generation: %w", err)
	}
	for name, content := range files {
		if name == "" || strings.ContainsAny(name, "/\\") || strings.HasPrefix(name, "..") {
			return fmt.Errorf("write certificate file %q: not a plain file name", name)
		}
		if err := os.WriteFile(filepath.Join(gen, name), content, 0o600); err != nil {
			return fmt.Errorf("write certificate file %s: %w", name, err)
		}
	}
	old, _ := os.Readlink(filepath.Join(dir, dataLink))
	tmp := filepath.Join(dir, dataLink+"_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(gen), tmp); err != nil {
		return fmt.Errorf("link certificate generation: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataLink)); err != nil {
		return fmt.Errorf("switch certificate generation: %w", err)
	}
	for name := range files {
		target := filepath.Join(dataLink, name)
		path := filepath.Join(dir, name)
		if cur, err := os.Readlink(path); err == nil && cur == target {
			continue
		}
		tmpLink := path + ".tmp-link"
		_ = os.Remove(tmpLink)
		if err := os.Symlink(target, tmpLink); err != nil {
			return fmt.Errorf("link certificate file %s: %w", name, err)
		}
		if err := os.Rename(tmpLink, path); err != nil {
			return fmt.Errorf("link certificate file %s: %w", name, err)
		}
	}
	// Only a generation this function created is removed, never whatever ..data pointed at.
	if strings.HasPrefix(old, "..gen-") && !strings.ContainsAny(old, "/\\") && old != filepath.Base(gen) {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			return fmt.Errorf("remove previous certificate generation: %w", err)
		}
	}
	return nil
}
