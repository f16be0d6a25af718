package cachelag

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// lagTotal counts the passes that found cache lag, by the check that found it. Operators see
// it as captf_cache_lag_total on the manager's metrics endpoint; a steady rise means the
// manager's watches fall behind (API server load, a slow network, a starved manager).
var lagTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "captf_cache_lag_total",
	Help: "Reconcile passes that waited because the informer cache trailed the API server, by check.",
}, []string{"check"})

func init() {
	metrics.Registry.MustRegister(lagTotal)
}

// Detected returns how many lags this process has detected so far, over all checks.
func Detected() float64 {
	total := 0.0
	for _, check := range []string{"activeJob", "runLease"} {
		m := &dto.Metric{}
		if err := lagTotal.WithLabelValues(check).Write(m); err == nil && m.Counter != nil {
			total += m.Counter.GetValue()
		}
	}
	return total
}
