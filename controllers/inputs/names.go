package inputs

import (
	"regexp"
	"sort"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// CaptfVariable is the one variable CAPTF reserves for itself: an object carrying the contract
// inputs (see ContractInputs). A module declares `variable "captf" { type = any }` to use it.
// The runner knows it too (it never reports it as a variable the module does not declare).
const CaptfVariable = runnerapi.CaptfVariable

// identifierPattern is the ASCII subset of an HCL identifier: a letter or underscore, then
// letters, digits, underscores and hyphens.
var identifierPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// terraformReservedNames are names Terraform refuses for a variable declaration, because they
// have a meaning inside a module block. A variable with such a name could never be declared, so
// passing one is always a mistake.
var terraformReservedNames = map[string]struct{}{
	"source":     {},
	"version":    {},
	"providers":  {},
	"count":      {},
	"for_each":   {},
	"depends_on": {},
	"lifecycle":  {},
	"locals":     {},
	"provider":   {},
}

// IsValidVariableName reports whether name is a valid Terraform identifier (letters, digits,
// underscores and hyphens, not starting with a digit or hyphen). It does not check reserved
// names; see IsReservedVariableName.
func IsValidVariableName(name string) bool {
	return identifierPattern.MatchString(name)
}

// IsReservedVariableName reports whether a user may not set a variable of this name: CAPTF's own
// "captf", or a name Terraform refuses for a variable declaration.
func IsReservedVariableName(name string) bool {
	if name == CaptfVariable {
		return true
	}
	_, ok := terraformReservedNames[name]
	return ok
}

// ReservedVariableNames lists the names IsReservedVariableName refuses, CaptfVariable first.
func ReservedVariableNames() []string {
	names := make([]string, 0, len(terraformReservedNames))
	for n := range terraformReservedNames {
		names = append(names, n)
	}
	sort.Strings(names)
	return append([]string{CaptfVariable}, names...)
}

// ValidateVariableName returns an *InputsError with reason InvalidInputs when a user may not set
// a variable of this name; where says where the name came from, for the message.
func ValidateVariableName(name, where string) error {
	if name == CaptfVariable {
		return invalidf("%s sets the variable %q, which CAPTF reserves for the contract inputs; rename it", where, name)
	}
	if !IsValidVariableName(name) {
		return invalidf("%s sets the variable %q, which is not a valid Terraform identifier (letters, digits, '_' and '-', starting with a letter or '_')", where, name)
	}
	if IsReservedVariableName(name) {
		return invalidf("%s sets the variable %q, a name Terraform reserves and no module can declare; rename it", where, name)
	}
	return nil
}
