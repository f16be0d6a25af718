package main

import (
	"slices"
	"testing"
	"time"
)

// Output as go test prints it for a failing Ginkgo suite (coloured, as Ginkgo writes it to a
// file), taken from a run of the webhooks suite.
const ginkgoOutput = "Running Suite: Webhooks - /src/webhooks\n" +
	"\x1b[38;5;9m• [FAILED] [0.903 seconds]\x1b[0m\n" +
	"  \x1b[38;5;9m[FAILED]\x1b[0m in [It] - /src/webhooks/leaseguard_test.go:144\n" +
	"------------------------------\n\n" +
	"\x1b[38;5;9m\x1b[1mSummarizing 2 Failures:\x1b[0m\n" +
	"  \x1b[38;5;9m[FAIL]\x1b[0m \x1b[0mThe Lease guard \x1b[38;5;9m\x1b[1m[It] refuses every write of a live run or cluster Lease\x1b[0m\n" +
	"  \x1b[38;5;243m/src/webhooks/leaseguard_test.go:88\x1b[0m\n" +
	"  \x1b[38;5;9m[PANICKED!]\x1b[0m The Job guard [It] refuses changing labels\n" +
	"  /src/webhooks/jobguard_test.go:34\n\n" +
	"\x1b[38;5;9m\x1b[1mRan 2 of 24 Specs in 17.783 seconds\x1b[0m\n" +
	"\x1b[38;5;9m\x1b[1mFAIL!\x1b[0m -- 0 Passed | 2 Failed | 0 Pending | 22 Skipped\n" +
	"--- FAIL: TestWebhooks (17.79s)\n" +
	"FAIL\n" +
	"FAIL\tgithub.com/captf/cluster-api-provider-terraform/webhooks\t17.955s\n"

const subtestOutput = `--- FAIL: TestDecideTable (0.00s)
    --- FAIL: TestDecideTable/a_clear_without_the_live_checks_waits_instead (0.00s)
        decide_test.go:208: Decide = {...}
    --- FAIL: TestDecideTable/lag_found_changes_nothing (0.00s)
--- FAIL: TestDecideInvariantsOverTheWholeEvidenceSpace (41.20s)
    decide_test.go:452: [I2: clears block-move while a Job may run]
FAIL
FAIL	github.com/captf/cluster-api-provider-terraform/controllers/engine	41.548s
`

const timeoutOutput = `panic: test timed out after 2m0s
	running tests:
		TestLeasesOnARealAPIServer (2m0s)

goroutine 1 [running]:
FAIL	github.com/captf/cluster-api-provider-terraform/controllers/runlease	120.1s
`

func TestFailingTestsNamesGoTestsGinkgoSpecsAndTimedOutTests(t *testing.T) {
	cases := map[string]struct {
		out  string
		want []string
	}{
		"ginkgo": {ginkgoOutput, []string{"TestWebhooks",
			"The Lease guard [It] refuses every write of a live run or cluster Lease",
			"The Job guard [It] refuses changing labels (panicked)"}},
		"subtests": {subtestOutput, []string{"TestDecideTable/a_clear_without_the_live_checks_waits_instead",
			"TestDecideTable/lag_found_changes_nothing", "TestDecideInvariantsOverTheWholeEvidenceSpace"}},
		"timeout":      {timeoutOutput, []string{"TestLeasesOnARealAPIServer (timed out)"}},
		"build failed": {"# pkg\n./a.go:3:1: syntax error\nFAIL\tpkg [build failed]\n", nil},
		"passed":       {"ok  \tpkg\t0.1s\n", nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := FailingTests(tc.out); !slices.Equal(got, tc.want) {
				t.Fatalf("FailingTests = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestJudgeCountsOnlyANamedFailureAsAKill(t *testing.T) {
	cases := []struct {
		name string
		out  string
		run  Run
		want Status
	}{
		{"named failure", subtestOutput, Run{ExitCode: 1}, Killed},
		{"passed", "ok  \tpkg\t0.1s\n", Run{}, Survived},
		{"build failure", "# pkg\n./a.go:3:1: undefined: x\nFAIL\tpkg [build failed]\n", Run{ExitCode: 1}, Invalid},
		{"setup failure", "FAIL\tpkg [setup failed]\n", Run{ExitCode: 1}, Invalid},
		{"build failure beside a failing test", subtestOutput + "FAIL\tother [build failed]\n", Run{ExitCode: 1}, Invalid},
		{"failure without a test", "panic: no control plane\nFAIL\tpkg\t0.1s\n", Run{ExitCode: 1}, Unproven},
		{"runner timeout", "", Run{ExitCode: 130, TimedOut: true, Took: time.Minute}, Timeout},
		{"go test timeout", timeoutOutput, Run{ExitCode: 1}, Killed},
	}
	for _, tc := range cases {
		if got, _, _ := Judge(tc.out, tc.run); got != tc.want {
			t.Errorf("%s: Judge = %s, want %s", tc.name, got, tc.want)
		}
	}
}
