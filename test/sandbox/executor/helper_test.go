//go:build linux

package executor

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv, set in a test Pod's containers, turns the test binary (the executor's "runner")
// into a small program playing the runner's parts: install, a state channel sidecar, the main
// container. The first argument names the part.
const helperEnv = "EXECUTOR_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" && len(os.Args) > 1 {
		os.Exit(helperMain(os.Args[1], os.Args[2:]))
	}
	os.Exit(m.Run())
}

// helperResult is what the main container writes to its termination message.
type helperResult struct {
	Problems []string `json:"problems,omitempty"`
	// Whoami is the user the sidecar's token authenticates as (by a SelfSubjectReview).
	Whoami string `json:"whoami,omitempty"`
	// SidecarEnv is the POD_NAME/POD_NAMESPACE the sidecar saw.
	SidecarEnv string `json:"sidecarEnv,omitempty"`
	// Env holds the KUBE* variables the container saw.
	Env []string `json:"env,omitempty"`
	// SidecarReady says whether the sidecar's startup probe file existed when the main
	// container started.
	SidecarReady bool `json:"sidecarReady"`
	// Module maps each file of the module folder to its content; Cwd is the working folder
	// and Binary the CAPTF_TF_BINARY the main container saw (an image module's run).
	Module map[string]string `json:"module,omitempty"`
	Cwd    string            `json:"cwd,omitempty"`
	Binary string            `json:"binary,omitempty"`
}

func helperMain(part string, args []string) int {
	fs := flag.NewFlagSet(part, flag.ContinueOnError)
	dir := fs.String("dir", "", "the channel folder shared by the sidecar and the main container")
	tokenFile := fs.String("token-file", "", "the sidecar's token")
	caFile := fs.String("ca-file", "", "the API server's CA")
	result := fs.String("result-file", "", "where the main container writes its result")
	crashOnce := fs.Bool("crash-once", false, "the sidecar's first run exits 3 at once")
	readyAfter := fs.Duration("ready-after", 0, "the sidecar writes <dir>/ready after this long")
	release := fs.String("release", "", "on SIGTERM, exit only once this file exists")
	moduleDir := fs.String("module-dir", "", "the module folder (an image module: relative to the working directory)")
	if part != "install" {
		if err := fs.Parse(args); err != nil {
			return 2
		}
	}
	switch part {
	case "install":
		return install(args[0])
	case "channel":
		return channel(*dir, *tokenFile, *caFile, *crashOnce, *readyAfter)
	case "probe":
		if _, err := os.Stat(filepath.Join(*dir, "ready")); err != nil {
			return 1
		}
		return 0
	case "run":
		if *moduleDir != "" {
			return reportModule(*moduleDir, *result)
		}
		return runMain(*dir, *result)
	case "env":
		// Report the KUBE* environment, then exit.
		return writeResult(*result, helperResult{Env: kubeEnv()}, nil)
	case "wait":
		return waitForTerm(*dir, *release)
	case "talk":
		return talk(*release)
	}
	fmt.Fprintln(os.Stderr, "unknown part", part)
	return 2
}

func install(dest string) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b, err := os.ReadFile(self)
	if err == nil {
		err = os.WriteFile(dest, b, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// channel plays the state channel: it proves its token with a SelfSubjectReview, listens on
// an ephemeral loopback port, writes the address into dir and answers /whoami until SIGTERM.
func channel(dir, tokenFile, caFile string, crashOnce bool, readyAfter time.Duration) int {
	if crashOnce {
		marker := filepath.Join(dir, "crashed")
		if _, err := os.Stat(marker); os.IsNotExist(err) {
			_ = os.WriteFile(marker, nil, 0o600)
			fmt.Println("sidecar: first run, exiting 3")
			return 3
		}
	}
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	who, err := selfSubjectReview(tokenFile, caFile)
	if err != nil {
		who = "error: " + err.Error()
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/whoami", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, who) })
	mux.HandleFunc("/env", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, os.Getenv("POD_NAMESPACE")+"/"+os.Getenv("POD_NAME"))
	})
	go func() { _ = http.Serve(l, mux) }()
	if err := writeAtomic(filepath.Join(dir, "address"), l.Addr().String()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("sidecar: serving on", l.Addr().String(), "as", who)
	if readyAfter > 0 {
		go func() {
			time.Sleep(readyAfter) // the slow start the startup probe waits for
			_ = writeAtomic(filepath.Join(dir, "ready"), "yes")
		}()
	}
	<-terms
	_ = writeAtomic(filepath.Join(dir, "sidecar-stopped"), time.Now().Format(time.RFC3339Nano))
	fmt.Println("sidecar: SIGTERM, stopping")
	return 0
}

// selfSubjectReview asks the API server (KUBERNETES_SERVICE_HOST/PORT) who the token is.
func selfSubjectReview(tokenFile, caFile string) (string, error) {
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		return "", err
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return "", err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return "", errors.New("no CA in the ca file")
	}
	host := net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
	body := `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`
	req, err := http.NewRequest(http.MethodPost, "https://"+host+"/apis/authentication.k8s.io/v1/selfsubjectreviews", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var review struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal(b, &review); err != nil {
		return "", err
	}
	return review.Status.UserInfo.Username, nil
}

// runMain plays the Terraform container: it must hold no credential and no KUBE* variable,
// and reaches the sidecar through the address in the shared folder.
func runMain(dir, result string) int {
	res := helperResult{Env: kubeEnv()}
	_, err := os.Stat(filepath.Join(dir, "ready"))
	res.SidecarReady = err == nil
	var problems []string
	for _, kv := range res.Env {
		if strings.HasPrefix(kv, "KUBE_") || strings.HasPrefix(kv, "KUBECONFIG=") {
			problems = append(problems, "credential variable "+kv)
		}
	}
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" || os.Getenv("KUBERNETES_SERVICE_PORT") == "" {
		problems = append(problems, "no KUBERNETES_SERVICE_HOST/PORT")
	}
	for _, a := range os.Args {
		if strings.Contains(a, "token") {
			problems = append(problems, "an argument names a token: "+a)
		}
	}
	if _, err := os.Stat("/var/run/secrets/captf.io/serviceaccount/token"); err == nil {
		problems = append(problems, "a token at the in-pod path")
	}
	// Without a startup probe the sidecar counts as started once its process runs: like the
	// runner, wait for the address it writes.
	var addr []byte
	for deadline := time.Now().Add(30 * time.Second); ; {
		if addr, err = os.ReadFile(filepath.Join(dir, "address")); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling a file the sidecar writes
	}
	if err != nil {
		problems = append(problems, "no channel address: "+err.Error())
	} else {
		res.Whoami = get(string(addr), "/whoami", &problems)
		res.SidecarEnv = get(string(addr), "/env", &problems)
	}
	res.Problems = problems
	return writeResult(result, res, problems)
}

// reportModule reports what an image module's main container sees: the files of its module
// folder (relative paths resolved against its working folder, as the runner does), its
// working folder and the terraform it would run.
func reportModule(dir, result string) int {
	res := helperResult{Module: map[string]string{}, Binary: os.Getenv("CAPTF_TF_BINARY")}
	res.Cwd, _ = os.Getwd()
	var problems []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		res.Module[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		problems = append(problems, "read the module: "+err.Error())
	}
	res.Problems = problems
	return writeResult(result, res, problems)
}

func get(addr, path string, problems *[]string) string {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + path)
	if err != nil {
		*problems = append(*problems, "channel: "+err.Error())
		return ""
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func kubeEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "KUBE") {
			out = append(out, kv)
		}
	}
	return out
}

func writeResult(path string, res helperResult, problems []string) int {
	b, _ := json.Marshal(res)
	if path != "" {
		_ = os.WriteFile(path, b, 0o600)
	}
	fmt.Println("main:", string(b))
	if len(problems) > 0 {
		return 1
	}
	return 0
}

// waitForTerm runs until SIGTERM, marks it in dir, and exits once release exists (when set).
func waitForTerm(dir, release string) int {
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	_ = writeAtomic(filepath.Join(dir, "started"), "yes")
	<-terms
	_ = writeAtomic(filepath.Join(dir, "terminated"), "yes")
	for release != "" {
		if _, err := os.Stat(release); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond) // waiting for the test's go-ahead, a file
	}
	return 143
}

// talkLong is the length of the line talk writes last: longer than one entry of a container log.
const talkLong = 20000

// talk writes a line to stdout and one to stderr, waits until release exists, then writes
// another line and a long one of talkLong x's, and exits 0.
func talk(release string) int {
	fmt.Println("first line")
	fmt.Fprintln(os.Stderr, "to stderr")
	for {
		if _, err := os.Stat(release); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond) // waiting for the test's go-ahead, a file
	}
	fmt.Println("second line")
	fmt.Println(strings.Repeat("x", talkLong))
	return 0
}

func writeAtomic(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
