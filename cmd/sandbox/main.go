// Command sandbox runs CAPTF locally (`make run`): a control plane built from source, CAPTF's,
// Cluster API's and clusterctl's CRDs, the manager with its admission webhooks, and a Job
// executor that runs each Job's runner with a real terraform or tofu as a local process. It
// writes an administrator's kubeconfig, prints what to try, and stops everything on Ctrl-C.
// It applies nothing unless asked (--apply-samples). See docs/sandbox.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox"
)

const module = "module github.com/captf/cluster-api-provider-terraform"

// ReadyLine is printed once the sandbox serves; SamplesReadyLine once the samples are Ready.
const (
	ReadyLine        = "sandbox ready"
	SamplesReadyLine = "samples ready"
	// ReplicaLine starts the line that names the state replica's store (--state-replica-dir).
	ReplicaLine = "state replica:"
)

type flags struct {
	kubeconfig   string
	applySamples bool
	namespace    string
	workDir      string
	keep         bool
	terraform    string
	binDir       string
	managerBin   string
	runnerBin    string
	repo         string
	quietJobs    bool
	verbose      bool
	managerLog   string
	managerArgs  stringList
	replicaDir   string
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	err := run()
	// Last: wait for the guard to confirm nothing of the sandbox is left (it kills what is).
	sandbox.StopGuard()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		os.Exit(1)
	}
}

func run() error {
	f, zo, help, err := parseFlags(os.Args[1:])
	if err != nil || help {
		return err
	}
	logger := zap.New(zap.UseFlagOptions(zo), zap.WriteTo(os.Stderr))
	ctrl.SetLogger(logger)
	if err := f.defaults(); err != nil {
		return err
	}
	ctx, cancel := stopOnSignals()
	defer cancel()
	began := time.Now()
	out := io.Writer(os.Stdout)
	jobsOut := out
	if f.quietJobs {
		jobsOut = io.Discard
	}
	kubeOut := io.Discard
	if f.verbose {
		kubeOut = out
	}
	// The manager's whole log goes to a file; the console shows its warnings and errors only
	// (all of it with --verbose), so the banner is not pushed off the first screen.
	managerLog, err := os.Create(f.managerLog)
	if err != nil {
		return fmt.Errorf("manager log: %w", err)
	}
	defer func() { _ = managerLog.Close() }()
	managerOut := io.MultiWriter(managerLog, &warningsOnly{out: out})
	if f.verbose {
		managerOut = io.MultiWriter(managerLog, out)
	}
	sb, err := sandbox.Start(ctx, sandbox.Options{
		RepoRoot: f.repo, BinDir: f.binDir, ManagerBinary: f.managerBin, RunnerBinary: f.runnerBin, TerraformBinary: f.terraform,
		WorkDir: f.workDir, KeepWorkDir: f.keep, KubeconfigPath: f.kubeconfig,
		ManagerArgs: f.managerArgs, ManagerOutput: managerOut, JobOutput: jobsOut, Log: logger.WithName("sandbox"),
		KubeControllersOutput: kubeOut, Verbose: f.verbose, StateReplicaDir: f.replicaDir,
	})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(os.Stderr, "stopping the sandbox: the manager, running Jobs (SIGTERM, 30s grace), the control plane ...")
		if err := sb.Stop(); err != nil {
			logger.Error(err, "stop")
		}
		fmt.Fprintln(os.Stderr, "sandbox stopped")
	}()
	fmt.Printf("%s in %s\n", ReadyLine, time.Since(began).Round(100*time.Millisecond))
	printHelp(os.Stdout, sb, f)
	if st := sb.Replica(); st != nil {
		fmt.Printf("%s bucket %s at %s, folder %s (docs/state.md, \"The replica\")\n", ReplicaLine, sandbox.ReplicaBucket, st.Endpoint, f.replicaDir)
	}

	if f.applySamples {
		if err := sb.ApplySamples(ctx, f.namespace); err != nil {
			return err
		}
		go reportSamples(ctx, sb, f.namespace, began, logger)
	}
	<-ctx.Done()
	return nil
}

// parseFlags reads the command line; help is true when it asked for -h.
func parseFlags(args []string) (f flags, zo *zap.Options, help bool, err error) {
	fs := flag.NewFlagSet("sandbox", flag.ContinueOnError)
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "where to write the administrator's kubeconfig (default <repo>/bin/sandbox.kubeconfig)")
	fs.BoolVar(&f.applySamples, "apply-samples", false, "apply config/samples once the sandbox is up (make run SAMPLES=1)")
	fs.StringVar(&f.namespace, "namespace", "default", "namespace the samples go to")
	fs.StringVar(&f.workDir, "work-dir", "", "folder for everything the sandbox writes (default: a temporary folder, removed on exit)")
	fs.BoolVar(&f.keep, "keep-work-dir", false, "keep the temporary work folder on exit (Pods' folders and logs)")
	fs.StringVar(&f.terraform, "terraform", "", "terraform or tofu binary the runner runs (default: tofu or terraform on PATH, else <bin-dir>/tofu)")
	fs.StringVar(&f.binDir, "bin-dir", "", "folder of etcd, kube-apiserver, kustomize, manager and runner (default: this binary's folder)")
	fs.StringVar(&f.managerBin, "manager-binary", "", "manager binary (default <bin-dir>/manager)")
	fs.StringVar(&f.runnerBin, "runner-binary", "", "runner binary the Jobs run (default <bin-dir>/runner)")
	fs.StringVar(&f.repo, "repo", "", "repository root holding config/ (default: found from the working folder or this binary)")
	fs.StringVar(&f.replicaDir, "state-replica-dir", "", "folder of a local S3-compatible store (bin/versitygw) in which the manager keeps its state replica; it outlives the sandbox, so a new sandbox on the same folder finds the states as a rebuilt management cluster would (make run REPLICA=1 uses bin/sandbox-replica)")
	fs.BoolVar(&f.quietJobs, "quiet-jobs", false, "do not copy the Jobs' output to the console (each Pod's folder keeps a log)")
	fs.Var(&f.managerArgs, "manager-arg", "extra flag for the manager (repeatable)")
	fs.StringVar(&f.managerLog, "manager-log", "", "file that receives the manager's whole log, truncated at start (default: sandbox-manager.log beside the kubeconfig); the console shows its warnings and errors only, unless --verbose")
	fs.BoolVar(&f.verbose, "verbose", false, "also log what the sandbox's own controllers (the node, the workload clusters' Nodes) do, the manager's whole log, and the output of kube-controller-manager, kube-scheduler and the Cluster API managers; by default only the former's errors and the manager's warnings and errors show")
	zo = &zap.Options{Development: true, Level: zapcore.InfoLevel}
	zo.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, zo, true, nil
		}
		return f, zo, false, fmt.Errorf("parse flags: %w", err)
	}
	return f, zo, false, nil
}

// stopOnSignals returns a context that the first Ctrl-C (or SIGTERM, or a hang-up) cancels;
// later ones only say the sandbox is stopping. Even a SIGKILL leaves nothing running: see
// package test/sandbox/internal/proc.
func stopOnSignals() (context.Context, context.CancelFunc) {
	// A console that went away (`make run | tee log`, then Ctrl-C ends tee first) must not end
	// the sandbox half way: writes to it fail quietly and the sandbox goes on stopping. Notify,
	// not Ignore: an ignored signal would stay ignored in every child the sandbox starts.
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	go func() {
		for range pipes {
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		<-signals
		cancel()
		for range signals {
			fmt.Fprintln(os.Stderr, "still stopping (running Jobs get 30s after SIGTERM); please wait")
		}
	}()
	return ctx, cancel
}

func (f *flags) defaults() error {
	if f.binDir == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find own binary: %w", err)
		}
		if self, err = filepath.EvalSymlinks(self); err != nil {
			return fmt.Errorf("resolve own binary: %w", err)
		}
		f.binDir = filepath.Dir(self)
	}
	if f.repo == "" {
		repo, err := findRepo(f.binDir)
		if err != nil {
			return err
		}
		f.repo = repo
	}
	if f.kubeconfig == "" {
		f.kubeconfig = filepath.Join(f.repo, "bin", "sandbox.kubeconfig")
	}
	abs, err := filepath.Abs(f.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig path: %w", err)
	}
	f.kubeconfig = abs
	if f.managerLog == "" {
		f.managerLog = filepath.Join(filepath.Dir(f.kubeconfig), "sandbox-manager.log")
	}
	if f.managerLog, err = filepath.Abs(f.managerLog); err != nil {
		return fmt.Errorf("manager log path: %w", err)
	}
	return nil
}

// findRepo walks up from the working folder, then from binDir, to CAPTF's go.mod.
func findRepo(binDir string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working folder: %w", err)
	}
	for _, start := range []string{wd, binDir} {
		for dir := start; ; dir = filepath.Dir(dir) {
			if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), module+"\n") {
				return dir, nil
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "", errors.New("repository not found above the working folder or the binary; pass --repo")
}

func printHelp(w io.Writer, sb *sandbox.Sandbox, f flags) {
	ns := f.namespace
	apply := "kubectl apply -n " + ns + " -k config/samples          # or start with make run SAMPLES=1"
	if f.applySamples {
		apply = "# config/samples is being applied to namespace " + ns + " (SAMPLES=1)"
	}
	fmt.Fprintf(w, `
CAPTF sandbox: a local control plane with the real kube-controller-manager,
kube-scheduler and Cluster API core, kubeadm bootstrap and kubeadm control plane
managers, cert-manager's controllers (they issue every webhook's serving
certificate and inject its CA), the manager with its webhooks, and a node
running each Job's pod (the real runner with %s) as local processes.

  export KUBECONFIG=%s
  %[4]s
  kubectl get clusters,terraformclusters,terraformmachines,terraformmachinepools -n %[3]s
  kubectl get jobs,pods -n %[3]s -l captf.io/managed=true
  kubectl wait -n %[3]s --for=condition=Ready --timeout=5m \
      terraformcluster/sample terraformmachine/sample-machine-0 terraformmachinepool/sample-pool
  kubectl get terraformmachine -n %[3]s sample-machine-0 -o jsonpath='{.spec.providerID}{"\n"}'
  kubectl scale machinepool -n %[3]s sample-pool --replicas=3
  kubectl delete cluster -n %[3]s sample              # destroys through destroy Jobs

Each Pod's folder (volumes, kubeconfig, log): %[5]s
Runs so far (one JSON line per Pod):        %[6]s
The manager's log (its warnings and errors also show here): %[7]s
Ctrl-C stops everything.
`, filepath.Base(sb.TerraformBinary()), sb.Kubeconfig(), ns, apply, filepath.Join(sb.WorkDir(), "pods"), sb.HistoryFile(), f.managerLog)
}

// reportSamples prints when the samples are Ready, measured from the start of the sandbox.
func reportSamples(ctx context.Context, sb *sandbox.Sandbox, ns string, began time.Time, logger logr.Logger) {
	c := sb.Client()
	objs := []client.Object{
		&infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: "sample"}},
		&infrav1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Name: "sample-machine-0"}},
		&infrav1.TerraformMachinePool{ObjectMeta: metav1.ObjectMeta{Name: "sample-pool"}},
	}
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		ready := 0
		for _, o := range objs {
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: o.GetName()}, o); err == nil && isReady(o) {
				ready++
			}
		}
		if ready == len(objs) && topologyUp(ctx, c, ns) {
			fmt.Printf("%s in %s (TerraformCluster, TerraformMachine and TerraformMachinePool Ready; the ClusterClass cluster %s Available, its machines and pool Ready)\n",
				SamplesReadyLine, time.Since(began).Round(100*time.Millisecond), TopologySample)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// TopologySample is the samples' Cluster of CAPTF's ClusterClass (config/samples/cluster-topology.yaml).
const TopologySample = "sample-topology"

// topologyUp tells whether the ClusterClass sample is up: Cluster API calls it Available (its
// infrastructure provisioned, its control plane and workers available, its workload cluster
// reachable) and TopologyReconciled (everything the class names is stamped), and every
// TerraformMachine and TerraformMachinePool of it is Ready. Available alone is not enough:
// Cluster API counts a topology whose MachinePools are still to be created as available (it
// treats TopologyReconciled=False for a pending creation as information), so the pool could
// still be missing.
func topologyUp(ctx context.Context, c client.Client, ns string) bool {
	cl := &clusterv1.Cluster{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: TopologySample}, cl); err != nil {
		return false
	}
	if !meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1.ClusterAvailableCondition) ||
		!meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1.ClusterTopologyReconciledCondition) {
		return false
	}
	of := client.MatchingLabels{clusterv1.ClusterNameLabel: TopologySample}
	machines, pools := &infrav1.TerraformMachineList{}, &infrav1.TerraformMachinePoolList{}
	if c.List(ctx, machines, client.InNamespace(ns), of) != nil || c.List(ctx, pools, client.InNamespace(ns), of) != nil ||
		len(machines.Items) == 0 || len(pools.Items) == 0 {
		return false
	}
	for i := range machines.Items {
		if !isReady(&machines.Items[i]) {
			return false
		}
	}
	for i := range pools.Items {
		if !isReady(&pools.Items[i]) {
			return false
		}
	}
	return true
}

func isReady(o client.Object) bool {
	var conds []metav1.Condition
	switch o := o.(type) {
	case *infrav1.TerraformCluster:
		conds = o.Status.Conditions
	case *infrav1.TerraformMachine:
		conds = o.Status.Conditions
	case *infrav1.TerraformMachinePool:
		conds = o.Status.Conditions
	}
	for _, c := range conds {
		if c.Type == infrav1.ReadyCondition {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}
