package chaos_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	"github.com/captf/cluster-api-provider-terraform/test/monitor"
)

// recorder is the invariant monitor of test/monitor (I1-I5 and I7 of ARCHITECTURE.md, replayed
// in etcd revision order) as the specs use it: started and stopped with the spec, failing it on
// an error of its own. envtest's Jobs get their pods from the executor (envtest.StartJob); a
// run lasts until its Job has ended and its pod is terminal or gone.
type recorder struct{ mon *monitor.Monitor }

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
	for _, v := range out.Violations {
		violations = append(violations, v.String())
	}
	return violations, out.Jobs
}

// replayAll is check with the whole outcome.
func (r *recorder) replayAll(namespaces map[string]bool) monitor.Result {
	GinkgoHelper()
	res, err := r.mon.Check(ctx, namespaces)
	Expect(err).NotTo(HaveOccurred(), "the monitor could not check")
	return res
}

// terminal reports whether a Job carries a Complete or Failed condition.
func terminal(j *batchv1.Job) bool { return jobstatus.Finished(j) }
