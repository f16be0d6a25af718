package runnerapi

import (
	"fmt"
	"strconv"
	"time"
)

// Operations, spelled as api/v1alpha1's Operation values.
const (
	OperationApply   = "Apply"
	OperationDestroy = "Destroy"
	OperationPlan    = "Plan"
	OperationRefresh = "Refresh"
	OperationDrift   = "Drift"
	OperationRestore = "Restore"
)

// Operations lists every operation the runner accepts.
var Operations = []string{OperationApply, OperationDestroy, OperationPlan, OperationRefresh, OperationDrift, OperationRestore}

// ValidOperation reports whether op is one of Operations.
func ValidOperation(op string) bool {
	for _, o := range Operations {
		if o == op {
			return true
		}
	}
	return false
}

// Paths inside a Job's pod.
const (
	// InputsDir is where the per-run Secret is mounted, read-only.
	InputsDir = "/captf/inputs"
	// ModuleDir is where a ConfigMap module is mounted, read-only.
	ModuleDir = "/captf/module"
	// WorkDir is an emptyDir: the runner copies the module there and runs terraform in it.
	WorkDir = "/captf/work"
	// BinDir is an emptyDir the init container copies the runner into.
	BinDir = "/captf/bin"
	// RunnerPath is the runner inside BinDir, the main container's command.
	RunnerPath = BinDir + "/runner"
	// RunnerInImage is the runner's path in the manager image.
	RunnerInImage = "/runner"
	// TerminationLog is where the runner writes its result; the kubelet copies it into the
	// container's terminated state.
	TerminationLog = "/dev/termination-log"
)

// Keys of the per-run Secret.
const (
	// KeyVariables is a JSON object of every Terraform variable (a .tfvars.json file).
	KeyVariables = "variables.tfvars.json"
	// KeyBackend is a JSON Backend document.
	KeyBackend = "backend.json"
	// KeyRedact is a JSON array of strings the runner masks in everything it reports.
	KeyRedact = "redact.json"
	// KeyRestoreState is the state file a restore pushes; only restore Jobs carry it.
	KeyRestoreState = "restore.tfstate"
)

// Backend is the content of KeyBackend: where the kubernetes backend keeps the state.
type Backend struct {
	Namespace    string `json:"namespace"`
	SecretSuffix string `json:"secret_suffix"`
}

// Environment variables the runner reads.
const (
	// EnvBinary names the terraform or tofu binary (the --binary flag wins over it).
	EnvBinary = "CAPTF_TF_BINARY"
	// EnvJobName and EnvPodName only label the runner's logs.
	EnvJobName = "CAPTF_JOB_NAME"
	EnvPodName = "CAPTF_POD_NAME"
	// EnvKubeConfigPath and EnvKubeConfig, when set, make the backend use that kubeconfig
	// instead of the pod's service account (the sandbox and the integration tests).
	EnvKubeConfigPath = "KUBE_CONFIG_PATH"
	EnvKubeConfig     = "KUBECONFIG"
)

// Subcommands and flags of the runner.
const (
	CommandRun     = "run"
	CommandInstall = "install"

	FlagOperation   = "operation"
	FlagModuleDir   = "module-dir"
	FlagInputsDir   = "inputs-dir"
	FlagWorkDir     = "work-dir"
	FlagResultFile  = "result-file"
	FlagLockTimeout = "lock-timeout"
	FlagBinary      = "binary"
)

// Exit codes of the runner. They stay clear of 1 and 2 (shells, the Go runtime), 126/127
// (exec failures) and 128+n (killed by signal n), so each one is unambiguous even when the
// result document is missing.
const (
	// ExitOK: every step succeeded (a plan with changes or a drift check that found drift too).
	ExitOK = 0
	// ExitTerraformFailed: a terraform/tofu step exited non-zero.
	ExitTerraformFailed = 10
	// ExitBadInput: bad usage or invalid inputs (flags, inputs files, module, backend).
	ExitBadInput = 11
	// ExitBinaryMissing: no terraform or tofu binary could be found.
	ExitBinaryMissing = 12
	// ExitInterrupted: SIGTERM or SIGINT stopped the run.
	ExitInterrupted = 13
	// ExitInternal: the runner itself failed (I/O on the work dir, for example).
	ExitInternal = 14
)

// Invocation is what the main container's command says.
type Invocation struct {
	Operation   string
	ModuleDir   string
	InputsDir   string
	WorkDir     string
	ResultFile  string
	LockTimeout time.Duration
	// Binary, when set, names the terraform/tofu binary explicitly.
	Binary string
}

// Command is the main container's command for an invocation: the only place the runner's
// command line is assembled.
func Command(runner string, inv Invocation) []string {
	cmd := []string{
		runner, CommandRun,
		flag(FlagOperation, inv.Operation),
		flag(FlagModuleDir, inv.ModuleDir),
		flag(FlagInputsDir, inv.InputsDir),
		flag(FlagWorkDir, inv.WorkDir),
		flag(FlagResultFile, inv.ResultFile),
		flag(FlagLockTimeout, FormatSeconds(inv.LockTimeout)),
	}
	if inv.Binary != "" {
		cmd = append(cmd, flag(FlagBinary, inv.Binary))
	}
	return cmd
}

// InstallCommand is the init container's command: copy the runner from the manager image.
func InstallCommand() []string {
	return []string{RunnerInImage, CommandInstall, RunnerPath}
}

// FormatSeconds renders a duration as whole seconds ("300s"), the form terraform's
// -lock-timeout and the runner's --lock-timeout both accept.
func FormatSeconds(d time.Duration) string {
	return strconv.FormatInt(int64(d/time.Second), 10) + "s"
}

func flag(name, value string) string {
	return fmt.Sprintf("--%s=%s", name, value)
}
