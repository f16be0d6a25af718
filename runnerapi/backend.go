package runnerapi

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The layout of Terraform's kubernetes backend as CAPTF uses it: the controller reads and
// creates these objects, the state channel writes them, and terraform itself (without a
// channel) reads and writes them too, so each side finds what the others wrote. This file is
// the one place the layout is spelled.

// Workspace is the only Terraform workspace CAPTF uses; the backend puts it in the names of
// the state Secret and the lock Lease.
const Workspace = "default"

// StateSecretName is the backend's state Secret of the object with this suffix.
func StateSecretName(suffix string) string {
	return "tfstate-" + Workspace + "-" + suffix
}

// StateLockLeaseName is the backend's lock Lease of the object with this suffix.
func StateLockLeaseName(suffix string) string {
	return "lock-" + StateSecretName(suffix)
}

// PlanSecretName is the object's plan Secret, which holds its latest saved plan (PlanFileKey
// and the keys beside it). CAPTF's own, not the backend's: the controller creates it empty
// and the state channel fills it and hands it out.
func PlanSecretName(suffix string) string {
	return "captf-plan-" + suffix
}

const (
	// StateKey is the data key of the state Secret: the state JSON, encoded by EncodeState.
	StateKey = "tfstate"
	// StateLockInfoAnnotation on the lock Lease holds the lock info JSON of the holder, whose
	// ID is the Lease's holderIdentity.
	StateLockInfoAnnotation = "app.terraform.io/lock-info"
	// StateEncodingAnnotation, set to StateEncodingGzip, is on the state Secret.
	StateEncodingAnnotation = "encoding"
	// StateEncodingGzip is the value of StateEncodingAnnotation: StateKey is gzip'd.
	StateEncodingGzip = "gzip"
	// LockPodAnnotation and LockJobAnnotation on the lock Lease name the pod and the Job whose
	// state channel holds the lock (set with the lock, removed with it). Only the state
	// channel writes them; a lock without them is never broken (I8).
	LockPodAnnotation = "captf.io/lock-pod"
	LockJobAnnotation = "captf.io/lock-job"
)

// Size limits of the state.
const (
	// MaxStateBytes bounds a state CAPTF reads, accepts or writes, uncompressed: a gzip'd
	// state that fits a Secret could otherwise expand without limit.
	MaxStateBytes = 64 << 20
	// MaxSecretDataBytes bounds the data CAPTF writes into one Secret (the state Secret's
	// gzip'd state, the plan Secret): the API server refuses a Secret over 1 MiB, and the
	// rest is headroom for its metadata. The backend splits a larger state over several
	// Secrets, which CAPTF does not read.
	MaxSecretDataBytes = 1<<20 - 4<<10
)

// StateLabels are the labels Terraform's kubernetes backend puts on the state Secret and the
// lock Lease of a suffix in the default workspace. Terraform 1.10 and later find the state
// Secret by listing with exactly these labels: a state Secret without them reads as no state.
func StateLabels(suffix string) map[string]string {
	return map[string]string{
		"tfstate":                      "true",
		"tfstateSecretSuffix":          suffix,
		"tfstateWorkspace":             Workspace,
		"app.kubernetes.io/managed-by": "terraform",
	}
}

// EncodeState encodes state JSON the way the backend stores it under StateKey (gzip).
func EncodeState(stateJSON []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(stateJSON); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return buf.Bytes(), nil
}

// DecodeState decodes the value of StateKey, refusing more than MaxStateBytes of state. Its
// errors are *DecodeError.
func DecodeState(encoded []byte) ([]byte, error) {
	return Gunzip(encoded, MaxStateBytes)
}

// DecodeError says why Gunzip (or DecodeState) refused its input.
type DecodeError struct {
	// NotGzip: the input does not start as gzip data. Damaged: the gzip stream is damaged or
	// ends early (Err is io.ErrUnexpectedEOF for a stream cut short, as the first part of a
	// chunked state is). Neither: the output exceeds Limit.
	NotGzip, Damaged bool
	// Limit is the bound the output was held to.
	Limit int
	// Err is the gzip or read error; nil for an output over Limit.
	Err error
}

func (e *DecodeError) Error() string {
	switch {
	case e.NotGzip:
		return "not gzip data: " + e.Err.Error()
	case e.Damaged:
		return "damaged gzip data: " + e.Err.Error()
	}
	return fmt.Sprintf("larger than %d bytes", e.Limit)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// TooLarge reports whether the output was refused for exceeding Limit.
func (e *DecodeError) TooLarge() bool { return !e.NotGzip && !e.Damaged }

// Gunzip decompresses gzip data, refusing more than limit bytes of output. Its errors are
// *DecodeError.
func Gunzip(compressed []byte, limit int) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(compressed))
	if err != nil {
		return nil, &DecodeError{NotGzip: true, Limit: limit, Err: err}
	}
	defer func() { _ = zr.Close() }()
	out, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, &DecodeError{Damaged: true, Limit: limit, Err: err}
	}
	if len(out) > limit {
		return nil, &DecodeError{Limit: limit}
	}
	return out, nil
}

// AsDecodeError returns the *DecodeError in err's chain, if any.
func AsDecodeError(err error) (*DecodeError, bool) {
	return errors.AsType[*DecodeError](err)
}

// Pod phases, spelled as k8s.io/api/core/v1's PodPhase values (a test keeps them equal).
const (
	PodPhaseSucceeded = "Succeeded"
	PodPhaseFailed    = "Failed"
)

// PodTerminal reports whether a pod in this phase has finished for good: its containers run
// no more and it will not start again (Succeeded or Failed). Any other phase, the empty and
// unknown ones included, may still run.
func PodTerminal(phase string) bool {
	return phase == PodPhaseSucceeded || phase == PodPhaseFailed
}

// labelValueHashLength is the length of the hash that ends a shortened label value.
const labelValueHashLength = 16

// LabelValue shortens a name to a valid label value: names of 63 characters or less stay as
// they are; longer ones keep a prefix and end in a hash of the whole name. The controller
// writes the owner-name label (JobOwnerNameLabel) with it and the state channel compares
// with it.
func LabelValue(name string) string {
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	prefix := strings.TrimRight(name[:63-labelValueHashLength-1], "-._")
	return prefix + "-" + hex.EncodeToString(sum[:])[:labelValueHashLength]
}
