package chaos_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	"github.com/captf/cluster-api-provider-terraform/test/monitor"
)

// recorder is the invariant monitor of test/monitor (I1-I5 and I7 of ARCHITECTURE.md, replayed
// in etcd revision order) as the specs use it: started and stopped with the spec, failing it on
// an error of its own. envtest's Jobs get their pods from the executor (envtest.StartJob); a
// run lasts until its Job has ended and its pod is terminal or gone.
type recorder struct{ mon *monitor.Monitor }

// violation is one broken invariant: the object (or "ns/cluster" for I5) and what broke.
type violation struct {
	owner, namespace string
	text             string
}

func (v violation) String() string { return v.text }

// replay is the outcome of a check: the violations, and the Jobs seen by operation.
type replay struct {
	violations []violation
	jobs       int
	byOp       map[infrav1.Operation]int
	failed     int
	// refused counts the Jobs created against a state that was lost or replaced after the
	// controller read it, whose state channel refuses that state (I7 kept at the point of use).
	refused int
}

// startMonitor records every namespace (check filters).
func startMonitor() *recorder {
	GinkgoHelper()
	return startMonitorFor(func(string) bool { return true })
}

// startMonitorFor records the namespaces keep accepts. Its watches start at the current
// version: objects of namespaces created afterwards are seen from their creation.
func startMonitorFor(keep func(string) bool) *recorder {
	GinkgoHelper()
	m, err := monitor.Start(ctx, env.Config, env.Scheme, keep)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(m.Stop)
	return &recorder{mon: m}
}

// check makes sure every change made so far has been recorded, stops the watches and replays
// the history of the given namespaces (created after the monitor started, so their whole
// history was watched); it returns the violations found and how many Jobs ran. The fence
// objects it writes are not reconciled: call it with no manager running.
func (r *recorder) check(namespaces map[string]bool) (violations []string, jobs int) {
	GinkgoHelper()
	out := r.replayAll(namespaces)
	for _, v := range out.violations {
		violations = append(violations, v.String())
	}
	return violations, out.jobs
}

// replayAll is check with the whole outcome.
func (r *recorder) replayAll(namespaces map[string]bool) replay {
	GinkgoHelper()
	res, err := r.mon.Check(ctx, namespaces)
	Expect(err).NotTo(HaveOccurred(), "the monitor could not check")
	out := replay{jobs: res.Jobs, byOp: res.ByOp, failed: res.Failed, refused: res.Refused}
	for _, v := range res.Violations {
		out.violations = append(out.violations, violation{owner: v.Owner, namespace: v.Namespace, text: v.Text})
	}
	return out
}

// terminal reports whether a Job carries a Complete or Failed condition.
func terminal(j *batchv1.Job) bool { return jobstatus.Finished(j) }
