package runnerapi

import (
	"fmt"
	"sort"
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
	// ChannelDir is an emptyDir shared by the state channel (read-write) and the main
	// container (read-only): the channel's address, its per-run credential and its records.
	ChannelDir = "/captf/channel"
	// ServiceAccountDir is the projected ServiceAccount token volume, mounted only into the
	// state channel: files ServiceAccountTokenFile, ServiceAccountCAFile and
	// ServiceAccountNamespaceFile.
	ServiceAccountDir           = "/var/run/secrets/captf.io/serviceaccount"
	ServiceAccountTokenFile     = "token"
	ServiceAccountCAFile        = "ca.crt"
	ServiceAccountNamespaceFile = "namespace"
	// IdentityDir holds the optional cloud identity token (spec.job.identityToken), mounted
	// only into the main container; the token is the file IdentityTokenFile.
	IdentityDir       = "/var/run/secrets/captf.io/identity"
	IdentityTokenFile = "token"
)

// Files the state channel writes into ChannelDir. The channel writes each through a
// temporary file and a rename, so a reader never sees half a file.
const (
	// ChannelAddressFile holds the channel's base URL (http://127.0.0.1:<port>), written last:
	// its presence means the channel is serving.
	ChannelAddressFile = "address"
	// ChannelCredentialFile holds the per-run password of the channel's basic auth (mode 0600).
	ChannelCredentialFile = "credential"
	// ChannelFencedFile records that the channel refused a lock or a state write because the
	// object's run lease named another Job (a JSON Fenced document).
	ChannelFencedFile = "fenced.json"
	// ChannelLockBrokenFile records the stale lock the channel broke (a JSON LockBroken).
	ChannelLockBrokenFile = "lock-broken.json"
	// ChannelLockHolderFile records the holder of a lock the channel could not take (a JSON
	// LockHolder); the channel removes it once it takes the lock.
	ChannelLockHolderFile = "lock-holder.json"
	// ChannelStateRefusedFile records that the channel refused to serve the state because it
	// is not the one the controller read (a JSON StateRefused).
	ChannelStateRefusedFile = "state-refused.json"
	// ChannelUsername is the user name of the channel's basic auth.
	ChannelUsername = "captf"
)

// StateRefused is the content of ChannelStateRefusedFile.
type StateRefused struct {
	// Expected is the lineage the controller read (the channel's --state-lineage).
	Expected string `json:"expected"`
	// Found is the lineage the state Secret holds now; "" when it holds no state or is gone.
	Found string `json:"found"`
}

// MaxLineageLength bounds a state lineage the controller passes on (Terraform's are UUIDs).
const MaxLineageLength = 128

// ValidLineage reports whether s can be passed as --state-lineage: 1 to MaxLineageLength
// printable ASCII characters, no space.
func ValidLineage(s string) bool {
	if s == "" || len(s) > MaxLineageLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// Fenced is the content of ChannelFencedFile.
type Fenced struct {
	// Request is what was refused: LOCK, POST (a state write), PUT /plan (storing a plan) or
	// GET /plan (fetching the plan to apply).
	Request string `json:"request"`
	// RunLeaseHolder is the Job the run lease named instead ("" when it named none or was
	// missing).
	RunLeaseHolder string `json:"runLeaseHolder"`
}

// Labels the state channel reads on the Jobs and pods that hold a lock (I8). They are the
// manager's labels (api/v1alpha1 OwnerKindLabel and OwnerNameLabel) and the Job controller's;
// the runner does not import those packages, and a test keeps the values equal.
const (
	// JobOwnerKindLabel and JobOwnerNameLabel name the object a CAPTF Job runs for.
	JobOwnerKindLabel = "captf.io/owner-kind"
	JobOwnerNameLabel = "captf.io/owner-name"
	// PodJobNameLabel and PodLegacyJobNameLabel name a pod's Job (the Job controller sets both).
	PodJobNameLabel       = "batch.kubernetes.io/job-name"
	PodLegacyJobNameLabel = "job-name"
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

// LongestFirst lists a set of values to mask (KeyRedact's, and what the runner adds) in the order
// they are masked: longest first, so masking never leaves part of a longer secret behind (one
// that contains another is masked whole), ties in lexical order.
func LongestFirst(set map[string]struct{}) []string {
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if len(out[i]) != len(out[j]) {
			return len(out[i]) > len(out[j])
		}
		return out[i] < out[j]
	})
	return out
}

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
	// EnvKubeConfigPath and EnvKubeConfig, when set and the run has no state channel, make
	// the kubernetes backend use that kubeconfig instead of the pod's service account.
	EnvKubeConfigPath = "KUBE_CONFIG_PATH"
	EnvKubeConfig     = "KUBECONFIG"
	// EnvIdentityTokenFile, in the main container, names the cloud identity token file when
	// spec.job.identityToken is set.
	EnvIdentityTokenFile = "CAPTF_IDENTITY_TOKEN_FILE"
	// EnvPodName and EnvPodNamespace are the state channel's pod (downward API).
	EnvChannelPodName      = "POD_NAME"
	EnvChannelPodNamespace = "POD_NAMESPACE"
	// EnvServiceHost and EnvServicePort locate the API server (set by the kubelet).
	EnvServiceHost = "KUBERNETES_SERVICE_HOST"
	EnvServicePort = "KUBERNETES_SERVICE_PORT"
)

// Subcommands and flags of the runner.
const (
	CommandRun     = "run"
	CommandInstall = "install"
	CommandChannel = "channel"

	FlagOperation   = "operation"
	FlagModuleDir   = "module-dir"
	FlagInputsDir   = "inputs-dir"
	FlagWorkDir     = "work-dir"
	FlagResultFile  = "result-file"
	FlagLockTimeout = "lock-timeout"
	FlagBinary      = "binary"
	// FlagChannelDir (run): use the state channel whose files are in this folder; unset: the
	// kubernetes backend (local runs, the sandbox before it runs sidecars).
	FlagChannelDir = "channel-dir"
	// FlagChannelWait (run): how long to wait for the channel's address file.
	FlagChannelWait = "channel-wait"
	// FlagPlanID (run, an Apply; channel): apply the saved plan of this ID instead of planning
	// afresh. The runner fetches it through the channel, which hands it out only to a Job whose
	// --plan-id it is.
	FlagPlanID = "plan-id"
	// FlagRefreshOnly (run: a Plan or a Drift check; channel: a Plan): the plan is a
	// refresh-only plan (`plan -refresh-only`), which compares the infrastructure with the
	// state; applied, it records in the state what changed outside Terraform and changes no
	// infrastructure. A Drift check with it is drift mode Accept's. The channel marks a Plan
	// Job's record RefreshOnly, and hands a refresh-only plan out only to a Refresh Job (and
	// any other plan only to an Apply Job).
	FlagRefreshOnly = "refresh-only"
	// FlagDestroyPlan (run: a Plan; channel: a Plan): the plan is a destroy plan (`plan
	// -destroy`), made for a deleting object whose destroy is judged like an apply. The channel
	// marks the Plan Job's record Destroy, and hands a destroy plan out only to a Destroy Job
	// (PlanKindOf, JobPlanKind).
	FlagDestroyPlan = "destroy-plan"
	// FlagTarget (run: an Apply or a Plan; channel: a Plan): the targeted operation the run
	// carries out (ParseTarget's form: "replace <address>" or "import <address> <id>"). The
	// channel records it in a Plan Job's record, from its own flag.
	FlagTarget = "target"
	// FlagInputsHash (channel): the Job's inputs hash, which the ID of a saved plan covers.
	FlagInputsHash = "inputs-hash"
	// FlagStateLineage (channel): the lineage of the state the controller read live before it
	// created the Job. The channel serves only a state of that lineage: a state Secret that
	// was emptied, deleted or replaced since is refused (HTTP 409, ChannelStateRefusedFile),
	// so the run stops at init and touches nothing (I7 at the point of use).
	FlagStateLineage = "state-lineage"

	// Flags of `runner channel` (besides FlagOperation, FlagPlanID and FlagInputsHash).
	FlagDir       = "dir"
	FlagNamespace = "namespace"
	FlagSuffix    = "suffix"
	FlagJob       = "job"
	FlagRunLease  = "run-lease"
	FlagOwnerKind = "owner-kind"
	FlagOwnerName = "owner-name"
	FlagOwnerUID  = "owner-uid"
	FlagTokenFile = "token-file"
	FlagCAFile    = "ca-file"
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
	// ExitFenced: the state channel refused the run's lock or state write because the
	// object's run lease names another Job. Never a reason for backoff.
	ExitFenced = 15
	// ExitPlanRefused: the saved plan an Apply was given was refused and nothing was applied:
	// terraform found it stale (the state changed since the plan), or the channel refused it
	// (superseded, consumed, corrupt). The controller plans again; it never applies afresh.
	ExitPlanRefused = 16
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
	// ChannelDir, when set, makes the runner use the state channel whose files are there.
	ChannelDir string
	// PlanID, when set (an Apply, a Refresh or a Destroy), makes the runner apply that saved
	// plan.
	PlanID string
	// RefreshOnly (a Plan or a Drift check): make a refresh-only plan (FlagRefreshOnly).
	RefreshOnly bool
	// DestroyPlan (a Plan): make a destroy plan (FlagDestroyPlan).
	DestroyPlan bool
	// Target (an Apply or a Plan): the targeted operation (FlagTarget).
	Target string
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
	return appendSet(cmd, ifSet(FlagBinary, inv.Binary), ifSet(FlagChannelDir, inv.ChannelDir), ifSet(FlagPlanID, inv.PlanID),
		ifTrue(FlagRefreshOnly, inv.RefreshOnly), ifTrue(FlagDestroyPlan, inv.DestroyPlan), ifSet(FlagTarget, inv.Target))
}

// ChannelInvocation is what the state channel's command says (the channel's configuration
// besides its environment).
type ChannelInvocation struct {
	// Dir is the folder shared with the main container (address, credential, records;
	// ChannelDir in a Job).
	Dir string
	// Namespace and Suffix name the state Secret tfstate-default-<Suffix> and the lock Lease
	// lock-tfstate-default-<Suffix>, the only state the channel serves.
	Namespace string
	Suffix    string
	// Job is the channel's Job; RunLease the object's run lease, which must name Job for any
	// lock or state write (fencing).
	Job      string
	RunLease string
	// OwnerKind, OwnerName and OwnerUID are the object: a stale lock is broken only when its
	// holder's Job is controlled by this UID.
	OwnerKind string
	OwnerName string
	OwnerUID  string
	// TokenFile (re-read on every request) and CAFile are the projected ServiceAccount token
	// and the API server's CA, which authenticate the channel.
	TokenFile string
	CAFile    string
	// Operation is the Job's operation. Only a Plan Job's channel stores a plan (PUT /plan).
	Operation string
	// InputsHash is the Job's inputs hash; the ID of a plan the channel stores covers it.
	// Required for a Plan Job.
	InputsHash string
	// PlanID (an Apply, a Refresh or a Destroy of a saved plan) is the only plan the channel
	// hands out (GET /plan), and only once, and only a plan of the Job's kind
	// (PlanKindRefusal): to a Refresh Job a refresh-only plan, to a Destroy Job a destroy plan,
	// to an Apply Job one that is neither. Empty: the channel hands out no plan.
	PlanID string
	// RefreshOnly (a Plan Job): the plan the Job stores is a refresh-only plan
	// (FlagRefreshOnly); the channel records it in the plan record (never from what the runner
	// uploads).
	RefreshOnly bool
	// DestroyPlan (a Plan Job): the plan the Job stores is a destroy plan (FlagDestroyPlan); the
	// channel records it in the plan record (never from what the runner uploads).
	DestroyPlan bool
	// Target (a Plan Job): the targeted operation the plan carries out (FlagTarget); the
	// channel records it in the plan record (never from what the runner uploads).
	Target string
	// StateLineage, when set, is the lineage of the state the controller read before it
	// created the Job: the channel serves only a state of that lineage and refuses (409) a
	// state Secret that holds no state or another lineage, and it accepts only state writes
	// of that lineage. Empty: it serves what is there, and the run's first accepted write
	// pins the lineage of every later one.
	StateLineage string
}

// ChannelCommand is the state channel's command: the only place its command line is
// assembled.
func ChannelCommand(runner string, inv ChannelInvocation) []string {
	cmd := []string{
		runner, CommandChannel,
		flag(FlagDir, inv.Dir),
		flag(FlagNamespace, inv.Namespace),
		flag(FlagSuffix, inv.Suffix),
		flag(FlagJob, inv.Job),
		flag(FlagRunLease, inv.RunLease),
		flag(FlagOwnerKind, inv.OwnerKind),
		flag(FlagOwnerName, inv.OwnerName),
		flag(FlagOwnerUID, inv.OwnerUID),
		flag(FlagTokenFile, inv.TokenFile),
		flag(FlagCAFile, inv.CAFile),
	}
	return appendSet(cmd, ifSet(FlagOperation, inv.Operation), ifSet(FlagInputsHash, inv.InputsHash), ifSet(FlagPlanID, inv.PlanID),
		ifSet(FlagStateLineage, inv.StateLineage), ifTrue(FlagRefreshOnly, inv.RefreshOnly), ifTrue(FlagDestroyPlan, inv.DestroyPlan),
		ifSet(FlagTarget, inv.Target))
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

// optionalFlag is a flag a command line carries only when it is set; value "" leaves it out.
type optionalFlag struct{ name, value string }

// ifSet is the flag --name=value, left out when value is "" (the flag's default).
func ifSet(name, value string) optionalFlag { return optionalFlag{name: name, value: value} }

// ifTrue is the flag --name=true, left out when on is false (the flag's default).
func ifTrue(name string, on bool) optionalFlag {
	if !on {
		return optionalFlag{name: name}
	}
	return optionalFlag{name: name, value: "true"}
}

// appendSet appends the flags that are set, in their order.
func appendSet(cmd []string, flags ...optionalFlag) []string {
	for _, f := range flags {
		if f.value != "" {
			cmd = append(cmd, flag(f.name, f.value))
		}
	}
	return cmd
}
