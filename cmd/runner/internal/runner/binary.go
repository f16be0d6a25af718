package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// errBinaryMissing: no terraform or tofu binary: exit ExitBinaryMissing.
var errBinaryMissing = errors.New("no terraform or tofu binary")

// SelectBinary picks the terraform/tofu binary: the --binary flag, else $CAPTF_TF_BINARY, else
// tofu on PATH, else terraform on PATH. A name without a slash is looked up on pathEnv.
func SelectBinary(flagValue, envValue, pathEnv string) (string, error) {
	for _, explicit := range []string{flagValue, envValue} {
		if explicit == "" {
			continue
		}
		if strings.ContainsRune(explicit, os.PathSeparator) {
			if err := executable(explicit); err != nil {
				return "", fmt.Errorf("%w: %s: %w", errBinaryMissing, explicit, err)
			}
			return explicit, nil
		}
		p, err := lookPath(explicit, pathEnv)
		if err != nil {
			return "", fmt.Errorf("%w: %s not on PATH", errBinaryMissing, explicit)
		}
		return p, nil
	}
	for _, name := range []string{"tofu", "terraform"} {
		if p, err := lookPath(name, pathEnv); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: neither tofu nor terraform is on PATH (%s); set --binary or %s", errBinaryMissing, pathEnv, "CAPTF_TF_BINARY")
}

func lookPath(name, pathEnv string) (string, error) {
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%s is a directory", p)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not executable", p)
	}
	return nil
}
