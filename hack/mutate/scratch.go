package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Source says what the scratch copy is made of.
type Source string

// Sources of the scratch copy.
const (
	// FromHead: the commit HEAD names (git archive).
	FromHead Source = "head"
	// FromWorktree: the tracked and untracked-but-not-ignored files of the working tree, as
	// they are now (uncommitted changes included).
	FromWorktree Source = "worktree"
)

// Scratch is a private copy of the repository that mutations are applied to.
type Scratch struct {
	// Root holds Src (the copy) and Logs; Remove deletes it.
	Root string
	Src  string
}

// scratchPattern names the scratch folders in the temporary folder.
const scratchPattern = "captf-mutate-"

// ownerFile, in a scratch folder, holds the PID of the run that made it.
const ownerFile = "owner.pid"

// NewScratch copies repo's files from src into a new folder under the temporary folder (dir,
// or os.TempDir() when empty) and links bin/'s entries (the source-built tools, git-ignored)
// into it. On error nothing is left behind.
func NewScratch(ctx context.Context, dir, repo string, src Source) (s *Scratch, err error) {
	root, err := os.MkdirTemp(dir, scratchPattern)
	if err != nil {
		return nil, fmt.Errorf("scratch folder: %w", err)
	}
	s = &Scratch{Root: root, Src: filepath.Join(root, "src")}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(root)
			s = nil
		}
	}()
	if err := os.WriteFile(filepath.Join(root, ownerFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("scratch folder: %w", err)
	}
	if err := os.Mkdir(s.Src, 0o755); err != nil {
		return nil, fmt.Errorf("scratch folder: %w", err)
	}
	switch src {
	case FromHead:
		err = extractHead(ctx, repo, s.Src)
	case FromWorktree:
		err = copyWorktree(ctx, repo, s.Src)
	default:
		err = fmt.Errorf("unknown source %q (want %s or %s)", src, FromHead, FromWorktree)
	}
	if err != nil {
		return nil, err
	}
	if err := linkBin(filepath.Join(repo, "bin"), filepath.Join(s.Src, "bin")); err != nil {
		return nil, err
	}
	return s, nil
}

// SweepStale removes the scratch folders under dir (os.TempDir() when empty) that a run killed
// without a chance to clean up (SIGKILL, a lost machine) left behind: those whose owner.pid
// names a process that no longer exists. A folder without owner.pid, or whose owner runs (or
// whose PID was reused), is left alone. It returns the folders removed.
func SweepStale(dir string) ([]string, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	roots, err := filepath.Glob(filepath.Join(dir, scratchPattern+"*"))
	if err != nil {
		return nil, fmt.Errorf("sweep %s: %w", dir, err)
	}
	var removed []string
	var errs []error
	for _, root := range roots {
		b, err := os.ReadFile(filepath.Join(root, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue
		}
		if err := os.RemoveAll(root); err != nil {
			errs = append(errs, fmt.Errorf("remove stale scratch %s: %w", root, err))
			continue
		}
		removed = append(removed, root)
	}
	return removed, errors.Join(errs...)
}

// Remove deletes the scratch copy.
func (s *Scratch) Remove() error {
	if s == nil {
		return nil
	}
	return os.RemoveAll(s.Root)
}

// extractHead writes the tree of HEAD into dst (git archive, read as a tar stream).
func extractHead(ctx context.Context, repo, dst string) error {
	cmd := exec.CommandContext(ctx, "git", "-C", repo, "archive", "--format=tar", "HEAD")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("git archive: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("git archive: %w", err)
	}
	exErr := extractTar(out, dst)
	if exErr != nil {
		_, _ = io.Copy(io.Discard, out)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("git archive HEAD: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return exErr
}

// extractTar writes the regular files, folders and symbolic links of a tar stream into dst.
func extractTar(r io.Reader, dst string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read archive: %w", err)
		}
		if !filepath.IsLocal(h.Name) {
			return fmt.Errorf("archive entry %q leaves the copy", h.Name)
		}
		p := filepath.Join(dst, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			err = writeFile(p, tr, os.FileMode(h.Mode).Perm())
		case tar.TypeSymlink:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				err = os.Symlink(h.Linkname, p)
			}
		default:
			// git archive's pax global header (the commit ID) and nothing else.
			continue
		}
		if err != nil {
			return fmt.Errorf("extract %s: %w", h.Name, err)
		}
	}
}

func writeFile(p string, r io.Reader, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm|0o200)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// copyWorktree copies the working tree's tracked and untracked-but-not-ignored files, as they
// are now, into dst. A tracked file deleted in the working tree is skipped.
func copyWorktree(ctx context.Context, repo, dst string) error {
	out, err := exec.CommandContext(ctx, "git", "-C", repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	seen := map[string]bool{}
	for _, name := range strings.Split(string(out), "\x00") {
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		if !filepath.IsLocal(name) {
			return fmt.Errorf("git ls-files: %q leaves the repository", name)
		}
		from := filepath.Join(repo, name)
		fi, err := os.Lstat(from)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("copy %s: %w", name, err)
		}
		to := filepath.Join(dst, name)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(from)
			if err == nil {
				if err = os.MkdirAll(filepath.Dir(to), 0o755); err == nil {
					err = os.Symlink(target, to)
				}
			}
			if err != nil {
				return fmt.Errorf("copy %s: %w", name, err)
			}
		case fi.Mode().IsRegular():
			if err := copyFile(from, to, fi.Mode().Perm()); err != nil {
				return fmt.Errorf("copy %s: %w", name, err)
			}
		}
	}
	return nil
}

func copyFile(from, to string, perm os.FileMode) error {
	f, err := os.Open(from)
	if err != nil {
		return err
	}
	defer f.Close()
	return writeFile(to, f, perm)
}

// linkBin makes dst a folder of symbolic links to the entries of bin (the tools the tests run
// by path), so the copy finds them while anything a test writes into bin/ stays in the copy.
// A repository without bin/ gets none.
func linkBin(bin, dst string) error {
	entries, err := os.ReadDir(bin)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", bin, err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("link bin: %w", err)
	}
	for _, e := range entries {
		if err := os.Symlink(filepath.Join(bin, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return fmt.Errorf("link bin/%s: %w", e.Name(), err)
		}
	}
	return nil
}
