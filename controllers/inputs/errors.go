package inputs

import (
	"errors"
	"fmt"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// InputsError is a problem with an object's inputs that its owner must fix. The engine reports
// it as InputsValid=False with Reason and Message; it is not retried until something changes.
type InputsError struct {
	// Reason is one of infrav1.InputsSourceMissingReason, VariablesSourceNotOptedInReason,
	// InvalidInputsReason, InputsTooLargeReason.
	Reason string
	// Message says what is wrong and where; it never contains a variable's value.
	Message string
}

func (e *InputsError) Error() string {
	return e.Message
}

// AsInputsError returns the *InputsError in err's chain, if any.
func AsInputsError(err error) (*InputsError, bool) {
	var ie *InputsError
	if errors.As(err, &ie) {
		return ie, true
	}
	return nil, false
}

func invalidf(format string, args ...any) *InputsError {
	return &InputsError{Reason: infrav1.InvalidInputsReason, Message: fmt.Sprintf(format, args...)}
}
