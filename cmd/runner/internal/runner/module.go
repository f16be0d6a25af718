package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// maxModuleDepth bounds folder nesting in a module copy (a guard against symlink mazes).
const maxModuleDepth = 32

// CopyModule copies the module in src to dst, which it first removes. It follows symlinks, so
// a ConfigMap mount (whose keys are symlinks into a "..data" folder) becomes plain files, and
// skips entries whose names start with ".." (the ConfigMap volume's own bookkeeping; no
// ConfigMap key may start with ".."). A dangling symlink or a symlink loop is an error.
func CopyModule(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return badInput("module folder: %w", err)
	}
	if !fi.IsDir() {
		return badInput("module folder %s is not a folder", src)
	}
	if err := os.RemoveAll(dst); err != nil {
		return fmt.Errorf("clear %s: %w", dst, err)
	}
	real, err := filepath.EvalSymlinks(src)
	if err != nil {
		return badInput("module folder: %w", err)
	}
	return copyDir(src, dst, []string{real})
}

func copyDir(src, dst string, chain []string) error {
	if len(chain) > maxModuleDepth {
		return badInput("module folder %s nests deeper than %d levels", src, maxModuleDepth)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dst, err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return badInput("read module folder %s: %w", src, err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "..") {
			continue
		}
		from, to := filepath.Join(src, name), filepath.Join(dst, name)
		fi, err := os.Stat(from) // follows symlinks
		if err != nil {
			return badInput("module file %s: %w", from, err)
		}
		switch {
		case fi.IsDir():
			real, err := filepath.EvalSymlinks(from)
			if err != nil {
				return badInput("module folder %s: %w", from, err)
			}
			if slices.Contains(chain, real) {
				return badInput("module folder %s links back to %s", from, real)
			}
			if err := copyDir(from, to, append(chain, real)); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			if err := copyFile(from, to, fi.Mode().Perm()|0o600); err != nil {
				return err
			}
		default:
			return badInput("module entry %s is neither a file nor a folder", from)
		}
	}
	return nil
}

func copyFile(from, to string, perm os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return badInput("open module file: %w", err)
	}
	defer func() { _ = in.Close() }()
	return writeFrom(to, perm, in)
}
