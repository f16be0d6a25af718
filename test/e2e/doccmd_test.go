package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"

	"github.com/captf/cluster-api-provider-terraform/test/doccmd"
)

// The pages' commands (test/doccmd) as a user runs them: read from the page, run through sh in
// a folder, with the environment the page's export lines build. A whole run of the suite checks
// that every spec doccmd.Fates names ran its commands.

// docRuns records which spec ran which command of a page.
var docRuns = struct {
	sync.Mutex
	by map[doccmd.Key]map[string]bool
}{by: map[doccmd.Key]map[string]bool{}}

// recordDocRun records that spec ran the command k.
func recordDocRun(k doccmd.Key, spec string) {
	docRuns.Lock()
	defer docRuns.Unlock()
	if docRuns.by[k] == nil {
		docRuns.by[k] = map[string]bool{}
	}
	docRuns.by[k][spec] = true
}

// docShell runs a page's commands as a terminal does: through sh, in dir, with env, where an
// export line changes env for the commands after it.
type docShell struct {
	dir string
	env []string
}

// docResult is one command run: the text run, its output (out: stdout then stderr) and exit
// code.
type docResult struct {
	cmd                 doccmd.Command
	text                string
	out, stdout, stderr string
	code                int
}

// newDocShell is a shell in dir (PWD is dir) with the process's environment and env on top.
func newDocShell(dir string, env ...string) *docShell {
	return &docShell{dir: dir, env: append(append(os.Environ(), "PWD="+dir), env...)}
}

// namespacedShell is a docShell in a folder of its own, as a user whose kubeconfig is sb's
// with ns the current context's namespace (the pages' commands without -n); PATH has the
// checkout's bin/ and then dirs first.
func namespacedShell(sb target, ns string, dirs ...string) *docShell {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	raw, err := os.ReadFile(sb.Kubeconfig())
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(kc, raw, 0o600)).To(Succeed())
	kubectl(sb, "--kubeconfig", kc, "config", "set-context", "--current", "--namespace="+ns)
	path := append(slices.Clone(dirs), binDir, os.Getenv("PATH"))
	return newDocShell(dir, "KUBECONFIG="+kc, "PATH="+strings.Join(path, string(os.PathListSeparator)))
}

// with is a copy of s with env on top (a shell variable an earlier command of the page set,
// say).
func (s *docShell) with(env ...string) *docShell {
	return &docShell{dir: s.dir, env: append(slices.Clone(s.env), env...)}
}

// pageCommand is the command of page that is prefix, or else the one whose text starts with
// prefix; the spec fails when none or more than one does (a page edit the spec must follow).
func pageCommand(page, prefix string) doccmd.Command {
	GinkgoHelper()
	cmds, err := doccmd.Read(repo, page)
	Expect(err).NotTo(HaveOccurred())
	for _, c := range cmds {
		if c.Text == prefix {
			return c
		}
	}
	var found []doccmd.Command
	for _, c := range cmds {
		if strings.HasPrefix(c.Text, prefix) && !slices.ContainsFunc(found, func(f doccmd.Command) bool { return f.Text == c.Text }) {
			found = append(found, c)
		}
	}
	Expect(found).To(HaveLen(1), "%s shows one command starting with %q", page, prefix)
	return found[0]
}

// run runs the command of page that starts with prefix, with stdin, after replacing each old
// by its new in replace (pairs; each old must occur); it records the run for the suite's
// check and does not fail on a non-zero exit code.
func (s *docShell) run(stdin, page, prefix string, replace ...string) docResult {
	GinkgoHelper()
	return s.runOn(stdin, []string{page}, prefix, replace...)
}

// runOn is run for a command that each of pages shows alike at the same point of the same
// story (README.md and docs/sandbox.md on a sandbox just started): it runs once, for all.
func (s *docShell) runOn(stdin string, pages []string, prefix string, replace ...string) docResult {
	GinkgoHelper()
	c := pageCommand(pages[0], prefix)
	for _, p := range pages[1:] {
		Expect(pageCommand(p, prefix).Text).To(Equal(c.Text), "%s and %s show the command alike", pages[0], p)
	}
	page := strings.Join(pages, ", ")
	Expect(len(replace)%2).To(BeZero(), "replacements come in pairs")
	text := c.Text
	for i := 0; i < len(replace); i += 2 {
		Expect(text).To(ContainSubstring(replace[i]), "%s:%d no longer holds what the spec replaces", c.Page, c.Line)
		text = strings.ReplaceAll(text, replace[i], replace[i+1])
	}
	script := text
	export := strings.HasPrefix(text, "export ")
	if export {
		// The shell's environment after the line, NUL-separated, becomes the next commands'.
		script = text + " && env -0"
	}
	runCtx, stop := context.WithTimeout(ctx, 10*time.Minute)
	defer stop()
	cmd := exec.CommandContext(runCtx, "sh", "-c", script)
	cmd.Dir, cmd.Env, cmd.Stdin = s.dir, s.env, strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := docResult{cmd: c, text: text, out: stdout.String() + stderr.String(), stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		r.code = exit.ExitCode()
	} else {
		Expect(err).NotTo(HaveOccurred(), "run %q", text)
	}
	if export && r.code == 0 {
		s.env = strings.Split(strings.TrimSuffix(stdout.String(), "\x00"), "\x00")
		r.out, r.stdout = stderr.String(), ""
	}
	fmt.Fprintf(GinkgoWriter, "%s (line %d) $ %s  (exit %d)\n%s", page, c.Line, text, r.code, r.out)
	spec := CurrentSpecReport().ContainerHierarchyTexts[0]
	for _, p := range pages {
		recordDocRun(doccmd.Key{Page: p, Text: c.Text}, spec)
	}
	return r
}

// ok is run expecting exit code 0; it returns the output.
func (s *docShell) ok(page, prefix string, replace ...string) string {
	GinkgoHelper()
	r := s.run("", page, prefix, replace...)
	Expect(r.code).To(BeZero(), "%s: %s", r.text, r.out)
	return r.out
}

// pageLabel is a labelled line of a page's output: its indentation, a label of words and a
// colon, and the spaces that align the value after it.
var pageLabel = regexp.MustCompile(`^(\s*[A-Za-z][A-Za-z ]{0,20}: +)\S`)

// expectPageLabels checks that every labelled line of the output the page shows after r's
// command (status' "state:     ", plan show's "  changes:       ") starts a line of what the
// command printed, with the same indentation and alignment: a page whose example drifted from
// what the plugin prints fails.
func expectPageLabels(r docResult) {
	GinkgoHelper()
	printed := "\n" + r.out
	n := 0
	for _, l := range r.cmd.Output {
		m := pageLabel.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		n++
		Expect(printed).To(ContainSubstring("\n"+m[1]), "%s:%d shows the line %q; %q printed no line that starts like it", r.cmd.Page, r.cmd.Line, l, r.text)
	}
	Expect(n).To(BeNumerically(">", 0), "%s:%d shows no labelled line after %q", r.cmd.Page, r.cmd.Line, r.text)
}

// expectPageOutput checks that every line the page shows after r's command ("..." aside) is a
// line of what the command printed.
func expectPageOutput(r docResult) {
	GinkgoHelper()
	printed := strings.Split(r.out, "\n")
	Expect(r.cmd.Output).NotTo(BeEmpty(), "%s:%d shows no output after %q", r.cmd.Page, r.cmd.Line, r.text)
	for _, l := range r.cmd.Output {
		if strings.TrimSpace(l) == "..." {
			continue
		}
		Expect(printed).To(ContainElement(l), "%s:%d shows %q after %q", r.cmd.Page, r.cmd.Line, l, r.text)
	}
}

// userFolder is a folder laid out as the checkout for the pages' commands: config/ and
// templates/ are the checkout's, bin/ links the checkout's tools and the binaries this suite
// built (and dirs' files), and holds kubeconfig as bin/sandbox.kubeconfig; so the pages'
// `export KUBECONFIG=$PWD/bin/sandbox.kubeconfig PATH=$PWD/bin:$PATH` reaches the spec's
// sandbox and never the one you may run from the checkout.
func userFolder(kubeconfig string, dirs ...string) string {
	GinkgoHelper()
	w := GinkgoT().TempDir()
	for _, d := range []string{"config", "templates"} {
		Expect(os.Symlink(filepath.Join(repo, d), filepath.Join(w, d))).To(Succeed())
	}
	bin := filepath.Join(w, "bin")
	Expect(os.Mkdir(bin, 0o755)).To(Succeed())
	for _, d := range append([]string{binDir, built}, dirs...) {
		entries, err := os.ReadDir(d)
		Expect(err).NotTo(HaveOccurred())
		for _, e := range entries {
			if e.IsDir() || e.Name() == "sandbox.kubeconfig" {
				continue
			}
			link := filepath.Join(bin, e.Name())
			_ = os.Remove(link) // a later folder's binary wins
			Expect(os.Symlink(filepath.Join(d, e.Name()), link)).To(Succeed())
		}
	}
	if kubeconfig != "" {
		Expect(os.Symlink(kubeconfig, filepath.Join(bin, "sandbox.kubeconfig"))).To(Succeed())
	}
	return w
}

// Every spec that ran and passed ran the commands doccmd.Fates names it for (a focused run
// checks the specs it ran; a spec that failed may have stopped before its commands, and its
// failure says more).
var _ = ReportAfterSuite("every command the pages show and a spec is named for was run by it", func(r Report) {
	passed := map[string]bool{}
	for _, sr := range r.SpecReports {
		if sr.LeafNodeType != types.NodeTypeIt || len(sr.ContainerHierarchyTexts) == 0 {
			continue
		}
		spec := sr.ContainerHierarchyTexts[0]
		ok, seen := passed[spec]
		passed[spec] = sr.State == types.SpecStatePassed && (ok || !seen)
	}
	docRuns.Lock()
	defer docRuns.Unlock()
	var missing []string
	for k, f := range doccmd.Fates {
		if f.Spec != "" && passed[f.Spec] && !docRuns.by[k][f.Spec] {
			missing = append(missing, fmt.Sprintf("%s: %q (named for %q)", k.Page, k.Text, f.Spec))
		}
	}
	sort.Strings(missing)
	Expect(missing).To(BeEmpty(), "commands doccmd.Fates says a spec runs, which it did not although it passed")
})
