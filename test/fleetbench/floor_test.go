package fleetbench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/inputs"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox"
)

// floorPrepareWorkers write the floor's objects before its clock starts.
const floorPrepareWorkers = 8

// channelStopGrace is how long a channel has to exit after SIGTERM before the floor gives up.
const channelStopGrace = 30 * time.Second

// floorEnv is what every floor execution shares.
type floorEnv struct {
	runner, tf string
	// host and port are the API server's (KUBERNETES_SERVICE_HOST and _PORT).
	host, port string
	caFile     string
}

// floorObject is one machine's run of the floor: its names and its folder (module, inputs,
// token, channel, work).
type floorObject struct {
	name, suffix, job, uid string
	dir                    string
	inputsHash             string
}

// runFloor prepares n objects as the controller would before a first apply, then runs the
// state channel and the runner for each, s.parallel at a time, and returns the time from the
// first start until the last channel exited.
func runFloor(ctx context.Context, b *testing.B, sb *sandbox.Sandbox, s settings, runner string) time.Duration {
	b.Helper()
	cfg := sb.Config()
	u, err := url.Parse(cfg.Host)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	env := floorEnv{runner: runner, tf: s.tf, host: u.Hostname(), port: u.Port(), caFile: filepath.Join(dir, "ca.crt")}
	if err := os.WriteFile(env.caFile, cfg.CAData, 0o600); err != nil {
		b.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := sb.Client().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: floorNamespace}}); err != nil {
		b.Fatal(err)
	}
	began := time.Now()
	objs, err := prepareFloor(ctx, sb.Client(), cs, dir, s.n)
	if err != nil {
		b.Fatalf("prepare the floor: %v", err)
	}
	fmt.Fprintf(os.Stderr, "fleet: floor of %d objects prepared in %s\n", s.n, time.Since(began).Round(time.Millisecond))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan *floorObject)
	errs := make(chan error, s.parallel)
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < s.parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range work {
				if err := o.run(ctx, env); err != nil {
					errs <- fmt.Errorf("%s: %w", o.name, err)
					cancel()
					return
				}
			}
		}()
	}
feed:
	for _, o := range objs {
		select {
		case work <- o:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	took := time.Since(t0)
	close(errs)
	if err := errors.Join(drain(errs)...); err != nil {
		b.Fatalf("the floor: %v", err)
	}
	for _, o := range objs {
		if err := o.applied(ctx, sb.Client()); err != nil {
			b.Fatalf("the floor: %s: %v", o.name, err)
		}
	}
	return took
}

// applied checks that the object's state Secret holds what the apply wrote: a state whose
// provider_id output names the object.
func (o *floorObject) applied(ctx context.Context, c client.Client) error {
	sec := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: floorNamespace, Name: naming.StateSecretName(o.suffix)}, sec); err != nil {
		return fmt.Errorf("read the state: %w", err)
	}
	raw, err := runnerapi.DecodeState(sec.Data[runnerapi.StateKey])
	if err != nil {
		return fmt.Errorf("decode the state: %w", err)
	}
	var st struct {
		Outputs map[string]struct {
			Value any `json:"value"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("parse the state: %w", err)
	}
	if want := "captf://" + floorNamespace + "/" + o.name; st.Outputs["provider_id"].Value != want {
		return fmt.Errorf("the state's provider_id is %v, want %s", st.Outputs["provider_id"].Value, want)
	}
	return nil
}

// prepareFloor writes, for n machines of floorNamespace, what the controller writes before a
// first apply, and each one's folder with the module, its inputs and a token of its runner
// ServiceAccount.
func prepareFloor(ctx context.Context, c client.Client, cs kubernetes.Interface, dir string, n int) ([]*floorObject, error) {
	objs := make([]*floorObject, n)
	for i := range objs {
		name := machineName(i)
		suffix := naming.StateSuffix(floorNamespace, infrav1.TerraformMachineKind, name)
		objs[i] = &floorObject{name: name, suffix: suffix, job: naming.JobName(suffix, 1), uid: newUID(), dir: filepath.Join(dir, name)}
	}
	work := make(chan *floorObject)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for w := 0; w < floorPrepareWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range work {
				if err := o.prepare(ctx, c, cs); err != nil {
					errs <- fmt.Errorf("%s: %w", o.name, err)
				}
			}
		}()
	}
	for _, o := range objs {
		work <- o
	}
	close(work)
	wg.Wait()
	close(errs)
	return objs, errors.Join(drain(errs)...)
}

func (o *floorObject) prepare(ctx context.Context, c client.Client, cs kubernetes.Interface) error {
	sa := naming.RunnerServiceAccountName(o.suffix)
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: floorNamespace, Name: name} }
	lockMeta := meta(naming.StateLockLeaseName(o.suffix))
	lockMeta.Labels = runnerapi.StateLabels(o.suffix)
	stateMeta := meta(naming.StateSecretName(o.suffix))
	stateMeta.Labels = runnerapi.StateLabels(o.suffix)
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: meta(sa)},
		&rbacv1.Role{ObjectMeta: meta(sa), Rules: jobs.RunnerPolicyRules(o.suffix)},
		&rbacv1.RoleBinding{ObjectMeta: meta(sa), RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: floorNamespace, Name: sa}}},
		&corev1.Secret{ObjectMeta: stateMeta},
		&corev1.Secret{ObjectMeta: meta(naming.PlanSecretName(o.suffix))},
		&coordinationv1.Lease{ObjectMeta: lockMeta},
		&coordinationv1.Lease{ObjectMeta: meta(naming.RunLeaseName(o.suffix)), Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(o.job)}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("create %T %s: %w", obj, obj.GetName(), err)
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts(floorNamespace).CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(jobs.ChannelTokenExpirationSeconds)}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token of %s: %w", sa, err)
	}
	return o.writeFiles(tr.Status.Token)
}

// writeFiles lays out the object's folder: the module, the inputs a machine's Job receives
// (the captf variable with every contract field, the backend, the values to mask) and the
// token.
func (o *floorObject) writeFiles(token string) error {
	for _, d := range []string{"module", "inputs", "channel", "work", "home", "channel-home"} {
		if err := os.MkdirAll(filepath.Join(o.dir, d), 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	endpoint := map[string]any{"host": clusterName + "." + fleetNamespace + ".example.internal", "port": 6443}
	captf := map[string]any{
		inputs.FieldKind: infrav1.TerraformMachineKind, inputs.FieldName: o.name, inputs.FieldNamespace: floorNamespace,
		inputs.FieldClusterName: clusterName, inputs.FieldControlPlaneEndpoint: endpoint, inputs.FieldClusterNetwork: nil,
		inputs.FieldBootstrapData: bootstrapPayload, inputs.FieldFailureDomain: nil, inputs.FieldVersion: nil,
		inputs.FieldClusterOutputs: map[string]any{"control_plane_endpoint": endpoint},
	}
	vars, err := json.Marshal(map[string]any{"captf": captf})
	if err != nil {
		return fmt.Errorf("encode variables: %w", err)
	}
	sum := sha256.Sum256(vars)
	o.inputsHash = "sha256:" + hex.EncodeToString(sum[:])
	backend, err := json.Marshal(runnerapi.Backend{Namespace: floorNamespace, SecretSuffix: o.suffix})
	if err != nil {
		return fmt.Errorf("encode backend: %w", err)
	}
	redact, err := json.Marshal([]string{bootstrapPayload})
	if err != nil {
		return fmt.Errorf("encode redact list: %w", err)
	}
	for name, data := range map[string][]byte{
		filepath.Join("module", "main.tf"):              []byte(machineModule),
		filepath.Join("inputs", runnerapi.KeyVariables): vars,
		filepath.Join("inputs", runnerapi.KeyBackend):   backend,
		filepath.Join("inputs", runnerapi.KeyRedact):    redact,
		filepath.Join("channel-home", "token"):          []byte(token),
	} {
		if err := os.WriteFile(filepath.Join(o.dir, name), data, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// run runs the object's apply as the Job's pod runs it: the state channel first, then the
// runner; once the runner exited the channel gets SIGTERM, as the executor stops a sidecar.
func (o *floorObject) run(ctx context.Context, env floorEnv) error {
	pod := o.job + "-floor"
	chCmd := runnerapi.ChannelCommand(env.runner, runnerapi.ChannelInvocation{
		Dir: filepath.Join(o.dir, "channel"), Namespace: floorNamespace, Suffix: o.suffix, Job: o.job, RunLease: naming.RunLeaseName(o.suffix),
		OwnerKind: infrav1.TerraformMachineKind, OwnerName: o.name, OwnerUID: o.uid,
		TokenFile: filepath.Join(o.dir, "channel-home", "token"), CAFile: env.caFile,
		Operation: runnerapi.OperationApply, InputsHash: o.inputsHash,
	})
	channel := command(chCmd, filepath.Join(o.dir, "channel-home"),
		runnerapi.EnvServiceHost+"="+env.host, runnerapi.EnvServicePort+"="+env.port,
		runnerapi.EnvChannelPodName+"="+pod, runnerapi.EnvChannelPodNamespace+"="+floorNamespace)
	var chOut, runOut tail
	chOut.max, runOut.max = 16<<10, 16<<10
	channel.Stdout, channel.Stderr = &chOut, &chOut
	if err := channel.Start(); err != nil {
		return fmt.Errorf("start the channel: %w", err)
	}
	chDone := make(chan error, 1)
	go func() { chDone <- channel.Wait() }()

	result := filepath.Join(o.dir, "result.json")
	runCmd := runnerapi.Command(env.runner, runnerapi.Invocation{
		Operation: runnerapi.OperationApply, ModuleDir: filepath.Join(o.dir, "module"), InputsDir: filepath.Join(o.dir, "inputs"),
		WorkDir: filepath.Join(o.dir, "work"), ResultFile: result,
		LockTimeout: time.Duration(infrav1.JobPolicy{}.EffectiveLockTimeoutSeconds()) * time.Second,
		ChannelDir:  filepath.Join(o.dir, "channel"),
	})
	run := command(runCmd, filepath.Join(o.dir, "home"),
		"PATH="+filepath.Dir(env.tf)+string(os.PathListSeparator)+os.Getenv("PATH"), runnerapi.EnvBinary+"="+env.tf,
		runnerapi.EnvJobName+"="+o.job, runnerapi.EnvPodName+"="+pod)
	run.Stdout, run.Stderr = &runOut, &runOut
	runErr := runAndWait(ctx, run)
	chErr := stopChannel(channel, chDone)
	if runErr != nil {
		return fmt.Errorf("the runner: %w\n%s\nthe channel:\n%s", runErr, runOut.String(), chOut.String())
	}
	if chErr != nil {
		return fmt.Errorf("the channel: %w\n%s", chErr, chOut.String())
	}
	raw, err := os.ReadFile(result)
	if err != nil {
		return fmt.Errorf("read the result: %w", err)
	}
	res, err := runnerapi.ParseResult(raw)
	if err != nil {
		return fmt.Errorf("parse the result: %w", err)
	}
	if res.Outcome != runnerapi.OutcomeSucceeded {
		return fmt.Errorf("outcome %s: %s", res.Outcome, raw)
	}
	return nil
}

// command is a process of the floor: its own process group, killed if the bench dies, an
// environment of its own (nothing of the bench's), home as its home and working folder.
func command(argv []string, home string, env ...string) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append([]string{"HOME=" + home}, env...)
	cmd.Dir = home
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// runAndWait runs cmd to its end; when ctx ends first (another execution failed), it stops
// cmd and everything it started.
func runAndWait(ctx context.Context, cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		killTree(cmd.Process.Pid)
		return errors.Join(fmt.Errorf("stopped: %w", ctx.Err()), <-done)
	}
}

// stopChannel sends the channel SIGTERM and waits; after channelStopGrace it kills it.
func stopChannel(channel *exec.Cmd, done <-chan error) error {
	_ = channel.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		return err
	case <-time.After(channelStopGrace):
		killTree(channel.Process.Pid)
		return errors.Join(fmt.Errorf("did not exit within %s of SIGTERM", channelStopGrace), <-done)
	}
}

// killTree SIGKILLs the process groups of pid and of every descendant (the runner runs
// terraform in a group of its own).
func killTree(pid int) {
	pids := []int{pid}
	for i := 0; i < len(pids); i++ {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pids[i], pids[i]))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			var child int
			if _, err := fmt.Sscan(f, &child); err == nil {
				pids = append(pids, child)
			}
		}
	}
	for _, p := range pids {
		_ = syscall.Kill(-p, syscall.SIGKILL)
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}
