package runnerapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// MaxResultBytes bounds an encoded Result: the kubelet keeps at most 4096 bytes of a
// container's termination message.
const MaxResultBytes = 4096

// TruncatedMarker starts an error text whose beginning was cut to fit MaxResultBytes.
const TruncatedMarker = "[truncated] "

// Outcome is how a run ended, spelled as api/v1alpha1's RunOutcome values.
type Outcome string

// The outcomes of a run.
const (
	OutcomeSucceeded   Outcome = "Succeeded"
	OutcomeFailed      Outcome = "Failed"
	OutcomeInterrupted Outcome = "Interrupted"
	// OutcomeFenced: the state channel refused the lock or a state write because the object's
	// run lease names another Job; the state was not written. Never counts toward backoff.
	OutcomeFenced Outcome = "Fenced"
)

// maxLockField bounds each string of LockBroken and LockHolder, so the result stays within
// MaxResultBytes whatever a lock's holder wrote into its lock info.
const maxLockField = 256

// LockBroken reports a stale state lock the run's state channel broke (I8): its holder was a
// pod of one of the object's own Jobs that had gone or terminated.
type LockBroken struct {
	// LockID is the broken lock's ID, Who its lock info's Who.
	LockID string `json:"lockID"`
	Who    string `json:"who,omitempty"`
	// Pod and Job held the lock.
	Pod string `json:"pod"`
	Job string `json:"job"`
}

// LockHolder names the holder of a state lock the run could not take.
type LockHolder struct {
	ID        string `json:"id"`
	Who       string `json:"who,omitempty"`
	Operation string `json:"operation,omitempty"`
	// Created is when the holder took the lock, as its lock info says (RFC 3339).
	Created string `json:"created,omitempty"`
}

// Bounded returns b with each field cut to at most 256 bytes.
func (b LockBroken) Bounded() LockBroken {
	return LockBroken{LockID: cut(b.LockID), Who: cut(b.Who), Pod: cut(b.Pod), Job: cut(b.Job)}
}

// Bounded returns h with each field cut to at most 256 bytes.
func (h LockHolder) Bounded() LockHolder {
	return LockHolder{ID: cut(h.ID), Who: cut(h.Who), Operation: cut(h.Operation), Created: cut(h.Created)}
}

func cut(s string) string { return cutTo(s, maxLockField) }

// cutTo returns s cut to at most n bytes, on a rune boundary.
func cutTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	end := n
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end]
}

// Step is one terraform/tofu command the runner ran.
type Step struct {
	// Name is the step ("init", "apply", "destroy", "plan", "refresh", "show-json", "show",
	// "state-pull", "state-push").
	Name string `json:"name"`
	// ExitCode is the command's exit code (-1 when it was killed by a signal).
	ExitCode int `json:"exitCode"`
	// DurationMs is the command's wall time.
	DurationMs int64 `json:"durationMs"`
}

// Result is the runner's report, written to the termination log.
type Result struct {
	Operation string  `json:"operation"`
	Outcome   Outcome `json:"outcome"`
	// Binary is the base name of the terraform/tofu binary that ran.
	Binary string `json:"binary,omitempty"`
	Steps  []Step `json:"steps"`
	// Changes (plan and refresh): the plan has changes (for a refresh, the refreshed state
	// differs from the stored one). Changes are not a failure.
	Changes *bool `json:"changes,omitempty"`
	// Drift (drift only): the infrastructure differs from what the module describes. Drift is
	// not a failure.
	Drift *bool `json:"drift,omitempty"`
	// Summary (plan, drift and refresh, once the plan was read back): the counts and at most
	// MaxResultAddresses addresses. A plan and a drift check count the resource changes an
	// apply would make; a refresh-only plan (a Refresh, a refresh-only Plan, the drift check of
	// mode Accept) counts the resources and the root outputs (address output.<name>) that
	// changed outside terraform.
	Summary *PlanSummary `json:"summary,omitempty"`
	// Health (drift only): the module's health output as the drift check's plan evaluated it
	// (HealthOutput); nil when the module has none, or its value is unknown until an apply.
	Health *HealthSample `json:"health,omitempty"`
	// SavedPlan (plan, through the state channel): the plan stored in the plan Secret.
	SavedPlan *PlanRef `json:"savedPlan,omitempty"`
	// AppliedPlan (an apply of a saved plan): the plan terraform applied, once `apply <plan>`
	// ran and did not refuse it as stale (with outcome Failed, part of it may have been applied).
	AppliedPlan *PlanRef `json:"appliedPlan,omitempty"`
	// PlanStale (an apply of a saved plan): terraform refused the plan because the state changed
	// since the plan was made; nothing was applied. Outcome Failed, exit code ExitPlanRefused.
	PlanStale bool `json:"planStale,omitempty"`
	// PlanRefused (an apply or a refresh of a saved plan): why the plan was refused before
	// terraform ran (PlanRefusedSuperseded, PlanRefusedConsumed, PlanRefusedCorrupt,
	// PlanRefusedKind); nothing was applied.
	// Outcome Failed, exit code ExitPlanRefused.
	PlanRefused string `json:"planRefused,omitempty"`
	// LockBroken: the state channel broke a stale lock before the run took it.
	LockBroken *LockBroken `json:"lockBroken,omitempty"`
	// LockHolder (a failed run): the state lock was held by this holder, which the channel
	// does not break.
	LockHolder *LockHolder `json:"lockHolder,omitempty"`
	// UndeclaredVariables (the operations that pass the variables file): the names, sorted, of
	// the variables the file sets (spec.variables and spec.variablesFrom; never the reserved
	// CaptfVariable) that no variable block of the root module declares. Terraform ignores
	// them with a warning. Names only, never values; at most MaxUndeclaredVariables, each cut to
	// MaxVariableNameBytes. Empty when the runner could not tell (a module file that does not
	// parse, which terraform reports itself).
	UndeclaredVariables []string `json:"undeclaredVariables,omitempty"`
	// UndeclaredTruncated: the module leaves more variables undeclared than UndeclaredVariables
	// lists.
	UndeclaredTruncated bool `json:"undeclaredTruncated,omitempty"`
	// Error is the end of the failing command's stderr (or the runner's own reason), with
	// secrets masked.
	Error string `json:"error,omitempty"`
}

// CaptfVariable is the one variable CAPTF reserves for itself in the variables file
// (KeyVariables): the contract inputs. The runner never reports it as undeclared (a module
// declares it only when it uses it).
const CaptfVariable = "captf"

// Bounds of Result.UndeclaredVariables.
const (
	// MaxUndeclaredVariables bounds the names UndeclaredVariables lists.
	MaxUndeclaredVariables = 20
	// MaxVariableNameBytes bounds one name in UndeclaredVariables; a longer one is cut.
	MaxVariableNameBytes = 128
)

// boundUndeclared returns names with at most MaxUndeclaredVariables entries, each cut to
// MaxVariableNameBytes, and whether some were left out.
func boundUndeclared(names []string) ([]string, bool) {
	if len(names) == 0 {
		return nil, false
	}
	truncated := len(names) > MaxUndeclaredVariables
	out := make([]string, 0, min(len(names), MaxUndeclaredVariables))
	for _, n := range names[:min(len(names), MaxUndeclaredVariables)] {
		out = append(out, cutTo(n, MaxVariableNameBytes))
	}
	return out, truncated
}

// Encode renders r as JSON of at most MaxResultBytes. The lock fields, the health sample, the summary
// (MaxResultAddresses) and the undeclared variables (MaxUndeclaredVariables) are bounded first;
// when the document is still too long it drops the summary's addresses from the end
// (Truncated), then the undeclared variables from the end (UndeclaredTruncated), then cuts the
// beginning of r.Error, then drops steps, until it fits. The counts, the plan references and the
// outcome are never cut.
func Encode(r Result) []byte {
	var more bool
	r.UndeclaredVariables, more = boundUndeclared(r.UndeclaredVariables)
	r.UndeclaredTruncated = r.UndeclaredTruncated || more
	if r.Summary != nil {
		s := r.Summary.Bounded(MaxResultAddresses)
		r.Summary = &s
	}
	if r.LockBroken != nil {
		b := r.LockBroken.Bounded()
		r.LockBroken = &b
	}
	if r.LockHolder != nil {
		h := r.LockHolder.Bounded()
		r.LockHolder = &h
	}
	if r.Health != nil {
		h := r.Health.Bounded()
		r.Health = &h
	}
	b := marshal(r)
	if len(b) <= MaxResultBytes {
		return b
	}
	if r.Summary != nil {
		for len(r.Summary.Addresses) > 0 && len(b) > MaxResultBytes {
			r.Summary.Addresses = r.Summary.Addresses[:len(r.Summary.Addresses)-1]
			r.Summary.Truncated = true
			if len(r.Summary.Addresses) == 0 {
				r.Summary.Addresses = nil
			}
			b = marshal(r)
		}
		if len(b) <= MaxResultBytes {
			return b
		}
	}
	for len(r.UndeclaredVariables) > 0 && len(b) > MaxResultBytes {
		r.UndeclaredVariables = r.UndeclaredVariables[:len(r.UndeclaredVariables)-1]
		r.UndeclaredTruncated = true
		if len(r.UndeclaredVariables) == 0 {
			r.UndeclaredVariables = nil
		}
		b = marshal(r)
	}
	if len(b) <= MaxResultBytes {
		return b
	}
	full := r.Error
	// Find the longest tail of the error that fits; the encoded length grows with the tail.
	lo, hi := 0, len(full)
	best := -1
	for lo <= hi {
		mid := (lo + hi) / 2
		r.Error = tail(full, mid)
		if len(marshal(r)) <= MaxResultBytes {
			best = mid
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	if best >= 0 {
		r.Error = tail(full, best)
		return marshal(r)
	}
	// Even an empty error does not fit: the rest of the document is too long.
	r.Error = TruncatedMarker
	for len(r.Steps) > 0 && len(marshal(r)) > MaxResultBytes {
		r.Steps = r.Steps[1:]
	}
	return marshal(r)
}

// tail returns the last n bytes of s (moved forward to a rune boundary) behind the marker.
func tail(s string, n int) string {
	if n >= len(s) {
		return s
	}
	start := len(s) - n
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return TruncatedMarker + s[start:]
}

func marshal(r Result) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// The document is read by machines and humans, never embedded in HTML: keep <, > and & as
	// they are instead of spending six bytes on each.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		// Result holds only strings, ints and bools: encoding cannot fail.
		return []byte(`{"outcome":"Failed","error":"encode result"}`)
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// ParseResult decodes a result document (a termination message).
func ParseResult(b []byte) (Result, error) {
	var r Result
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return r, errors.New("empty result")
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return Result{}, fmt.Errorf("parse runner result: %w", err)
	}
	switch r.Outcome {
	case OutcomeSucceeded, OutcomeFailed, OutcomeInterrupted, OutcomeFenced:
	default:
		return Result{}, fmt.Errorf("parse runner result: unknown outcome %q", r.Outcome)
	}
	if !ValidOperation(r.Operation) {
		return Result{}, fmt.Errorf("parse runner result: unknown operation %q", r.Operation)
	}
	return r, nil
}
