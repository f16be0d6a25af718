// Package metrics owns every Prometheus series CAPTF exposes on the manager's metrics endpoint
// (controller-runtime's registry, served at --metrics-bind-address), in one place so that
// docs/observability.md, the alerts and the dashboard can be checked against it.
//
// Invariant: no series carries an unbounded label. Labels take values from fixed sets only
// (kind, operation, outcome, action, reason, check, guard); object names, namespaces and Job
// names never become labels. Per-object facts that matter to an operator live in conditions
// and events, and the objects gauge counts objects per Ready reason.
package metrics
