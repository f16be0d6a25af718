package webhooks

import (
	"context"
	"net/http"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/captf/cluster-api-provider-terraform/controllers/metrics"
)

// OverrideAuditKey is the audit annotation an overridden verdict carries. The API server
// records it in the request's audit event as "<webhook name>/guard-override", with the note of
// the GuardOverridden event as its value, and Outcome counts the verdict as overridden by it.
const OverrideAuditKey = "guard-override"

// The guard label of the captf_guard_* series (metrics.Guards).
const (
	GuardObject = "object"
	GuardLease  = "lease"
	GuardJob    = "job"
)

// Outcome names a guard's verdict for captf_guard_decisions_total: "overridden" when the
// break-glass path allowed a denied request, "allowed", "denied" for a refusal (403), and
// "error" for every other refusal (a request the guard could not decode, evidence it could
// not read: the guard fails closed).
func Outcome(resp admission.Response) string {
	switch {
	case resp.AuditAnnotations[OverrideAuditKey] != "":
		return "overridden"
	case resp.Allowed:
		return "allowed"
	case resp.Result != nil && resp.Result.Code == http.StatusForbidden:
		return "denied"
	default:
		return "error"
	}
}

// measured counts and times every verdict of one guard.
type measured struct {
	guard string
	next  admission.Handler
}

// Measured wraps a guard's handler so each verdict is counted in
// captf_guard_decisions_total{guard,outcome} and timed in captf_guard_duration_seconds{guard}.
func Measured(guard string, next admission.Handler) admission.Handler {
	return measured{guard: guard, next: next}
}

// Handle implements admission.Handler.
func (m measured) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	resp := m.next.Handle(ctx, req)
	metrics.GuardDuration.WithLabelValues(m.guard).Observe(time.Since(start).Seconds())
	metrics.GuardDecisions.WithLabelValues(m.guard, Outcome(resp)).Inc()
	return resp
}
