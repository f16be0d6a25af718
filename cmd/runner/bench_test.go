package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

var (
	benchOnce sync.Once
	benchCP   envtest.Shared
	benchH    *harness
	benchErr  error
)

// benchHarness starts one control plane for the benchmarks (TestMain stops it) and builds the
// runner binary they run, as a Job runs it (the test binary's own start-up would dominate).
func benchHarness(b *testing.B) *harness {
	env, c := benchCP.Get(b)
	benchOnce.Do(func() {
		if benchH, benchErr = newHarness(env, c); benchErr != nil {
			return
		}
		root, err := envtest.RepoRoot()
		if err != nil {
			benchErr = err
			return
		}
		benchH.runnerBin = filepath.Join(benchH.dir, "runner")
		build := exec.Command("go", "build", "-trimpath", "-o", benchH.runnerBin, "./cmd/runner")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			benchErr = fmt.Errorf("build the runner: %w\n%s", err, out)
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchH
}

func stopBenchHarness() {
	if benchH != nil {
		benchH.cleanup()
	}
	_ = benchCP.Stop()
}

// Backend modes the benchmark compares.
const (
	modeKubernetes = "kubernetes-backend"
	modeChannel    = "channel"
)

// BenchmarkSampleApply times a sample apply (init + apply of a terraform_data module into a
// fresh state) through the state channel and through Terraform's kubernetes backend, with
// OpenTofu and with Terraform. Each iteration runs both, back to back in alternating order, so
// a machine's changing load weighs on both alike; the sub-benchmark of each binary reports
// both times and their ratio (target: the channel at most 1.2x the kubernetes backend), and the
// benchmark prints the medians side by side. A channel run is timed from the channel's start to
// the runner's exit, as a Job's pod runs them; a kubernetes backend run from the runner's start
// to its exit. Both run the runner binary built from ./cmd/runner.
//
//	go test ./cmd/runner -run '^$' -bench SampleApply -benchtime 5x
func BenchmarkSampleApply(b *testing.B) {
	RegisterTestingT(b)
	h := benchHarness(b)
	bins, err := findBinaries()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	samples := map[string][]time.Duration{}
	for _, bin := range binaries {
		b.Run(bin, func(b *testing.B) {
			RegisterTestingT(b)
			ns := h.namespace(ctx, "bench-")
			var sum = map[string]time.Duration{}
			for i := 0; i < b.N; i++ {
				modes := []string{modeKubernetes, modeChannel}
				if i%2 == 1 {
					slices.Reverse(modes)
				}
				for _, mode := range modes {
					d := sampleApply(b, h, bins[bin], ns, mode, i)
					samples[bin+"/"+mode] = append(samples[bin+"/"+mode], d)
					sum[mode] += d
				}
			}
			k, c := float64(sum[modeKubernetes].Milliseconds())/float64(b.N), float64(sum[modeChannel].Milliseconds())/float64(b.N)
			b.ReportMetric(k, modeKubernetes+"-ms/op")
			b.ReportMetric(c, modeChannel+"-ms/op")
			b.ReportMetric(c/k, "channel/kubernetes")
		})
	}
	fmt.Printf("\nsample apply: init + apply of a terraform_data module into a fresh state (medians of n runs;\n" +
		"paired: the median of each iteration's channel/kubernetes ratio, both run back to back)\n")
	fmt.Printf("%-10s %-20s %18s %18s %20s %8s\n", "binary", "version", modeKubernetes, modeChannel, "channel/kubernetes", "paired")
	for _, bin := range binaries {
		k, c := samples[bin+"/"+modeKubernetes], samples[bin+"/"+modeChannel]
		if len(k) == 0 || len(k) != len(c) {
			continue
		}
		ratios := make([]time.Duration, len(k))
		for i := range k {
			// A ratio kept as a Duration of 1e6 per 1.0, so median applies.
			ratios[i] = time.Duration(float64(c[i]) / float64(k[i]) * 1e6)
		}
		mk, mc := median(k), median(c)
		fmt.Printf("%-10s %-20s %9.0f ms n=%-3d %9.0f ms n=%-3d %19.2fx %7.2fx\n", bin, bins[bin].version,
			float64(mk.Microseconds())/1000, len(k), float64(mc.Microseconds())/1000, len(c), float64(mc)/float64(mk), float64(median(ratios))/1e6)
	}
}

// sampleApply runs one timed apply of a fresh object in one mode.
func sampleApply(b *testing.B, h *harness, bin tfBinary, ns, mode string, i int) time.Duration {
	b.StopTimer()
	defer b.StartTimer()
	dir, err := os.MkdirTemp(h.dir, "bench-")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	o := h.newObject(ctx, bin, ns, fmt.Sprintf("bench-%s-%d-%d", mode, b.N, i), dir, io.Discard)
	vars := map[string]any{"name": fmt.Sprintf("bench-%d", i)}
	if mode == modeKubernetes {
		b.StartTimer()
		start := time.Now()
		_, code, raw := o.startRunner(runnerapi.OperationApply, vars, nil, "", 10*time.Second).wait()
		d := time.Since(start)
		b.StopTimer()
		Expect(code).To(Equal(runnerapi.ExitOK), raw)
		return d
	}
	o.prepare()
	job, pod := o.nextJob()
	chDir, err := os.MkdirTemp(dir, "channel-")
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	start := time.Now()
	ch := o.startChannel(job, pod, chDir)
	_, code, raw := o.startRunner(runnerapi.OperationApply, vars, nil, chDir, 10*time.Second).wait()
	d := time.Since(start)
	b.StopTimer()
	Expect(code).To(Equal(runnerapi.ExitOK), raw)
	Expect(ch.cmd.Process.Signal(os.Interrupt)).To(Succeed())
	Expect(ch.exitCode()).To(Equal(runnerapi.ExitOK))
	return d
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
