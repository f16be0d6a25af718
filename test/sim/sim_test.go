package sim_test

import (
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/captf/cluster-api-provider-terraform/test/sim/faults"
)

// sliceSeeds are the fixed seeds of the slice make test runs (with one derived from the commit):
// 1 to 100.
var sliceSeeds = func() []uint64 {
	var out []uint64
	for s := uint64(1); s <= 100; s++ {
		out = append(out, s)
	}
	return out
}()

// simConfig is what make sim passes (CAPTF_SIM=1, CAPTF_SIM_SEED, CAPTF_SIM_SCHEDULES); without
// CAPTF_SIM the slice runs.
type simConfig struct {
	seeds []uint64
	full  bool
	out   io.Writer
	// withoutGuard runs the admission chain without guard.captf.io (make sim GUARD=off), so a
	// write only the guard would refuse reaches the store and the invariants judge the engine
	// alone.
	withoutGuard bool
	// last names the slice's last seed ("the commit's" by default).
	last string
}

// replay is the command that replays seed under cfg.
func (cfg simConfig) replay(seed uint64) string {
	if cfg.withoutGuard {
		return fmt.Sprintf("make sim SEED=%d SCHEDULES=1 GUARD=off", seed)
	}
	return fmt.Sprintf("make sim SEED=%d SCHEDULES=1", seed)
}

func configFromEnv(t *testing.T) simConfig {
	if os.Getenv("CAPTF_SIM") == "" {
		return simConfig{seeds: append(sliceSeeds, commitSeed()), out: io.Discard}
	}
	seed := uint64(time.Now().UnixNano() % 1_000_000_000)
	if s := os.Getenv("CAPTF_SIM_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CAPTF_SIM_SEED: %v", err)
		}
		seed = v
	}
	n := 100
	if s := os.Getenv("CAPTF_SIM_SCHEDULES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("CAPTF_SIM_SCHEDULES: %q", s)
		}
		n = v
	}
	cfg := simConfig{full: true, out: os.Stdout, withoutGuard: os.Getenv("CAPTF_SIM_GUARD") == "off"}
	for i := range n {
		cfg.seeds = append(cfg.seeds, seed+uint64(i))
	}
	return cfg
}

// commitSeed is a seed derived from the checked-out commit (0 outside a git checkout), so
// each commit's make test runs one schedule no earlier commit ran.
func commitSeed() uint64 {
	b, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(strings.TrimSpace(string(b))))
	return 1_000_000 + h.Sum64()%1_000_000_000
}

// TestSim runs schedules (make sim: CAPTF_SIM_SEED and CAPTF_SIM_SCHEDULES; otherwise the slice
// of make test: sliceSeeds and one seed from the commit), two at a time, each in its own
// bubble, and fails on any violation or unconverged schedule, printing its schedule, its trace
// and the command that replays it.
func TestSim(t *testing.T) {
	runSims(t, configFromEnv(t))
}

// TestSimWithoutTheGuard runs the slice's seeds and the regressions' with the guard webhook off:
// the engine alone must keep every invariant, the guard being defence in depth. Seed 111 found
// a lagging Job cache moving status.activeJob back to an earlier run's Job
// (decide.activeJobIsNewer).
func TestSimWithoutTheGuard(t *testing.T) {
	runSims(t, simConfig{seeds: append(append([]uint64(nil), sliceSeeds...), regressionSeeds...), out: io.Discard, withoutGuard: true, last: "a regression"})
}

// regressionSeeds are seeds that once broke an invariant, each with the guard off.
var regressionSeeds = []uint64{111}

// runSims runs cfg's schedules two at a time and reports them.
func runSims(t *testing.T, cfg simConfig) {
	start := time.Now()
	results := make([]schedOutcome, len(cfg.seeds))
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				k := i
				i++
				next.Unlock()
				if k >= len(cfg.seeds) {
					return
				}
				results[k] = runSchedule(t, cfg.seeds[k], cfg.withoutGuard)
				if cfg.full {
					progress(cfg, results[k], k)
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	report(t, cfg, results, wall)
}

// progress prints a failing schedule's line (and its trace with CAPTF_SIM_SHOW) and a count
// every 500 schedules.
func progress(cfg simConfig, r schedOutcome, k int) {
	show := os.Getenv("CAPTF_SIM_SHOW") != ""
	if r.failed() || show {
		fmt.Fprintf(cfg.out, "seed %d: %d Jobs, %d faults, %d restarts, %d guard denials, %v bubble, %d violations %v, unconverged %q\n",
			r.seed, r.jobs, r.faults, r.restarts, r.denials, r.bubble.Round(time.Second), len(r.violations), r.violations, r.unconverged)
	}
	if show {
		fmt.Fprintf(cfg.out, "schedule: %s\n%s\n", faults.Draw(r.seed), strings.Join(r.trace, "\n"))
	}
	if (k+1)%500 == 0 {
		fmt.Fprintf(cfg.out, "%d schedules started\n", k+1)
	}
}

// report prints the table and fails on the first failing seed, with its trace and replay.
func report(t *testing.T, cfg simConfig, results []schedOutcome, wall time.Duration) {
	var violations, unconverged, jobs, fs, denials int
	var first *schedOutcome
	for k := range results {
		r := &results[k]
		violations += len(r.violations)
		jobs += r.jobs
		fs += r.faults
		denials += r.denials
		if r.unconverged != "" {
			unconverged++
		}
		if r.failed() && first == nil {
			first = r
		}
	}
	perHour := float64(len(results)) / wall.Hours()
	var b strings.Builder
	fmt.Fprintf(&b, "| schedules | seeds | violations | unconverged | Jobs | faults | guard denials | wall | schedules per hour |\n")
	fmt.Fprintf(&b, "| ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n")
	seeds := fmt.Sprintf("%d-%d", cfg.seeds[0], cfg.seeds[len(cfg.seeds)-1])
	if !cfg.full {
		last := cfg.last
		if last == "" {
			last = "the commit's"
		}
		seeds = fmt.Sprintf("%d-%d and %d (%s)", cfg.seeds[0], cfg.seeds[len(cfg.seeds)-2], cfg.seeds[len(cfg.seeds)-1], last)
	}
	fmt.Fprintf(&b, "| %d | %s | %d | %d | %d | %d | %d | %v | %.0f |\n", len(results), seeds,
		violations, unconverged, jobs, fs, denials, wall.Round(time.Second), perHour)
	if first != nil {
		fmt.Fprintf(&b, "first failing seed: %d; replay: %s\n", first.seed, cfg.replay(first.seed))
	}
	fmt.Fprint(cfg.out, b.String())
	t.Log("\n" + b.String())
	if first == nil {
		return
	}
	path := filepath.Join(t.TempDir(), fmt.Sprintf("sim-%d.trace", first.seed))
	if dir := os.Getenv("CAPTF_SIM_TRACE_DIR"); dir != "" {
		path = filepath.Join(dir, fmt.Sprintf("sim-%d.trace", first.seed))
	}
	_ = os.WriteFile(path, []byte(strings.Join(first.trace, "\n")+"\n"), 0o644)
	t.Errorf("seed %d failed (replay: %s)\nschedule: %s\nviolations: %v\nunconverged: %q\ntrace:\n%s",
		first.seed, cfg.replay(first.seed), faults.Draw(first.seed), first.violations, first.unconverged, strings.Join(first.trace, "\n"))
}

// TestSimReplaysBitForBit runs schedules twice and requires the same trace, line for line: a
// failing seed replays the interleaving that failed.
func TestSimReplaysBitForBit(t *testing.T) {
	for _, seed := range []uint64{3, 11} {
		a, b := runSchedule(t, seed, false), runSchedule(t, seed, false)
		if len(a.trace) != len(b.trace) {
			t.Errorf("seed %d gave traces of %d and %d lines", seed, len(a.trace), len(b.trace))
		}
		for i := range min(len(a.trace), len(b.trace)) {
			if a.trace[i] != b.trace[i] {
				t.Errorf("seed %d: first difference at line %d:\n%s\n%s", seed, i, a.trace[i], b.trace[i])
				break
			}
		}
	}
}
