package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
)

// repoRoot is two folders up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// codeFacts is what the code defines: every string literal and every identifier of the
// module's non-test Go files.
type codeFacts struct {
	strings map[string]bool
	idents  map[string]bool
}

func readCode(t *testing.T, root string) codeFacts {
	t.Helper()
	f := codeFacts{strings: map[string]bool{}, idents: map[string]bool{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "out", "testdata", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		test := strings.HasSuffix(path, "_test.go")
		ast.Inspect(file, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.BasicLit:
				if x.Kind == token.STRING && !test {
					if s, err := strconv.Unquote(x.Value); err == nil {
						f.strings[s] = true
					}
				}
			case *ast.Ident:
				f.idents[x.Name] = true
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// docFiles are README.md and every page under docs/.
func docFiles(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	add := func(path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		out[rel] = string(b)
	}
	add(filepath.Join(root, "README.md"))
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			add(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	backticked = regexp.MustCompile("`([^`\n]+)`")
	camel      = regexp.MustCompile(`^[A-Z][A-Za-z0-9]+$`)
	captfKey   = regexp.MustCompile(`(?:^|[^/\w.])(captf\.io/[a-z0-9-]*[a-z0-9])`)
	metricName = regexp.MustCompile(`\bcaptf_[a-z_]+\b`)
	flagToken  = regexp.MustCompile(`^--([a-z0-9-]+)(=.*)?$`)
	flagDecl   = regexp.MustCompile(`\.(?:String|Bool|Int|Int64|Duration|Float64|Uint)(?:Var)?\((?:&[^,]+,\s*)?"([a-z0-9-]+)"`)
)

// external are names the docs use that no code of this module defines: Kubernetes, Cluster
// API, Terraform and tool vocabulary. A CamelCase token in backticks must be this, or defined
// by the code (a string, an identifier): a condition or reason renamed in code fails here.
var external = map[string]bool{
	// Kubernetes kinds, fields and states.
	"Job": true, "Pod": true, "Secret": true, "ConfigMap": true, "Lease": true, "ServiceAccount": true, "Role": true,
	"RoleBinding": true, "ClusterRole": true, "Deployment": true, "Service": true, "Namespace": true, "Event": true,
	"Complete": true, "Failed": true, "Succeeded": true, "Running": true, "Pending": true, "Terminating": true,
	"SuccessCriteriaMet": true, "FailureTarget": true, "DeadlineExceeded": true, "BackoffLimitExceeded": true,
	"DisruptionTarget": true, "OOMKilled": true, "ContainerCreating": true, "AlreadyExists": true, "Orphan": true,
	"Foreground": true, "Background": true, "ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
	"ValidatingWebhookConfiguration": true, "MutatingWebhookConfiguration": true, "CustomResourceDefinition": true,
	"Warning": true, "Normal": true, "Fail": true, "Ignore": true, "Equivalent": true, "Exact": true, "None": true,
	"True": true, "False": true, "Unknown": true, "PodDisruptionBudget": true, "Always": true, "Never": true, "IfNotPresent": true,
	"OnFailure": true, "Opaque": true, "TokenRequest": true, "SubjectAccessReview": true,
	// Cluster API.
	"Cluster": true, "Machine": true, "MachinePool": true, "MachineDeployment": true, "ControlPlaneInitialized": true,
	"InternalIP": true, "ExternalIP": true, "InternalDNS": true, "ExternalDNS": true, "Hostname": true, "Provider": true,
	"InfrastructureReady": true, "MachineSet": true, "MachinesReady": true, "ControlPlaneAvailable": true,
	"RemoteConnectionProbe": true, "WorkersAvailable": true, "InternalError": true,
	"KubeadmControlPlane": true,
	// cert-manager.
	"Certificate": true, "Issuer": true, "ClusterIssuer": true,
	// Terraform, HTTP and shell.
	"LOCK": true, "UNLOCK": true, "GET": true, "POST": true, "PUT": true, "DELETE": true, "PATH": true, "HOME": true,
	"KUBECONFIG": true, "TMPDIR": true, "WORKDIR": true, "FROM": true, "COPY": true, "USER": true, "ENTRYPOINT": true,
	"Dockerfile": true, "Info": true, "Who": true, "Operation": true, "Version": true, "Created": true, "Path": true, "ID": true,
}

// TestDocsNameOnlyWhatTheCodeDefines checks every name the docs give in backticks.
func TestDocsNameOnlyWhatTheCodeDefines(t *testing.T) {
	root := repoRoot(t)
	code := readCode(t, root)
	flags := map[string]bool{}
	// The manager's zap flags come from controller-runtime (zap.Options.BindFlags).
	for _, dir := range []string{"cmd/manager", "cmd/runner", "cmd/sandbox", "cmd/runner/internal/runner", "cmd/runner/internal/channel", "test/sandbox"} {
		entries, _ := os.ReadDir(filepath.Join(root, dir))
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".go") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(root, dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range flagDecl.FindAllStringSubmatch(string(b), -1) {
				flags[m[1]] = true
			}
		}
	}
	// Flags of the tools the docs show commands of (kubectl, clusterctl, terraform, go, make).
	for _, f := range []string{"cascade", "wait", "as", "as-group", "type", "patch", "field-selector", "namespace", "kubeconfig",
		"to-kubeconfig", "target-namespace", "infrastructure", "force", "output", "watch", "selector", "all-namespaces",
		"dry-run", "server-side", "overwrite", "raw", "describe", "lock-timeout", "auto-approve", "input", "no-color",
		"refresh-only", "detailed-exitcode", "out", "reconfigure", "backend-config", "var-file", "bench", "run", "count",
		"timeout", "v", "json", "state", "lock", "ginkgo.focus", "ginkgo.v", "benchtime", "generate", "dir", "config",
		"tags", "race", "help", "version", "apply-samples", "insecure-skip-tls-verify", "force-conflicts",
		// clusterctl describe cluster.
		"echo", "grouping", "show-machinesets",
		// kubectl logs.
		"follow", "tail", "timestamps", "since", "since-time", "limit-bytes", "previous",
		// kube-controller-manager.
		"use-service-account-credentials"} {
		flags[f] = true
	}
	var problems []string
	docs := docFiles(t, root)
	names := make([]string, 0, len(docs))
	for n := range docs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		text := docs[name]
		for _, m := range backticked.FindAllStringSubmatch(text, -1) {
			tok := strings.TrimSpace(m[1])
			switch {
			case camel.MatchString(tok):
				if !code.strings[tok] && !code.idents[tok] && !external[tok] {
					problems = append(problems, name+": `"+tok+"` is no condition, reason, event, constant or identifier of the code")
				}
			case flagToken.MatchString(tok):
				f := flagToken.FindStringSubmatch(tok)[1]
				if !flags[f] && !code.strings[f] && !code.strings["--"+f] && !code.strings["-"+f] && !strings.HasPrefix(f, "zap-") {
					problems = append(problems, name+": `"+tok+"` is no flag of the manager, the runner or the sandbox")
				}
			}
		}
		for _, m := range captfKey.FindAllStringSubmatch(text, -1) {
			key := m[1]
			if !code.strings[key] && !prefixOfAString(code.strings, key) {
				problems = append(problems, name+": "+key+" is no annotation, label or finalizer of the code")
			}
		}
		for _, metric := range metricName.FindAllString(text, -1) {
			if !code.strings[metric] && !code.strings[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(metric, "_bucket"), "_count"), "_sum")] {
				problems = append(problems, name+": "+metric+" is no metric of the code")
			}
		}
	}
	slices.Sort(problems)
	problems = slices.Compact(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

// prefixOfAString accepts a key that some code string starts with followed by a separator
// (an annotation written as "captf.io/restore-state=<serial>" in the docs is the key itself).
func prefixOfAString(strs map[string]bool, key string) bool {
	for s := range strs {
		if strings.HasPrefix(s, key+"=") || strings.HasPrefix(s, key+":") {
			return true
		}
	}
	return false
}

var operationRow = regexp.MustCompile("(?m)^\\| `(Apply|Destroy|Plan|Refresh|Drift|Restore)` \\|")

// TestDocumentedOperationsAreTheOnesTheControllerStarts compares the operations table of
// docs/lifecycle.md with what Decide can start (decide.StartedOperations, which the engine's
// own tests prove reachable), and keeps README.md's summary to them.
func TestDocumentedOperationsAreTheOnesTheControllerStarts(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "docs", "lifecycle.md"))
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range operationRow.FindAllStringSubmatch(string(b), -1) {
		documented = append(documented, m[1])
	}
	var started []string
	for _, op := range decide.StartedOperations {
		started = append(started, string(op))
	}
	slices.Sort(documented)
	slices.Sort(started)
	if !slices.Equal(documented, started) {
		t.Errorf("docs/lifecycle.md's operations table lists %v; the controller starts %v", documented, started)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	first := strings.SplitN(string(readme), "\n\n", 3)
	summary := strings.ToLower(strings.Join(first[:min(2, len(first))], " "))
	for _, op := range []string{"Apply", "Destroy", "Plan", "Refresh", "Drift", "Restore"} {
		mentioned := strings.Contains(summary, " "+strings.ToLower(op)+",") || strings.Contains(summary, " "+strings.ToLower(op)+" ")
		if mentioned && !slices.Contains(started, op) {
			t.Errorf("README.md's summary names %s, which the controller never starts", op)
		}
	}
}
