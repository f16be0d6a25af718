package main

import (
	"regexp"
	"strings"
)

var (
	// go test: "--- FAIL: TestName (0.00s)", indented for subtests.
	goFailLine = regexp.MustCompile(`^\s*--- FAIL: (\S+)`)
	// Ginkgo's summary after "Summarizing N Failure(s):": "  [FAIL] Container [It] spec text"
	// ("[PANICKED!]" for a spec that panicked).
	ginkgoSummary = regexp.MustCompile(`^Summarizing \d+ Failures?:`)
	ginkgoFail    = regexp.MustCompile(`^\s*\[(FAIL|PANICKED|TIMEDOUT|INTERRUPTED)!?\] (.+?)\s*$`)
	// go test's -timeout panic lists the tests that were running, one per line.
	runningTest = regexp.MustCompile(`^\s+(Test\S*) \(\S+\)\s*$`)
	// Ginkgo colours its output even when it goes to a file.
	ansi = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)
)

// FailingTests names the failing tests in the output of go test (with Ginkgo suites inside):
// each "--- FAIL:" test, without the parents of failing subtests; each spec of Ginkgo's failure
// summary (a BeforeSuite or AfterSuite failure shows as "[BeforeSuite]"); and, after a go test
// timeout, the tests that were running, marked "(timed out)". Each name once, in order.
func FailingTests(out string) []string {
	var goTests, specs []string
	seen := map[string]bool{}
	add := func(list *[]string, name string) {
		if !seen[name] {
			seen[name] = true
			*list = append(*list, name)
		}
	}
	inSummary, inRunning := false, false
	for _, line := range strings.Split(ansi.ReplaceAllString(out, ""), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if m := goFailLine.FindStringSubmatch(line); m != nil {
			add(&goTests, m[1])
			inSummary = false
			continue
		}
		if ginkgoSummary.MatchString(strings.TrimSpace(line)) {
			inSummary = true
			continue
		}
		if inSummary {
			if m := ginkgoFail.FindStringSubmatch(line); m != nil {
				tag := ""
				if m[1] != "FAIL" {
					tag = " (" + strings.ToLower(m[1]) + ")"
				}
				add(&specs, m[2]+tag)
				continue
			}
			if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "Ran ") || strings.HasPrefix(line, "FAIL!") {
				inSummary = false
			}
			continue
		}
		if strings.TrimSpace(line) == "running tests:" {
			inRunning = true
			continue
		}
		if inRunning {
			if m := runningTest.FindStringSubmatch(line); m != nil {
				add(&goTests, m[1]+" (timed out)")
				continue
			}
			inRunning = false
		}
	}
	// Drop a test whose subtest is named: the subtest says more.
	var out2 []string
	for _, t := range goTests {
		parent := false
		for _, u := range goTests {
			if strings.HasPrefix(u, t+"/") {
				parent = true
				break
			}
		}
		if !parent {
			out2 = append(out2, t)
		}
	}
	return append(out2, specs...)
}
