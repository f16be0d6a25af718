package runner

// A fake terraform: the test binary runs it instead of the tests when FAKE_TF_RECORD is set.
// It records each invocation as a JSON line and behaves as the FAKE_TF_* variables say.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakePlanFile is what the fake writes for plan -out.
const fakePlanFile = "fake plan file"

// fakeBlockLimit bounds how long a blocking fake waits for a signal.
const fakeBlockLimit = 20 * time.Second

type fakeCall struct {
	Args   []string          `json:"args,omitempty"`
	Dir    string            `json:"dir,omitempty"`
	Pgid   int               `json:"pgid,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
	Event  string            `json:"event,omitempty"`
	Signal string            `json:"signal,omitempty"`
}

func TestMain(m *testing.M) {
	if os.Getenv("FAKE_TF_RECORD") != "" {
		os.Exit(fakeTerraform(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func record(c fakeCall) {
	f, err := os.OpenFile(os.Getenv("FAKE_TF_RECORD"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake: record:", err)
		os.Exit(99)
	}
	defer func() { _ = f.Close() }()
	b, _ := json.Marshal(c)
	_, _ = f.Write(append(b, '\n'))
}

func fakeTerraform(args []string) int {
	// Listen before recording, so a test that waits for "started" can signal at once.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	dir, _ := os.Getwd()
	env := map[string]string{}
	for _, k := range []string{"TF_WORKSPACE", "TF_DATA_DIR", "TF_CLI_ARGS", "TF_CLI_ARGS_apply", "TF_IN_AUTOMATION", "TF_INPUT", "CHECKPOINT_DISABLE", "TMPDIR",
		"KUBE_HOST", "KUBE_TOKEN", "KUBE_CTX", "KUBE_PROXY_URL", "KUBE_NAMESPACE", "KUBE_CONFIG_PATH", "KUBECONFIG",
		"TF_HTTP_PASSWORD", "TF_HTTP_ADDRESS", "TF_HTTP_LOCK_ADDRESS", "TF_HTTP_UNLOCK_ADDRESS", "TF_HTTP_UPDATE_METHOD", "TF_HTTP_LOCK_METHOD",
		"TF_HTTP_UNLOCK_METHOD", "TF_HTTP_USERNAME"} {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	pgid, _ := syscall.Getpgid(0)
	record(fakeCall{Args: args, Dir: dir, Pgid: pgid, Env: env})
	cmd := args[0]
	if cmd == "state" && len(args) > 1 {
		cmd = "state-" + args[1]
	}
	if cmd == "show" && len(args) > 1 && args[1] == "-json" {
		cmd = "show-json"
	}
	if s := os.Getenv("FAKE_TF_STDOUT"); s != "" {
		fmt.Println(s)
	}
	if os.Getenv("FAKE_TF_BLOCK") == cmd {
		record(fakeCall{Event: "started"})
		var sig os.Signal
		select {
		case sig = <-sigs:
		case <-time.After(fakeBlockLimit):
			// A safety net so a runner that never forwards fails its test instead of hanging it.
			record(fakeCall{Event: "no-signal"})
			return 4
		}
		record(fakeCall{Event: "signal", Signal: sig.String()})
		fmt.Fprintln(os.Stderr, "Interrupt received. Gracefully shutting down...")
		if release := os.Getenv("FAKE_TF_RELEASE"); release != "" {
			for {
				if _, err := os.Stat(release); err == nil {
					break
				}
				select {
				case sig := <-sigs:
					// A real terraform exits at once on a second interrupt.
					record(fakeCall{Event: "signal", Signal: sig.String()})
					return 3
				case <-time.After(5 * time.Millisecond):
				}
			}
		}
		return 1
	}
	if os.Getenv("FAKE_TF_FAIL") == cmd {
		if s := os.Getenv("FAKE_TF_STDERR"); s != "" {
			fmt.Fprint(os.Stderr, s)
		}
		code, _ := strconv.Atoi(os.Getenv("FAKE_TF_FAIL_CODE"))
		if code == 0 {
			code = 1
		}
		return code
	}
	switch cmd {
	case "init":
		var o struct {
			Terraform struct {
				Backend map[string]map[string]any `json:"backend"`
			} `json:"terraform"`
		}
		b, err := os.ReadFile(filepath.Join(dir, BackendOverrideFile))
		if err == nil {
			err = json.Unmarshal(b, &o)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake init:", err)
			return 1
		}
		typ := "kubernetes"
		cfg := o.Terraform.Backend["kubernetes"]
		if http, ok := o.Terraform.Backend["http"]; ok {
			// Like terraform: the record lists every setting, null unless the configuration
			// or -backend-config set it; TF_HTTP_* variables are never recorded.
			typ, cfg = "http", map[string]any{}
			for _, k := range []string{"address", "lock_address", "unlock_address", "update_method", "lock_method", "unlock_method",
				"username", "password", "retry_max", "skip_cert_verification"} {
				cfg[k] = nil
			}
			for k, v := range http {
				cfg[k] = v
			}
			for _, a := range args {
				if kv, ok := strings.CutPrefix(a, "-backend-config="); ok {
					k, v, _ := strings.Cut(kv, "=")
					cfg[k] = v
				}
			}
		}
		switch os.Getenv("FAKE_TF_INIT_BACKEND") {
		case "elsewhere":
			cfg["namespace"] = "elsewhere"
			cfg["address"] = "http://127.0.0.1:1/state/elsewhere/x"
		case "s3":
			typ = "s3"
		}
		rec, _ := json.Marshal(map[string]any{"version": 3, "backend": map[string]any{"type": typ, "config": cfg}})
		_ = os.MkdirAll(filepath.Join(dir, ".terraform"), 0o755)
		if err := os.WriteFile(filepath.Join(dir, ".terraform", "terraform.tfstate"), rec, 0o644); err != nil {
			return 1
		}
	case "plan":
		for _, a := range args {
			if out, ok := strings.CutPrefix(a, "-out="); ok {
				if err := os.WriteFile(out, []byte(fakePlanFile), 0o600); err != nil {
					return 1
				}
			}
		}
		code, _ := strconv.Atoi(os.Getenv("FAKE_TF_PLAN_EXIT"))
		return code
	case "show-json":
		doc := os.Getenv("FAKE_TF_SHOW_JSON")
		if doc == "" {
			doc = `{"format_version":"1.2","resource_changes":[]}`
		}
		fmt.Println(doc)
	case "show":
		if p := os.Getenv("FAKE_TF_SHOW_TEXT_FILE"); p != "" {
			b, _ := os.ReadFile(p)
			_, _ = os.Stdout.Write(b)
		}
	case "apply":
		// An apply of a saved plan reads it.
		if last := args[len(args)-1]; !strings.HasPrefix(last, "-") {
			b, err := os.ReadFile(last)
			if err != nil {
				fmt.Fprintln(os.Stderr, "fake apply:", err)
				return 1
			}
			if p := os.Getenv("FAKE_TF_APPLIED"); p != "" {
				_ = os.WriteFile(p, b, 0o644)
			}
		}
	case "state-pull":
		if p := os.Getenv("FAKE_TF_PULL"); p != "" {
			b, _ := os.ReadFile(p)
			_, _ = os.Stdout.Write(b)
		}
	case "state-push":
		b, err := os.ReadFile(args[len(args)-1])
		if err != nil {
			return 1
		}
		if err := os.WriteFile(os.Getenv("FAKE_TF_PUSHED"), b, 0o644); err != nil {
			return 1
		}
	}
	return 0
}
