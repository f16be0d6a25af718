package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// variableSchema picks a module file's variable blocks and leaves everything else alone.
var variableSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "variable", LabelNames: []string{"name"}}}}

// DeclaredVariables returns the names of the variables the root module in dir declares: the
// variable blocks of its configuration files in native syntax (*.tf, *.tofu) and in JSON
// syntax (*.tf.json, *.tofu.json), skipping the files terraform ignores (names starting with
// "." or ending in "~", and "#...#"). Subfolders are other modules. A file that does not parse
// is an error: then the runner cannot tell what the module declares (terraform reports the
// file itself).
func DeclaredVariables(dir string) (map[string]bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read module folder: %w", err)
	}
	parser := hclparse.NewParser()
	declared := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || ignoredConfigFile(name) {
			continue
		}
		path := filepath.Join(dir, name)
		var file *hcl.File
		var diags hcl.Diagnostics
		switch {
		case strings.HasSuffix(name, ".tf"), strings.HasSuffix(name, ".tofu"):
			file, diags = parser.ParseHCLFile(path)
		case strings.HasSuffix(name, ".tf.json"), strings.HasSuffix(name, ".tofu.json"):
			file, diags = parser.ParseJSONFile(path)
		default:
			continue
		}
		if diags.HasErrors() {
			return nil, fmt.Errorf("parse %s: %w", name, diags)
		}
		content, _, diags := file.Body.PartialContent(variableSchema)
		if diags.HasErrors() {
			return nil, fmt.Errorf("read the variable blocks of %s: %w", name, diags)
		}
		for _, b := range content.Blocks {
			declared[b.Labels[0]] = true
		}
	}
	return declared, nil
}

// ignoredConfigFile: terraform and tofu skip the file (editor backups and hidden files).
func ignoredConfigFile(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasSuffix(name, "~") ||
		(strings.HasPrefix(name, "#") && strings.HasSuffix(name, "#"))
}

// UndeclaredVariables returns, sorted, the names the variables file varFile sets that the root
// module in dir does not declare (DeclaredVariables). CAPTF's own variable
// (runnerapi.CaptfVariable) is never one: a module declares it only when it uses it.
func UndeclaredVariables(dir, varFile string) ([]string, error) {
	b, err := os.ReadFile(varFile)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", runnerapi.KeyVariables, err)
	}
	var vars map[string]json.RawMessage
	if err := json.Unmarshal(b, &vars); err != nil {
		// The content may be secret: never quote it.
		return nil, fmt.Errorf("%s is not a JSON object", runnerapi.KeyVariables)
	}
	declared, err := DeclaredVariables(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for name := range vars {
		if name != runnerapi.CaptfVariable && !declared[name] {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// passesVarFile: one of the commands reads the variables file (an apply of a saved plan, a
// restore and a refresh of a saved plan do not).
func passesVarFile(steps []Step) bool {
	for _, st := range steps {
		for _, a := range st.Args {
			if strings.HasPrefix(a, "-var-file=") {
				return true
			}
		}
	}
	return false
}

// noteUndeclared records in res, once init succeeded, the variables the run passes that the
// module does not declare (terraform only warns about them in the pod's log). When the module
// cannot be read it records nothing: that is no failure of the run.
func (s *session) noteUndeclared(ctx context.Context, p prepared, res *runnerapi.Result) {
	if !passesVarFile(p.steps) {
		return
	}
	log := logr.FromContextOrDiscard(ctx)
	names, err := UndeclaredVariables(s.dir, p.in.VarFile)
	if err != nil {
		log.Info("cannot tell which variables the module declares; not reporting undeclared ones", "error", s.redactor.Redact(err.Error()))
		return
	}
	if len(names) == 0 {
		return
	}
	for i, n := range names {
		names[i] = s.redactor.Redact(n)
	}
	res.UndeclaredVariables = names
	log.Info("the module does not declare these variables; terraform ignores them", "variables", names)
}
