package state

import (
	"errors"
	"fmt"
)

// ErrNoState means the object has no Terraform state: its state Secret does not exist, or holds
// no data (the backend reads that as no state too). Test with errors.Is.
var ErrNoState = errors.New("no terraform state")

// Reasons of a StateError.
const (
	// ReasonStateCorrupt: the tfstate key is not gzip, or not state JSON.
	ReasonStateCorrupt = "StateCorrupt"
	// ReasonStateLayoutUnknown: the Secret's keys are not the single tfstate key this package
	// knows (for example a chunked state of a newer backend).
	ReasonStateLayoutUnknown = "StateLayoutUnknown"
	// ReasonStateEncrypted: the state is encrypted (OpenTofu state encryption); outputs cannot be
	// read without the key.
	ReasonStateEncrypted = "StateEncrypted"
	// ReasonStateTooLarge: the uncompressed state exceeds MaxStateBytes.
	ReasonStateTooLarge = "StateTooLarge"
	// ReasonStateVersionUnsupported: the state's format version is not 4.
	ReasonStateVersionUnsupported = "StateVersionUnsupported"
)

// StateError says why a state Secret that exists cannot be read. It is never a reason to treat
// the state as empty.
type StateError struct {
	// Secret is namespace/name of the state Secret, when known.
	Secret string
	// Reason is one of the Reason* constants.
	Reason string
	// Message says what is wrong; it never contains state content.
	Message string
	// Err is the underlying error, if any.
	Err error
}

func (e *StateError) Error() string {
	msg := e.Message
	if e.Secret != "" {
		msg = "state secret " + e.Secret + ": " + msg
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *StateError) Unwrap() error { return e.Err }

// OutputError says a module output does not fit the contract. The engine reports it as
// OutputsValid=False with Reason and Message.
type OutputError struct {
	// Reason is infrav1.OutputMissingReason or infrav1.OutputInvalidReason.
	Reason string
	// Output is the name of the output at fault.
	Output string
	// Message names the output and says what was expected; it contains no sensitive value.
	Message string
}

func (e *OutputError) Error() string { return e.Message }

// AsOutputError returns the *OutputError in err's chain, if any.
func AsOutputError(err error) (*OutputError, bool) {
	return errors.AsType[*OutputError](err)
}

// AsStateError returns the *StateError in err's chain, if any.
func AsStateError(err error) (*StateError, bool) {
	return errors.AsType[*StateError](err)
}

func stateErr(secret, reason string, err error, format string, args ...any) *StateError {
	return &StateError{Secret: secret, Reason: reason, Message: fmt.Sprintf(format, args...), Err: err}
}
