//go:build linux

package executor

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

func testWorker(t *testing.T) *worker {
	t.Helper()
	dir := t.TempDir()
	e := &Executor{opts: Options{RunnerBinary: "/opt/bin/runner", TerraformBinary: "/usr/bin/tofu", WorkDir: dir, NodeName: DefaultNodeName}}
	pod := objects.Pod("ns", "job-abcde").Obj()
	return newWorker(e, pod)
}

func runnerContainer(moduleMount bool) *corev1.Container {
	inv := runnerapi.Invocation{Operation: "Apply", ModuleDir: ".", InputsDir: runnerapi.InputsDir, WorkDir: runnerapi.WorkDir,
		ResultFile: runnerapi.TerminationLog, LockTimeout: 300 * time.Second}
	mounts := []corev1.VolumeMount{
		{Name: "inputs", MountPath: runnerapi.InputsDir},
		{Name: "work", MountPath: runnerapi.WorkDir},
		{Name: "runner", MountPath: runnerapi.BinDir},
	}
	if moduleMount {
		inv.ModuleDir = runnerapi.ModuleDir
		mounts = append(mounts, corev1.VolumeMount{Name: "module", MountPath: runnerapi.ModuleDir})
	}
	return &corev1.Container{Name: "terraform", Image: "tofu:minimal", Command: runnerapi.Command(runnerapi.RunnerPath, inv),
		VolumeMounts: mounts, TerminationMessagePath: runnerapi.TerminationLog}
}

func TestCommandRewritesMountsAndTheTerminationLog(t *testing.T) {
	w := testWorker(t)
	c := runnerContainer(true)
	argv, err := w.command(c)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		w.volumeDir("runner") + "/runner", "run", "--operation=Apply",
		"--module-dir=" + w.volumeDir("module"),
		"--inputs-dir=" + w.volumeDir("inputs"),
		"--work-dir=" + w.volumeDir("work"),
		"--result-file=" + w.terminationFile(c),
		"--lock-timeout=300s",
	}
	if strings.Join(argv, " ") != strings.Join(want, " ") {
		t.Fatalf("command\n got %q\nwant %q", argv, want)
	}
}

func TestTheInitContainerCopiesTheRunnerBinary(t *testing.T) {
	w := testWorker(t)
	c := &corev1.Container{Name: "install-runner", Command: runnerapi.InstallCommand(),
		VolumeMounts: []corev1.VolumeMount{{Name: "runner", MountPath: runnerapi.BinDir}}}
	argv, err := w.command(c)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/bin/runner", "install", w.volumeDir("runner") + "/runner"}
	if strings.Join(argv, " ") != strings.Join(want, " ") {
		t.Fatalf("command\n got %q\nwant %q", argv, want)
	}
}

func TestAnImageModuleIsRefusedNotRunBeforeItsImageIsPulled(t *testing.T) {
	w := testWorker(t)
	_, err := w.command(runnerContainer(false))
	if !errors.Is(err, errUnsupported) || !strings.Contains(err.Error(), "was not pulled") {
		t.Fatalf("want an unsupported error saying the image was not pulled, got %v", err)
	}
}

// An image module's --module-dir is the image's: relative to its working directory (the
// container's working folder), or absolute inside the unpacked image.
func TestAnImageModuleRunsFromItsUnpackedImage(t *testing.T) {
	for _, tc := range []struct{ dir, want string }{
		{".", "."},
		{"modules/net", "modules/net"},
		{"/opt/modules/net", "/pods/ns/job/image/rootfs/opt/modules/net"},
	} {
		w := testWorker(t)
		c := runnerContainer(false)
		for i, a := range c.Command {
			if strings.HasPrefix(a, "--module-dir=") {
				c.Command[i] = "--module-dir=" + tc.dir
			}
		}
		w.spec.Spec.Containers = []corev1.Container{*c}
		w.image = &moduleImage{root: "/pods/ns/job/image/rootfs", workingDir: "/pods/ns/job/image/rootfs/workspace"}
		argv, err := w.command(c)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(argv, "--module-dir="+tc.want) {
			t.Errorf("module dir %s: command %q, want --module-dir=%s", tc.dir, argv, tc.want)
		}
	}
}

func TestAProgramOfTheImageIsRefused(t *testing.T) {
	w := testWorker(t)
	_, err := w.command(&corev1.Container{Name: "c", Image: "busybox", Command: []string{"/bin/sh", "-c", "true"}})
	if !errors.Is(err, errUnsupported) {
		t.Fatalf("want an unsupported error, got %v", err)
	}
}

func TestWriteKeysProjectsItemsAndModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "v")
	mode := int32(0o440)
	data := map[string][]byte{"a": []byte("1"), "b": []byte("2")}
	if err := writeKeys(dir, data, nil, &mode); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, "a"))
	if err != nil || st.Mode().Perm() != 0o440 {
		t.Fatalf("a: %v %v", st, err)
	}
	if err := writeKeys(dir, data, []corev1.KeyToPath{{Key: "b", Path: "sub/b.txt"}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
		t.Fatalf("a projection with items holds only the items: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "sub", "b.txt")); err != nil || string(b) != "2" {
		t.Fatalf("b: %q %v", b, err)
	}
	if err := writeKeys(dir, data, []corev1.KeyToPath{{Key: "c", Path: "c"}}, nil); !errors.Is(err, errWaiting) {
		t.Fatalf("a missing key waits, got %v", err)
	}
}

// A container that ignores SIGTERM and leaves a child in the background is killed whole after
// the grace period: nothing of its session survives.
func TestStoppingKillsTheWholeContainerAfterTheGrace(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("no sh: %v", err)
	}
	w := testWorker(t)
	w.e.opts.RunnerBinary = sh
	marker := filepath.Join(t.TempDir(), "child.pid")
	script := "trap '' TERM; sleep 300 & echo $! > " + marker + "; wait"
	c := &corev1.Container{Name: "c", Command: []string{runnerapi.RunnerInImage, "-c", script}}
	out := &lineWriter{console: os.Stderr, file: &strings.Builder{}}
	p, err := w.startProcess(context.Background(), c, nil, out)
	if err != nil {
		t.Fatal(err)
	}
	go w.await(context.Background(), p)
	var child int
	deadline := time.Now().Add(10 * time.Second)
	for child == 0 && time.Now().Before(deadline) {
		if b, rerr := os.ReadFile(marker); rerr == nil && len(strings.TrimSpace(string(b))) > 0 {
			child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if child == 0 {
		t.Fatal("the container's child never started")
	}
	began := time.Now()
	w.terminate(300*time.Millisecond, "test")
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the container was not killed after the grace")
	}
	code, reason := p.result()
	if reason != "Killed" || code != 137 {
		t.Fatalf("want Killed/137, got %s/%d", reason, code)
	}
	if took := time.Since(began); took < 300*time.Millisecond {
		t.Fatalf("killed before the grace ended (%s)", took)
	}
	if processAlive(child) {
		t.Fatalf("the container's child %d survived", child)
	}
}

// processAlive reports whether pid runs (a zombie does not).
func processAlive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && len(stat) > i+2 && stat[i+2] != 'Z'
}

// A path into a volume is rewritten only for the containers that mount that volume: the main
// container gets no way to the sidecar's token, even when it names the in-pod path.
func TestOnlyTheContainersThatMountAVolumeGetItsPath(t *testing.T) {
	w := testWorker(t)
	w.spec.Spec.Volumes = []corev1.Volume{{Name: "token"}, {Name: "channel"}}
	w = newWorker(w.e, w.spec)
	const tokenFile = "/var/run/secrets/captf.io/serviceaccount/token"
	sidecar := &corev1.Container{Name: "state-channel", Command: []string{runnerapi.RunnerInImage, "channel", "--token-file=" + tokenFile},
		VolumeMounts: []corev1.VolumeMount{{Name: "token", MountPath: "/var/run/secrets/captf.io/serviceaccount"}, {Name: "channel", MountPath: "/captf/channel"}}}
	main := &corev1.Container{Name: "terraform", Command: []string{runnerapi.RunnerInImage, "run", "--peek=" + tokenFile, "/captf/channel/address"},
		Env:          []corev1.EnvVar{{Name: "PEEK", Value: tokenFile}, {Name: "CHANNEL", Value: "/captf/channel"}},
		VolumeMounts: []corev1.VolumeMount{{Name: "channel", MountPath: "/captf/channel"}}}
	w.spec.Spec.InitContainers, w.spec.Spec.Containers = []corev1.Container{*sidecar}, []corev1.Container{*main}
	argv, err := w.command(sidecar)
	if err != nil {
		t.Fatal(err)
	}
	if want := "--token-file=" + w.volumeDir("token") + "/token"; argv[2] != want {
		t.Fatalf("the sidecar's token path: got %q, want %q", argv[2], want)
	}
	argv, err = w.command(main)
	if err != nil {
		t.Fatal(err)
	}
	if argv[2] != "--peek="+tokenFile || argv[3] != w.volumeDir("channel")+"/address" {
		t.Fatalf("the main container's arguments: %q", argv)
	}
	env, err := w.containerEnv(context.Background(), main)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"PEEK=" + tokenFile, "CHANNEL=" + w.volumeDir("channel")}; strings.Join(env, " ") != strings.Join(want, " ") {
		t.Fatalf("the main container's env: got %q, want %q", env, want)
	}
	if strings.HasPrefix(w.volumeDir("token"), w.volumeDir("channel")) || filepath.Base(w.volumeDir("token")) == "token" {
		t.Fatalf("volume folders must be distinct and not guessable: %s %s", w.volumeDir("token"), w.volumeDir("channel"))
	}
}

// Startup probes reach the loopback address: an httpGet probe succeeds on a 2xx or 3xx answer
// and fails otherwise, a tcpSocket probe on a listening port, a named port is the container's.
func TestProbesReachTheLoopbackAddress(t *testing.T) {
	w := testWorker(t)
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ready" || r.Header.Get("X-Probe") != "yes" {
			rw.WriteHeader(http.StatusNotFound)
			return
		}
		rw.WriteHeader(status)
	}))
	defer srv.Close()
	_, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	c := &corev1.Container{Name: "sidecar", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}
	get := &corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http"),
		HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Probe", Value: "yes"}}}}
	ctx := context.Background()
	if err := w.probe(ctx, c, get, nil, time.Second); err != nil {
		t.Fatalf("httpGet on a ready server: %v", err)
	}
	status = http.StatusServiceUnavailable
	if err := w.probe(ctx, c, get, nil, time.Second); err == nil {
		t.Fatal("httpGet answered 503 must fail")
	}
	tcp := &corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}
	if err := w.probe(ctx, c, tcp, nil, time.Second); err != nil {
		t.Fatalf("tcpSocket on a listening port: %v", err)
	}
	srv.Close()
	if err := w.probe(ctx, c, tcp, nil, time.Second); err == nil {
		t.Fatal("tcpSocket on a closed port must fail")
	}
	grpc := &corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: int32(port)}}
	if err := w.probe(ctx, c, grpc, nil, time.Second); !errors.Is(err, errUnsupported) {
		t.Fatalf("a gRPC probe is refused, got %v", err)
	}
	image := &corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/true"}}}
	if err := w.probe(ctx, c, image, nil, time.Second); !errors.Is(err, errUnsupported) {
		t.Fatalf("an exec probe running a program of the image is refused, got %v", err)
	}
}
