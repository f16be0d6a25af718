package runnerapi

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// Targeted operations: one resource of the state replaced, imported or forgotten by the next
// apply (docs/state.md, "Targeted operations"). The request is the annotation
// captf.io/target-operation on the object, in the form ParseTarget reads; the admission
// webhook, the controller and the runner all read it with ParseTarget, the one rule.
const (
	// TargetReplace: the next apply replaces the resource instance at Address (`-replace`),
	// even though nothing in its configuration changed.
	TargetReplace = "replace"
	// TargetImport: the next apply imports the existing object ID to Address (an `import`
	// block the runner writes beside the module), and changes nothing else of it.
	TargetImport = "import"
	// TargetForget: the next apply removes every instance of the resource at Address from the
	// state and leaves the objects standing (a `removed` block with `destroy = false` the runner
	// writes beside the module). The module must no longer declare the resource; terraform
	// refuses the plan while it does.
	TargetForget = "forget"

	// MaxTargetIDBytes bounds an import ID.
	MaxTargetIDBytes = 1024
	// TargetBlockFile is the file the runner writes into its copy of the module for an import
	// (an import block) or a forget (a removed block). A module that ships a file of that name
	// is refused.
	TargetBlockFile = "captf_target.tf.json"
)

// targetUsage says what a valid request looks like.
const targetUsage = `want "replace <address>", "import <address> <id>" or "forget <address>"`

// Target is a parsed targeted operation.
type Target struct {
	// Op is TargetReplace, TargetImport or TargetForget.
	Op string
	// Address is a resource instance address (module path, type, name, optional index).
	Address string
	// ID (TargetImport) is the provider's ID of the object to import.
	ID string
}

// targetAddress is a managed resource instance address: module.<name>[key]. repeated, then
// <type>.<name> and an optional index (a number or a quoted key without quotes, backslashes or
// blanks). Data sources are refused: nothing replaces or imports them.
var targetAddress = regexp.MustCompile(`^(?:module\.[A-Za-z_][A-Za-z0-9_-]*(?:\[(?:[0-9]+|"[^"\\\s]*")\])?\.)*` +
	`[A-Za-z_][A-Za-z0-9_-]*\.[A-Za-z_][A-Za-z0-9_-]*(?:\[(?:[0-9]+|"[^"\\\s]*")\])?$`)

// resourceAddress is a managed resource address without instance keys (module.<name>. parts,
// then <type>.<name>): what a removed block names, since it forgets every instance.
var resourceAddress = regexp.MustCompile(`^(?:module\.[A-Za-z_][A-Za-z0-9_-]*\.)*[A-Za-z_][A-Za-z0-9_-]*\.[A-Za-z_][A-Za-z0-9_-]*$`)

// ParseTarget reads a targeted operation: "replace <address>", "import <address> <id>" (the
// ID is the rest of the value, and may hold blanks) or "forget <address>" (a resource address
// without instance keys). It returns an error that says what a
// valid request looks like.
func ParseTarget(s string) (Target, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return Target{}, fmt.Errorf("empty: %s", targetUsage)
	}
	t := Target{Op: fields[0]}
	switch t.Op {
	case TargetReplace:
		if len(fields) != 2 {
			return Target{}, fmt.Errorf(`want "replace <address>", one resource instance address (for example aws_instance.web or module.net.aws_subnet.a[0])`)
		}
	case TargetForget:
		if len(fields) != 2 {
			return Target{}, fmt.Errorf(`want "forget <address>", one resource address without instance keys (for example aws_instance.web or module.net.aws_subnet.a)`)
		}
		if !resourceAddress.MatchString(fields[1]) && targetAddress.MatchString(fields[1]) {
			return Target{}, fmt.Errorf("%q names a resource instance: forget takes the resource's address without instance keys and forgets every instance of it, as a removed block does", fields[1])
		}
	case TargetImport:
		if len(fields) < 3 {
			return Target{}, fmt.Errorf(`want "import <address> <id>": the resource instance address, then the provider's ID of the object to import`)
		}
		rest := strings.TrimSpace(s)
		rest = strings.TrimSpace(strings.TrimPrefix(rest, t.Op))
		t.ID = strings.TrimSpace(strings.TrimPrefix(rest, fields[1]))
	default:
		return Target{}, fmt.Errorf("unknown operation %q: %s", t.Op, targetUsage)
	}
	t.Address = fields[1]
	if !targetAddress.MatchString(t.Address) {
		return Target{}, fmt.Errorf("%q is not a managed resource instance address (module.<name>. ..., then <type>.<name>, then an optional [index] or [\"key\"])", t.Address)
	}
	if len(t.ID) > MaxTargetIDBytes {
		return Target{}, fmt.Errorf("the import ID is %d bytes long; at most %d", len(t.ID), MaxTargetIDBytes)
	}
	if strings.IndexFunc(t.ID, unicode.IsControl) >= 0 {
		return Target{}, fmt.Errorf("the import ID holds a control character")
	}
	return t, nil
}

// String is the request's canonical form, which ParseTarget reads back.
func (t Target) String() string {
	if t.Op == TargetImport {
		return t.Op + " " + t.Address + " " + t.ID
	}
	return t.Op + " " + t.Address
}

// PlanArgs are the arguments a targeted operation adds to `plan` and `apply`.
func (t Target) PlanArgs() []string {
	if t.Op == TargetReplace {
		return []string{"-replace=" + t.Address}
	}
	return nil
}

// BlockFile is the content of TargetBlockFile (nil for a replace), in Terraform's JSON syntax:
// for an import one import block (the ID is a string template there, so "${" and "%{" are
// escaped to stay literal), for a forget one removed block whose lifecycle keeps the objects
// (`destroy = false`). The address was checked by ParseTarget.
func (t Target) BlockFile() ([]byte, error) {
	var doc map[string]any
	switch t.Op {
	case TargetImport:
		id := strings.NewReplacer("${", "$${", "%{", "%%{").Replace(t.ID)
		doc = map[string]any{"import": []map[string]string{{"to": t.Address, "id": id}}}
	case TargetForget:
		doc = map[string]any{"removed": []map[string]any{{"from": t.Address, "lifecycle": map[string]bool{"destroy": false}}}}
	default:
		return nil, nil
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render the %s block: %w", t.Op, err)
	}
	return append(b, '\n'), nil
}
