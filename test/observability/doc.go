// Package observability holds the tests that keep CAPTF's metrics, alerts, dashboard and their
// documentation in agreement. It has no code of its own: the series are defined in
// controllers/metrics and controllers/cachelag, the alerts in config/prometheus/rules.yaml, the
// dashboard in config/prometheus/dashboard.json, the words in docs/observability.md and
// docs/runbooks/.
//
// Invariants it checks (plain `go test`, no API server):
//   - no CAPTF series carries a label outside a small bounded set (kind, operation, outcome,
//     action, reason, check, guard, ready_reason, le, quantile): object names never become labels;
//   - every CAPTF series is documented in docs/observability.md with its type and labels, and
//     the page names no series that does not exist;
//   - every PromQL expression of the alerts and the dashboard names only series that exist: the
//     CAPTF series, and the controller-runtime and kube-apiserver series read from those
//     modules' own source, with only labels those series carry;
//   - every alert has a runbook page, a firing and a non-firing promtool case, and an entry in
//     docs/observability.md; the kustomize component renders with config/default.
package observability
