package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// managerFlag is a flag as the manager's -h prints it.
type managerFlag struct {
	name, typ, def string
	hasDef         bool
}

var (
	flagLine    = regexp.MustCompile(`^  -([a-z0-9-]+)(?: (\S+))?$`)
	defaultText = regexp.MustCompile(`\(default (.*)\)$`)
)

// managerFlags builds cmd/manager and parses its usage.
func managerFlags() ([]managerFlag, error) {
	bin := filepath.Join(GinkgoT().TempDir(), "manager")
	if _, err := run(repo, nil, "go", "build", "-o", bin, "./cmd/manager"); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-h")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	var exit *exec.ExitError
	if err := cmd.Run(); err != nil && !errors.As(err, &exit) {
		return nil, fmt.Errorf("run manager -h: %w", err)
	}
	var flags []managerFlag
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		line := sc.Text()
		if m := flagLine.FindStringSubmatch(line); m != nil {
			flags = append(flags, managerFlag{name: m[1], typ: m[2]})
			continue
		}
		if len(flags) > 0 && strings.HasPrefix(line, "    \t") {
			if m := defaultText.FindStringSubmatch(line); m != nil {
				f := &flags[len(flags)-1]
				f.def, f.hasDef = strings.Trim(m[1], `"`), true
			}
		}
	}
	if len(flags) == 0 {
		return nil, fmt.Errorf("no flags in the manager's usage:\n%s", out.String())
	}
	return flags, nil
}

// documentedFlags reads the flag table of docs/configuration.md: flag -> default cell.
func documentedFlags(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| `--") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 {
			return nil, fmt.Errorf("%s: short row %q", path, line)
		}
		name := strings.Trim(strings.TrimSpace(cells[0]), "`")
		out[strings.TrimPrefix(name, "--")] = strings.TrimSpace(cells[1])
	}
	return out, nil
}

var _ = Describe("docs/configuration.md", func() {
	It("documents every manager flag with its default", func() {
		flags, err := managerFlags()
		Expect(err).NotTo(HaveOccurred())
		docs, err := documentedFlags(filepath.Join(repo, "docs", "configuration.md"))
		Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, f := range flags {
			names = append(names, f.name)
			cell, ok := docs[f.name]
			Expect(ok).To(BeTrue(), "flag --%s is not documented in docs/configuration.md", f.name)
			switch {
			case f.hasDef:
				Expect(cell).To(Equal("`"+f.def+"`"), "default of --%s", f.name)
			case f.typ == "": // a bool flag whose default is false
				Expect(cell).To(Equal("`false`"), "default of --%s", f.name)
			default:
				Expect(cell).To(Equal("none"), "--%s has no default", f.name)
			}
		}
		for name := range docs {
			Expect(names).To(ContainElement(name), "docs/configuration.md documents --%s, which the manager does not have", name)
		}
	})
})

// dockerfile is the parts of the Dockerfile the checks need.
type dockerfile struct {
	goVersion   string
	buildCopies []string          // sources the build stage copies from the context
	finalCopies map[string]string // destination -> source, from the build stage
	user        string
	entrypoint  string
}

func parseDockerfile(path string) (*dockerfile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	d := &dockerfile{finalCopies: map[string]string{}}
	stage := 0
	for _, raw := range strings.Split(string(b), "\n") {
		line := strings.TrimSpace(raw)
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(line, "#") {
			continue
		}
		switch strings.ToUpper(fields[0]) {
		case "ARG":
			if v, ok := strings.CutPrefix(fields[1], "GO_VERSION="); ok {
				d.goVersion = v
			}
		case "FROM":
			stage++
		case "COPY":
			args := slices.DeleteFunc(slices.Clone(fields[1:]), func(s string) bool { return strings.HasPrefix(s, "--") })
			from := slices.ContainsFunc(fields[1:], func(s string) bool { return strings.HasPrefix(s, "--from=") })
			if stage == 1 && !from {
				d.buildCopies = append(d.buildCopies, args[:len(args)-1]...)
			}
			if stage == 2 && from && len(args) == 2 {
				d.finalCopies[args[1]] = args[0]
			}
		case "USER":
			d.user = fields[1]
		case "ENTRYPOINT":
			d.entrypoint = strings.Trim(strings.Join(fields[1:], ""), `[]"`)
		}
	}
	return d, nil
}

var _ = Describe("the Dockerfile", func() {
	It("builds the manager and the runner into the paths the Deployment and the Jobs use", func() {
		d, err := parseDockerfile(filepath.Join(repo, "Dockerfile"))
		Expect(err).NotTo(HaveOccurred())

		// The Go version is the one go.mod asks for.
		mod, err := os.ReadFile(filepath.Join(repo, "go.mod"))
		Expect(err).NotTo(HaveOccurred())
		goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
		Expect(goLine).NotTo(BeNil())
		Expect(d.goVersion).To(Equal(string(goLine[1])))

		// Every package of this module the two binaries import is copied into the build.
		out, err := run(repo, nil, "go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./cmd/manager", "./cmd/runner")
		Expect(err).NotTo(HaveOccurred())
		const module = "github.com/captf/cluster-api-provider-terraform/"
		for _, pkg := range strings.Fields(string(out)) {
			rel, ok := strings.CutPrefix(pkg, module)
			if !ok {
				continue
			}
			top := strings.SplitN(rel, "/", 2)[0] + "/"
			Expect(d.buildCopies).To(ContainElement(top), "the build stage does not copy %s, which %s needs", top, pkg)
		}
		Expect(d.buildCopies).To(ContainElements("go.mod", "go.sum"))
		for _, src := range d.buildCopies {
			_, err := os.Stat(filepath.Join(repo, src))
			Expect(err).NotTo(HaveOccurred(), "the Dockerfile copies %s, which does not exist", src)
		}

		// The Jobs' init container runs the runner from the manager's image.
		Expect(d.finalCopies).To(HaveKeyWithValue(runnerapi.RunnerInImage, "/out/runner"))
		all, err := kustomizeBuild("config/default")
		Expect(err).NotTo(HaveOccurred())
		dep, c, err := managerDeployment(all)
		Expect(err).NotTo(HaveOccurred())
		Expect(d.finalCopies).To(HaveKeyWithValue(c.Command[0], "/out/manager"))
		Expect(d.entrypoint).To(Equal(c.Command[0]))
		// A numeric non-root user, the one the Deployment runs as.
		Expect(d.user).To(Equal(fmt.Sprintf("%d:%d", *dep.Spec.Template.Spec.SecurityContext.RunAsUser, *dep.Spec.Template.Spec.SecurityContext.RunAsGroup)))
		Expect(d.user).NotTo(HavePrefix("0"))
	})
})
