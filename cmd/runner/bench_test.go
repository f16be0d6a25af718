package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/captf/cluster-api-provider-terraform/controllers/jobs/runnerapi"
)

var (
	benchOnce sync.Once
	benchH    *harness
	benchErr  error
)

// benchHarness starts one control plane for the benchmarks (TestMain stops it).
func benchHarness(b *testing.B) *harness {
	benchOnce.Do(func() { benchH, benchErr = startHarness() })
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchH
}

func stopBenchHarness() {
	if benchH != nil {
		_ = benchH.stop()
	}
}

// Backend modes the benchmark compares.
const (
	modeKubernetes = "kubernetes-backend"
	modeChannel    = "channel"
)

// BenchmarkSampleApply times a sample apply (init + apply of a terraform_data module into a
// fresh state) through the state channel and through Terraform's kubernetes backend, with
// OpenTofu and with Terraform, and prints the medians side by side with their ratio (target:
// the channel at most 1.2x the kubernetes backend). A channel run is timed from the channel's
// start to the runner's exit, as a Job's pod runs them; the kubernetes backend run from the
// runner's start to its exit.
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
		for _, mode := range []string{modeKubernetes, modeChannel} {
			key := bin + "/" + mode
			b.Run(key, func(b *testing.B) {
				RegisterTestingT(b)
				ns := h.namespace(ctx, "bench-")
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					dir, err := os.MkdirTemp(h.dir, "bench-")
					if err != nil {
						b.Fatal(err)
					}
					o := h.newObject(ctx, bins[bin], ns, fmt.Sprintf("bench-%s-%d", mode, i), dir, io.Discard)
					vars := map[string]any{"name": fmt.Sprintf("bench-%d", i)}
					var d time.Duration
					if mode == modeChannel {
						o.prepare()
						job, pod := o.nextJob()
						chDir, err := os.MkdirTemp(dir, "channel-")
						if err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
						start := time.Now()
						ch := o.startChannel(job, pod, chDir)
						r := o.startRunner(runnerapi.OperationApply, vars, nil, chDir, 10*time.Second)
						_, code, raw := r.wait()
						d = time.Since(start)
						b.StopTimer()
						Expect(code).To(Equal(runnerapi.ExitOK), raw)
						Expect(ch.cmd.Process.Signal(os.Interrupt)).To(Succeed())
						Expect(ch.exitCode()).To(Equal(runnerapi.ExitOK))
					} else {
						b.StartTimer()
						start := time.Now()
						_, code, raw := o.startRunner(runnerapi.OperationApply, vars, nil, "", 10*time.Second).wait()
						d = time.Since(start)
						b.StopTimer()
						Expect(code).To(Equal(runnerapi.ExitOK), raw)
					}
					samples[key] = append(samples[key], d)
				}
			})
		}
	}
	fmt.Printf("\nsample apply: init + apply of a terraform_data module into a fresh state (median of n runs)\n")
	fmt.Printf("%-10s %-32s %22s %12s %20s\n", "binary", "version", modeKubernetes, modeChannel, "channel/kubernetes")
	for _, bin := range binaries {
		k, c := samples[bin+"/"+modeKubernetes], samples[bin+"/"+modeChannel]
		if len(k) == 0 || len(c) == 0 {
			continue
		}
		mk, mc := median(k), median(c)
		fmt.Printf("%-10s %-32s %15.0f ms n=%d %8.0f ms n=%d %17.2fx\n", bin, bins[bin].version,
			float64(mk.Microseconds())/1000, len(k), float64(mc.Microseconds())/1000, len(c), float64(mc)/float64(mk))
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
