package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// Inputs is what the runner reads from the per-run Secret.
type Inputs struct {
	// VarFile is the path of the variables file, passed to terraform as -var-file.
	VarFile string
	// Backend says where the state lives.
	Backend runnerapi.Backend
	// Redact lists the values to mask.
	Redact []string
	// RestoreFile is the state file a restore pushes (restore only).
	RestoreFile string
	// Restore is the parsed header of RestoreFile.
	Restore stateHeader
}

// badInputError marks an error caused by the inputs, flags or module: exit ExitBadInput.
type badInputError struct{ err error }

func (e badInputError) Error() string { return e.err.Error() }
func (e badInputError) Unwrap() error { return e.err }

func badInput(format string, args ...any) error {
	return badInputError{fmt.Errorf(format, args...)}
}

var (
	dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	// The suffix ends a Secret name (runnerapi.StateSecretName) and a Lease name.
	secretSuffix = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
)

// readRedact reads redact.json. It is read first, so every later error can be masked.
func readRedact(dir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, runnerapi.KeyRedact))
	if err != nil {
		return nil, badInput("read %s: %w", runnerapi.KeyRedact, err)
	}
	var values []string
	if err := json.Unmarshal(b, &values); err != nil {
		// The content may be secret: never quote it.
		return nil, badInput("%s is not a JSON array of strings", runnerapi.KeyRedact)
	}
	return values, nil
}

// readInputs reads and checks the rest of the inputs for an operation.
func readInputs(dir, op string, redact []string) (Inputs, error) {
	in := Inputs{Redact: redact, VarFile: filepath.Join(dir, runnerapi.KeyVariables)}

	b, err := os.ReadFile(filepath.Join(dir, runnerapi.KeyBackend))
	if err != nil {
		return in, badInput("read %s: %w", runnerapi.KeyBackend, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in.Backend); err != nil {
		return in, badInput("parse %s: %w", runnerapi.KeyBackend, err)
	}
	if !dns1123Label.MatchString(in.Backend.Namespace) || len(in.Backend.Namespace) > 63 {
		return in, badInput("%s: namespace %q is not a namespace name", runnerapi.KeyBackend, in.Backend.Namespace)
	}
	if !secretSuffix.MatchString(in.Backend.SecretSuffix) || len(in.Backend.SecretSuffix) > 200 {
		return in, badInput("%s: secret_suffix %q cannot end a Secret name", runnerapi.KeyBackend, in.Backend.SecretSuffix)
	}

	vb, err := os.ReadFile(in.VarFile)
	if err != nil {
		return in, badInput("read %s: %w", runnerapi.KeyVariables, err)
	}
	var vars map[string]json.RawMessage
	if err := json.Unmarshal(vb, &vars); err != nil || vars == nil {
		return in, badInput("%s is not a JSON object", runnerapi.KeyVariables)
	}

	if op == runnerapi.OperationRestore {
		in.RestoreFile = filepath.Join(dir, runnerapi.KeyRestoreState)
		sb, err := os.ReadFile(in.RestoreFile)
		if err != nil {
			return in, badInput("read %s: %w", runnerapi.KeyRestoreState, err)
		}
		h, err := parseStateHeader(sb)
		if err != nil {
			return in, badInput("%s: %w", runnerapi.KeyRestoreState, err)
		}
		if h.Lineage == "" {
			return in, badInput("%s: the state has no lineage", runnerapi.KeyRestoreState)
		}
		in.Restore = h
	}
	return in, nil
}
