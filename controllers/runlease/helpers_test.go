package runlease_test

import (
	"fmt"
	"sync/atomic"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

var nsCounter atomic.Int64

// newNamespace creates a namespace of its own for a spec. envtest runs no namespace controller,
// so namespaces are never deleted; each spec simply uses a fresh one.
func newNamespace() string {
	name := fmt.Sprintf("rl-%d-%d", time.Now().UnixNano()%100000, nsCounter.Add(1))
	Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	return name
}

// newClient builds a separate client (its own connection pool and rate limiter), as a second
// manager would have.
func newClient() client.Client {
	c, err := client.New(env.Config, client.Options{Scheme: env.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// fakeClock starts at the real time, so the API server's creation timestamps stay comparable.
func fakeClock() *clocktesting.FakeClock {
	return clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
}

func options(clk *clocktesting.FakeClock, gate bool) runlease.Options {
	o := runlease.DefaultOptions()
	o.Clock = clk
	o.ClusterOperationGate = gate
	return o
}

// newManager builds a Manager over its own uncached client, used both to write and to read
// live (an uncached client reads from the API server, as mgr.GetAPIReader() does).
func newManager(clk *clocktesting.FakeClock, gate bool) *runlease.Manager {
	c := newClient()
	return runlease.New(c, c, options(clk, gate))
}

func clusterOwner(ns string) runlease.Owner {
	return runlease.Owner{Namespace: ns, Kind: infrav1.TerraformClusterKind, Name: "tc", Cluster: "c1"}
}

func machineOwner(ns, name string) runlease.Owner {
	return runlease.Owner{Namespace: ns, Kind: infrav1.TerraformMachineKind, Name: name, Cluster: "c1"}
}

func poolOwner(ns, name string) runlease.Owner {
	return runlease.Owner{Namespace: ns, Kind: infrav1.TerraformMachinePoolKind, Name: name, Cluster: "c1"}
}

func jobName(o runlease.Owner, seq int64) string { return naming.JobName(o.Suffix(), seq) }

func request(o runlease.Owner, seq int64, op infrav1.Operation) runlease.Request {
	return runlease.Request{Owner: o, Holder: jobName(o, seq), Operation: op}
}

// createJob creates the Job the engine would create: owner labels, one container, never
// restarted. envtest runs no Job controller: a new Job has no status, which is "running" here.
func createJob(o runlease.Owner, name string) *batchv1.Job {
	j := jobSpec(o, name)
	Expect(admin.Create(ctx, j)).To(Succeed())
	return j
}

// jobSpec is the Job createJob creates, not yet created.
func jobSpec(o runlease.Owner, name string) *batchv1.Job {
	return objects.Job(o.Namespace, name).Of(o.Kind, o.Name, o.Cluster).Deadline(infrav1.DefaultActiveDeadlineSeconds).Obj()
}

// startJob marks a Job started (startTime, one active pod): running, not finished.
func startJob(j *batchv1.Job) {
	Expect(admin.Get(ctx, client.ObjectKeyFromObject(j), j)).To(Succeed())
	j.Status.StartTime = ptr.To(metav1.Now())
	j.Status.Active = 1
	Expect(admin.Status().Update(ctx, j)).To(Succeed())
}

// finishJob sets the conditions the 1.36 API server demands of a finished Job: a start time,
// and SuccessCriteriaMet + Complete with a completion time, or FailureTarget + Failed.
func finishJob(j *batchv1.Job, succeeded bool) {
	Expect(admin.Get(ctx, client.ObjectKeyFromObject(j), j)).To(Succeed())
	now := metav1.Now()
	if j.Status.StartTime == nil {
		j.Status.StartTime = &now
	}
	j.Status.Active = 0
	cond := func(t batchv1.JobConditionType) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now, Reason: "Test"}
	}
	if succeeded {
		j.Status.Succeeded = 1
		j.Status.CompletionTime = &now
		j.Status.Conditions = append(j.Status.Conditions, cond(batchv1.JobSuccessCriteriaMet), cond(batchv1.JobComplete))
	} else {
		j.Status.Failed = 1
		j.Status.Conditions = append(j.Status.Conditions, cond(batchv1.JobFailureTarget), cond(batchv1.JobFailed))
	}
	Expect(admin.Status().Update(ctx, j)).To(Succeed())
}

// createPod creates a pod of Job jobName in phase, carrying label alone of the two labels
// that name its Job.
func createPod(ns, jobName, label string, phase corev1.PodPhase) *corev1.Pod {
	p := objects.PodOf(objects.Job(ns, jobName).Obj(), "").JobLabel(label).
		With(func(p *corev1.Pod) { p.GenerateName = jobName + "-" }).Obj()
	Expect(admin.Create(ctx, p)).To(Succeed())
	setPodPhase(p, phase)
	return p
}

func setPodPhase(p *corev1.Pod, phase corev1.PodPhase) {
	Expect(admin.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
	p.Status.Phase = phase
	Expect(admin.Status().Update(ctx, p)).To(Succeed())
}

// getLease returns the lease, or nil when the API server has none.
func getLease(ns, name string) *coordinationv1.Lease {
	var l coordinationv1.Lease
	err := admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &l)
	if apierrors.IsNotFound(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	return &l
}

func holderOf(ns, name string) string {
	l := getLease(ns, name)
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// deleteAllLeases empties a namespace's Leases between rounds.
func deleteAllLeases(ns string) {
	Expect(admin.DeleteAllOf(ctx, &coordinationv1.Lease{}, client.InNamespace(ns))).To(Succeed())
	Eventually(func() int {
		var l coordinationv1.LeaseList
		Expect(admin.List(ctx, &l, client.InNamespace(ns))).To(Succeed())
		return len(l.Items)
	}).Should(BeZero())
}

func jobByName(ns, name string) *batchv1.Job {
	var j batchv1.Job
	Expect(admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &j)).To(Succeed())
	return &j
}
