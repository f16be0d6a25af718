package webhooks_test

import (
	"fmt"
	"net/http"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/metrics"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

func TestOutcomeNamesEveryVerdict(t *testing.T) {
	overridden := admission.Allowed("guard overridden")
	overridden.AuditAnnotations = map[string]string{webhooks.OverrideAuditKey: "note"}
	for want, resp := range map[string]admission.Response{
		"allowed":    admission.Allowed(""),
		"denied":     admission.Denied("a Job runs"),
		"error":      admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("list pods: timeout")),
		"overridden": overridden,
	} {
		if got := webhooks.Outcome(resp); got != want {
			t.Errorf("Outcome(%+v) = %q, want %q", resp.Result, got, want)
		}
	}
	if got := webhooks.Outcome(admission.Errored(http.StatusBadRequest, fmt.Errorf("decode"))); got != "error" {
		t.Errorf("a request the guard cannot decode is %q, want error", got)
	}
}

// guardCount is captf_guard_decisions_total{guard,outcome} now.
func guardCount(guard, outcome string) float64 {
	return testutil.ToFloat64(metrics.GuardDecisions.WithLabelValues(guard, outcome))
}

// guardTimed is how many verdicts captf_guard_duration_seconds{guard} observed.
func guardTimed(guard string) uint64 {
	GinkgoHelper()
	m := &dto.Metric{}
	h, ok := metrics.GuardDuration.WithLabelValues(guard).(interface{ Write(*dto.Metric) error })
	Expect(ok).To(BeTrue())
	Expect(h.Write(m)).To(Succeed())
	return m.GetHistogram().GetSampleCount()
}

var _ = Describe("The guards' metrics", func() {
	It("count each verdict once by guard and outcome, and time it", func() {
		dev, _ := userClient("dev-metrics", "devs")
		oncall, _ := userClient("oncall-metrics", breakGlassGroup)
		ns := newNamespace()
		kind := infrav1.TerraformMachineKind
		create(kind, ns, "m")
		r, err := startRun(ctx, admin, kind, ns, "m", 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(ensureMark(ctx, admin, kind, ns, "m", markBlockMove, r.job.Name)).To(Succeed())

		type series struct{ guard, outcome string }
		all := []series{}
		for _, g := range metrics.Guards {
			for _, o := range metrics.GuardOutcomes {
				all = append(all, series{g, o})
			}
		}
		snapshot := func() map[series]float64 {
			out := map[series]float64{}
			for _, s := range all {
				out[s] = guardCount(s.guard, s.outcome)
			}
			return out
		}
		// expectOne checks that exactly the series want moved, by one, and that the guard's
		// histogram observed one more verdict.
		expectOne := func(before map[series]float64, timed uint64, want series) {
			GinkgoHelper()
			after := snapshot()
			for _, s := range all {
				d := after[s] - before[s]
				if s == want {
					Expect(d).To(Equal(1.0), "%s/%s", s.guard, s.outcome)
				} else {
					Expect(d).To(BeZero(), "%s/%s moved while %s/%s was expected", s.guard, s.outcome, want.guard, want.outcome)
				}
			}
			Expect(guardTimed(want.guard)).To(Equal(timed+1), "%s guard's duration", want.guard)
		}
		removeBlockMove := `{"metadata":{"annotations":{"clusterctl.cluster.x-k8s.io/block-move":null}}}`

		By("the object guard refuses a plain user's removal while the Job runs: denied")
		before, timed := snapshot(), guardTimed(webhooks.GuardObject)
		err = mergePatch(dev, kind, ns, "m", false, removeBlockMove)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		expectOne(before, timed, series{webhooks.GuardObject, "denied"})

		By("the Lease guard refuses deleting the live run lease: denied")
		l := leaseOf(ns, r.owner.RunLeaseName())
		before, timed = snapshot(), guardTimed(webhooks.GuardLease)
		err = dev.Delete(ctx, l)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		expectOne(before, timed, series{webhooks.GuardLease, "denied"})

		By("the Job guard refuses relabelling the running Job: denied")
		before, timed = snapshot(), guardTimed(webhooks.GuardJob)
		err = patchJob(dev, ns, r.job.Name, `{"metadata":{"labels":{"captf.io/owner-name":"other"}}}`)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		expectOne(before, timed, series{webhooks.GuardJob, "denied"})

		By("an override member with a reason forces the removal: overridden, not allowed")
		before, timed = snapshot(), guardTimed(webhooks.GuardObject)
		Expect(mergePatch(oncall, kind, ns, "m", false,
			`{"metadata":{"annotations":{"clusterctl.cluster.x-k8s.io/block-move":null,"captf.io/guard-override-reason":"INC-7: metrics"}}}`)).To(Succeed())
		expectOne(before, timed, series{webhooks.GuardObject, "overridden"})

		By("once the Job ended, a removal backed by the evidence: allowed")
		Expect(r.finish(ctx, admin)).To(Succeed())
		Expect(ensureMark(ctx, admin, kind, ns, "m", markBlockMove, r.job.Name)).To(Succeed())
		before, timed = snapshot(), guardTimed(webhooks.GuardObject)
		Expect(mergePatch(dev, kind, ns, "m", false, removeBlockMove)).To(Succeed())
		expectOne(before, timed, series{webhooks.GuardObject, "allowed"})
	})
})
