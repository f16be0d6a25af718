package decide

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// maxUnhealthyCount caps the count of consecutive unhealthy samples (the threshold is at most
// 100), so a machine left unhealthy for years never overflows it.
const maxUnhealthyCount = 10000

// HealthEvidence is the health signal of a kind whose module may export a health output.
type HealthEvidence struct {
	// Threshold is spec.health.unhealthyThreshold (or its default); 0: the kind has no
	// health signal, and no condition reports it.
	Threshold int32
	// Last is the durable record of the samples (annotation captf.io/health).
	Last *infrav1.HealthRecord
}

// NextHealthRecord is the record after one more sample, taken by Job job at at: s is the
// health output as the apply's state or the drift check's plan read it (nil: the module
// exports none). The counting rule: a healthy sample starts the count again, an unhealthy one
// adds one, a sample that does not fit the contract leaves the count as it is (it says
// nothing about the infrastructure), and no output means no count.
func NextHealthRecord(prev *infrav1.HealthRecord, s *runnerapi.HealthSample, job string, at time.Time) *infrav1.HealthRecord {
	rec := &infrav1.HealthRecord{Job: job, At: at.UTC().Format(time.RFC3339)}
	switch {
	case s == nil:
		rec.Missing = true
	case s.Invalid != "":
		rec.Invalid = s.Invalid
		if prev != nil {
			rec.Healthy, rec.Message, rec.Unhealthy = prev.Healthy, prev.Message, prev.Unhealthy
		}
	case s.Healthy:
		rec.Healthy, rec.Message = true, s.Message
	default:
		rec.Message = s.Message
		rec.Unhealthy = 1
		if prev != nil && prev.Unhealthy > 0 {
			rec.Unhealthy = min(prev.Unhealthy+1, maxUnhealthyCount)
		}
	}
	return rec
}

// atThreshold reports whether the record counts threshold or more consecutive unhealthy
// samples: the one rule that turns a provisioned machine's Ready False.
func atThreshold(r *infrav1.HealthRecord, threshold int32) bool {
	return r != nil && threshold > 0 && r.Unhealthy >= threshold
}

// healthRecord is the record as this pass's bookkeeping left it, else the one gathered.
func healthRecord(ev Evidence, rep Report) *infrav1.HealthRecord {
	if rep.HealthRecord != nil {
		return rep.HealthRecord
	}
	return ev.Health.Last
}

// setInfrastructureHealthy reports the last health sample (kinds with a health signal only).
func setInfrastructureHealthy(c conditions, ev Evidence, rep Report) {
	if ev.Health.Threshold <= 0 {
		return
	}
	t, s, reason, msg := HealthCondition(healthRecord(ev, rep), ev.Health.Threshold)
	c.set(t, s, reason, msg)
}

// HealthCondition is InfrastructureHealthy for a record and a threshold.
func HealthCondition(r *infrav1.HealthRecord, threshold int32) (string, metav1.ConditionStatus, string, string) {
	const t = infrav1.InfrastructureHealthyCondition
	switch {
	case r == nil:
		return t, metav1.ConditionUnknown, infrav1.NoHealthSampleReason,
			"no health sample yet: the next successful apply or drift check takes one"
	case r.Missing:
		return t, metav1.ConditionUnknown, infrav1.NoHealthOutputReason,
			fmt.Sprintf("the module exports no %q output (Job %s): CAPTF cannot tell, and never marks the machine unhealthy for it", runnerapi.HealthOutput, r.Job)
	case r.Invalid != "":
		return t, metav1.ConditionUnknown, infrav1.HealthOutputInvalidReason,
			fmt.Sprintf("Job %s: %s; the sample is not counted (%d of %d consecutive unhealthy samples so far)", r.Job, r.Invalid, r.Unhealthy, threshold)
	case r.Healthy:
		msg := fmt.Sprintf("the module reports healthy (Job %s)", r.Job)
		if r.Message != "" {
			msg += ": " + r.Message
		}
		return t, metav1.ConditionTrue, infrav1.HealthyReason, msg
	}
	return t, metav1.ConditionFalse, infrav1.UnhealthyReason, unhealthyMessage(r, threshold)
}

// unhealthyMessage says what the module reported and how far the count is.
func unhealthyMessage(r *infrav1.HealthRecord, threshold int32) string {
	msg := "the module reports unhealthy"
	if r.Message != "" {
		msg += ": " + r.Message
	}
	msg += fmt.Sprintf(" (%d of %d consecutive unhealthy samples, the last from Job %s)", r.Unhealthy, threshold, r.Job)
	if atThreshold(r, threshold) {
		msg += "; Ready is False (" + infrav1.InfrastructureUnhealthyReason + ") so that a MachineHealthCheck on the Machine's InfrastructureReady replaces the machine"
	}
	return msg
}

// HealthStatusOf is status.health for a record (nil: no sample yet).
func HealthStatusOf(r *infrav1.HealthRecord) *infrav1.MachineHealthStatus {
	if r == nil {
		return nil
	}
	st := &infrav1.MachineHealthStatus{Job: r.Job, ConsecutiveUnhealthy: r.Unhealthy}
	if at, err := time.Parse(time.RFC3339, r.At); err == nil {
		t := metav1.NewTime(at)
		st.LastSampleTime = &t
	}
	return st
}

// HealthTransition is the event of a sample that changed InfrastructureHealthy's status or
// reason (Warning for Unhealthy and HealthOutputInvalid, Normal otherwise), or that reached the
// threshold (Warning InfrastructureUnhealthy): ok is false when nothing changed worth an event.
func HealthTransition(prev, next *infrav1.HealthRecord, threshold int32) (eventType, reason, note string, ok bool) {
	_, ps, pr, _ := HealthCondition(prev, threshold)
	_, ns, nr, nmsg := HealthCondition(next, threshold)
	switch {
	case atThreshold(next, threshold) && !atThreshold(prev, threshold):
		return EventWarning, infrav1.InfrastructureUnhealthyReason, nmsg, true
	case ps == ns && pr == nr:
		return "", "", "", false
	case nr == infrav1.UnhealthyReason || nr == infrav1.HealthOutputInvalidReason:
		return EventWarning, nr, nmsg, true
	}
	// Healthy, and a module without a health output (the usual case, not a fault).
	return EventNormal, nr, nmsg, true
}
