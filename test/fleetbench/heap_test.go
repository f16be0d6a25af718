package fleetbench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The manager's metrics the sampler reads (the Go and process collectors controller-runtime
// registers).
const (
	metricHeap = "go_memstats_heap_alloc_bytes"
	metricRSS  = "process_resident_memory_bytes"
)

// heapPeaks are the highest heap and resident memory the samples saw.
type heapPeaks struct {
	peakHeap, peakRSS uint64
	// firstHeap is the heap of the first sample, taken when the fleet's clock started.
	firstHeap         uint64
	samples, failures int
	lastErr           error
}

// heapSampler reads the manager's metrics every interval until stop.
type heapSampler struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	peaks  heapPeaks
}

// sampleHeap starts sampling url, the manager's metrics endpoint, at once and then every
// interval.
func sampleHeap(ctx context.Context, url string, every time.Duration) *heapSampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &heapSampler{cancel: cancel, done: make(chan struct{})}
	c := &http.Client{Timeout: 5 * time.Second}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			s.sample(ctx, c, url)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *heapSampler) sample(ctx context.Context, c *http.Client, url string) {
	got, err := scrape(ctx, c, url, metricHeap, metricRSS)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			s.peaks.failures++
			s.peaks.lastErr = err
		}
		return
	}
	heap, rss := uint64(got[metricHeap]), uint64(got[metricRSS])
	if s.peaks.samples == 0 {
		s.peaks.firstHeap = heap
	}
	s.peaks.samples++
	s.peaks.peakHeap = max(s.peaks.peakHeap, heap)
	s.peaks.peakRSS = max(s.peaks.peakRSS, rss)
}

// stop ends the sampling and returns the peaks.
func (s *heapSampler) stop() heapPeaks {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peaks
}

// scrape reads the named unlabelled metrics from a Prometheus text endpoint; a missing one is
// an error.
func scrape(ctx context.Context, c *http.Client, url string, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("metrics request: %w", err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, fmt.Errorf("read metrics: %s", resp.Status)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !want[name] {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, fmt.Errorf("metric %s: %w", name, err)
		}
		out[name] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("metric %s missing", n)
		}
	}
	return out, nil
}
