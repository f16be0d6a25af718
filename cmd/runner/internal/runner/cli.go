package runner

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"

	"github.com/captf/cluster-api-provider-terraform/cmd/runner/internal/channel"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

const usage = `usage:
  runner run --operation=<Apply|Destroy|Plan|Refresh|Drift|Restore> --module-dir=<dir>
             --inputs-dir=<dir> --work-dir=<dir> --result-file=<file> [--lock-timeout=300s]
             [--binary=<terraform or tofu>] [--channel-dir=<dir> [--channel-wait=60s]]
             [--plan-id=<id>] [--refresh-only] [--destroy-plan]
             [--target="replace <address>" | --target="import <address> <id>" |
              --target="forget <address>"]
  runner channel --dir=<dir> --namespace=<ns> --suffix=<suffix> --job=<job> --run-lease=<lease>
             --owner-kind=<kind> --owner-name=<name> --owner-uid=<uid>
             [--token-file=<file>] [--ca-file=<file>]
             [--operation=<op>] [--inputs-hash=<hash>] [--plan-id=<id>]
             [--state-lineage=<lineage>] [--refresh-only] [--destroy-plan] [--target=<target>]
  runner install <destination>
`

// Main is the runner's command line. It returns the process exit code (see runnerapi.Exit*).
func Main(ctx context.Context, args, environ []string, stdout, stderr io.Writer, signals <-chan os.Signal) int {
	out := &syncWriter{w: stdout}
	log := logr.FromSlogHandler(slog.NewTextHandler(out, nil)).WithName("runner")
	ctx = logr.NewContext(ctx, log)
	if len(args) == 0 {
		_, _ = fmt.Fprint(stderr, usage)
		return runnerapi.ExitBadInput
	}
	switch args[0] {
	case runnerapi.CommandInstall:
		if len(args) != 2 {
			_, _ = fmt.Fprint(stderr, usage)
			return runnerapi.ExitBadInput
		}
		if err := Install(args[1]); err != nil {
			log.Error(err, "install")
			return runnerapi.ExitInternal
		}
		log.Info("installed", "path", args[1])
		return runnerapi.ExitOK
	case runnerapi.CommandRun:
		cfg, err := parseRun(args[1:], stderr)
		if err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return runnerapi.ExitOK
			}
			_, _ = fmt.Fprintf(stderr, "runner: %v\n", err)
			return runnerapi.ExitBadInput
		}
		cfg.Environ, cfg.Stdout, cfg.Signals = environ, out, signals
		if self, err := os.Executable(); err == nil {
			cfg.CABundle = filepath.Join(filepath.Dir(self), CABundleName)
		}
		_, code := Run(ctx, cfg)
		return code
	case runnerapi.CommandChannel:
		return channel.Main(ctx, args[1:], environ, stderr, signals)
	case "-h", "--help", "help":
		_, _ = fmt.Fprint(stdout, usage)
		return runnerapi.ExitOK
	}
	_, _ = fmt.Fprintf(stderr, "runner: unknown command %q\n%s", args[0], usage)
	return runnerapi.ExitBadInput
}

func parseRun(args []string, stderr io.Writer) (Config, error) {
	var cfg Config
	fs := flag.NewFlagSet("runner run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Operation, runnerapi.FlagOperation, "", "operation to run")
	fs.StringVar(&cfg.ModuleDir, runnerapi.FlagModuleDir, "", "folder of the root module (read-only is fine)")
	fs.StringVar(&cfg.InputsDir, runnerapi.FlagInputsDir, runnerapi.InputsDir, "folder of the per-run inputs")
	fs.StringVar(&cfg.WorkDir, runnerapi.FlagWorkDir, runnerapi.WorkDir, "writable folder the module is copied to")
	fs.StringVar(&cfg.ResultFile, runnerapi.FlagResultFile, runnerapi.TerminationLog, "file the result document is written to")
	fs.DurationVar(&cfg.LockTimeout, runnerapi.FlagLockTimeout, 300*time.Second, "how long terraform waits for the state lock")
	fs.StringVar(&cfg.Binary, runnerapi.FlagBinary, "", "terraform or tofu binary (default: $CAPTF_TF_BINARY, else tofu, else terraform on PATH)")
	fs.StringVar(&cfg.ChannelDir, runnerapi.FlagChannelDir, "", "state channel folder: use the http backend on the channel (default: the kubernetes backend)")
	fs.DurationVar(&cfg.ChannelWait, runnerapi.FlagChannelWait, DefaultChannelWait, "how long to wait for the state channel")
	fs.StringVar(&cfg.PlanID, runnerapi.FlagPlanID, "", "Apply, Refresh or Destroy: apply this saved plan, fetched through the state channel")
	fs.BoolVar(&cfg.RefreshOnly, runnerapi.FlagRefreshOnly, false, "Plan: make a refresh-only plan, which a Refresh applies")
	fs.BoolVar(&cfg.DestroyPlan, runnerapi.FlagDestroyPlan, false, "Plan: make a destroy plan, which a Destroy applies")
	fs.StringVar(&cfg.Target, runnerapi.FlagTarget, "", `Apply or Plan: replace or import one resource ("replace <address>" or "import <address> <id>")`)
	if err := fs.Parse(args); err != nil {
		return cfg, fmt.Errorf("parse flags: %w", err)
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	return cfg, nil
}

// CABundleName is the CA bundle `runner install` puts beside the runner when the image it runs
// in (the manager image) has one.
const CABundleName = "ca-certificates.crt"

// Install copies the running executable to dest (mode 0755), through a temporary file and a
// rename so a reader never sees half a binary. It also copies the image's CA bundle, if any,
// beside it (CABundleName), for runtime images that carry none.
func Install(dest string) error {
	if err := installFile(dest, 0o755, ""); err != nil {
		return err
	}
	for _, p := range systemCABundles {
		if _, err := os.Stat(p); err == nil {
			return installFile(filepath.Join(filepath.Dir(dest), CABundleName), 0o644, p)
		}
	}
	return nil
}

// writeFrom writes what r reads to the file at path, created or truncated with mode perm.
func writeFrom(path string, perm os.FileMode, r io.Reader) error {
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := io.Copy(out, r); err != nil {
		_ = out.Close()
		return fmt.Errorf("copy to %s: %w", path, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// installFile copies src (empty: the running executable) to dest.
func installFile(dest string, mode os.FileMode, src string) error {
	if src == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find own executable: %w", err)
		}
		if src, err = filepath.EvalSymlinks(self); err != nil {
			return fmt.Errorf("resolve own executable: %w", err)
		}
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open %s: %w", src, err)
	}
	defer func() { _ = in.Close() }()
	tmp := dest + ".tmp"
	if err := writeFrom(tmp, mode, in); err != nil {
		return err
	}
	if err := os.Rename(tmp, dest); err != nil {
		return fmt.Errorf("rename to %s: %w", dest, err)
	}
	return nil
}
