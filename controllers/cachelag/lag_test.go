package cachelag_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
	"github.com/captf/cluster-api-provider-terraform/test/stalecache"
)

// scene is one TerraformCluster in its own namespace. It is created unpaused but without its
// Cluster, so passes only set block-move and wait; the test then arranges Jobs, leases and
// status, and pauses it (as clusterctl move does), at which point "no lag" would clear
// block-move at once.
type scene struct {
	ns string
	tc *infrav1.TerraformCluster
}

func newScene(extraAnnotations map[string]string) *scene {
	GinkgoHelper()
	return newSceneIn(kit.Namespace(), "c1", extraAnnotations)
}

func newSceneIn(ns, name string, extraAnnotations map[string]string) *scene {
	GinkgoHelper()
	s := &scene{ns: ns}
	s.tc = objects.Cluster(s.ns, name).Cluster("absent").Finalizer().Annotations(extraAnnotations).Spec(func(sp *infrav1.TerraformSpec) {
		sp.Module = infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "m"}}
		sp.Variables = &runtime.RawExtension{Raw: []byte(`{"a":1}`)}
	}).Obj()
	Expect(k8s.Create(ctx, s.tc)).To(Succeed())
	Eventually(annotations(s.tc)).Should(HaveKey(infrav1.BlockMoveAnnotation), "a normal pass sets block-move")
	return s
}

// markActive writes job into the object's status.activeJob, as a pass does right after the create.
func (s *scene) markActive(job *batchv1.Job) {
	GinkgoHelper()
	Eventually(func() error {
		get(s.tc)
		s.tc.Status.ActiveJob = &infrav1.ActiveJob{Name: job.Name, Operation: infrav1.OperationApply}
		return k8s.Status().Update(ctx, s.tc)
	}).Should(Succeed())
}

// pauseKeepsMarksUntil pauses the object while something of its Job still runs (what
// runs says what): block-move and status.activeJob stay; then end ends it, and both go.
func (s *scene) pauseKeepsMarksUntil(runs, ends string, end func()) {
	GinkgoHelper()
	s.pause()
	Consistently(annotations(s.tc), "3s").Should(HaveKey(infrav1.BlockMoveAnnotation), runs+": block-move stays")
	Expect(get(s.tc).Status.ActiveJob).NotTo(BeNil(), runs+": activeJob stays")

	By(ends)
	end()
	Eventually(annotations(s.tc)).ShouldNot(HaveKey(infrav1.BlockMoveAnnotation))
	Eventually(func() *infrav1.ActiveJob { return get(s.tc).Status.ActiveJob }).Should(BeNil())
}

// pause pauses the object, after which only lag can keep block-move on it.
func (s *scene) pause() {
	GinkgoHelper()
	update(s.tc, func(tc *infrav1.TerraformCluster) { tc.Annotations[infrav1.PausedAnnotation] = "" })
}

func (s *scene) suffix() string {
	return naming.StateSuffix(s.ns, infrav1.TerraformClusterKind, s.tc.Name)
}

// runningJob creates the apply Job of run seq for owner, running (as the Job controller shows
// it), with its running pod.
func runningJob(owner *infrav1.TerraformCluster, seq int64) (*batchv1.Job, *corev1.Pod) {
	return runningJobOf(owner, seq, infrav1.OperationApply)
}

// runningJobOf is runningJob for any operation.
func runningJobOf(owner *infrav1.TerraformCluster, seq int64, op infrav1.Operation) (*batchv1.Job, *corev1.Pod) {
	GinkgoHelper()
	j, err := jobs.Build(jobs.Params{
		Owner: jobs.Owner{APIVersion: infrav1.GroupVersion.String(), Kind: infrav1.TerraformClusterKind,
			Name: owner.Name, Namespace: owner.Namespace, UID: owner.UID, Cluster: "c1"},
		Suffix: naming.StateSuffix(owner.Namespace, infrav1.TerraformClusterKind, owner.Name), Seq: seq,
		Operation: op, InputsHash: "v1-test", Spec: owner.Spec.TerraformSpec,
		Defaults: jobs.Defaults{RunnerImage: "captf/manager:test"},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Create(ctx, j)).To(Succeed())
	pod, err := envtest.StartJob(ctx, k8s, j)
	Expect(err).NotTo(HaveOccurred())
	return j, pod
}

// runLease creates the run lease of the TerraformCluster c1 of ns the way the controller
// does (labels and all), held by holder.
func runLease(ns, suffix, holder string) {
	GinkgoHelper()
	runLeaseAt(ns, suffix, holder, time.Now())
}

// runLeaseAt is runLease taken (and last renewed) at t.
func runLeaseAt(ns, suffix, holder string, t time.Time) {
	GinkgoHelper()
	Expect(k8s.Create(ctx, objects.Lease(ns, naming.RunLeaseName(suffix)).
		Labels(naming.OwnerLabels(infrav1.TerraformClusterKind, "c1", "absent", "")).Label(infrav1.LeaseLabel, infrav1.LeaseKindRun).
		Annotation(infrav1.LeaseOpAnnotation, string(infrav1.OperationApply)).
		Holder(holder).Renewed(metav1.NewMicroTime(t), 4500).Obj())).To(Succeed())
}

func annotations(o client.Object) func() map[string]string {
	return func() map[string]string {
		fresh := o.DeepCopyObject().(client.Object)
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(o), fresh)).To(Succeed())
		return fresh.GetAnnotations()
	}
}

func hiddenNow() int64 { return stale.Hidden() }

var _ = Describe("Cache lag", func() {
	It("waits when status.activeJob names a Job the cache hides", func() {
		s := newScene(nil)
		job, _ := runningJob(s.tc, 1)
		defer stale.Add(stalecache.ByName(&batchv1.Job{}, s.ns, job.Name))()
		s.markActive(job)
		before := hiddenNow()
		s.pause()

		Consistently(annotations(s.tc)).Should(HaveKey(infrav1.BlockMoveAnnotation))
		Expect(get(s.tc).Status.ActiveJob).NotTo(BeNil(), "activeJob must not be cleared while its Job runs")
		Expect(hiddenNow()).To(BeNumerically(">", before), "the double must actually have hidden the Job")
	})

	It("waits when status.activeJob names a finished Job the cache hides whose pod still runs, with no run lease to say so", func() {
		s := newScene(nil)
		job, pod := runningJob(s.tc, 1)
		defer stale.Add(stalecache.ByName(&batchv1.Job{}, s.ns, job.Name))()
		s.markActive(job)
		// The Job controller marked the Job failed (its deadline) while its pod still
		// terminates; no run lease exists, so only the live read of status.activeJob's Job and
		// its pods can tell that something still runs.
		Expect(envtest.FinishJob(ctx, k8s, get(job), nil, false, "")).To(Succeed())
		s.pauseKeepsMarksUntil("a pod of the Job still runs", "the pod ends: the marks go, although the cache never lists the Job", func() {
			Expect(envtest.FinishJob(ctx, k8s, get(job), pod, false, "")).To(Succeed())
		})
	})

	It("judges a Job whose owner labels were stripped by the Job itself: kept while it runs, cleared once it ended", func() {
		s := newScene(nil)
		job, pod := runningJob(s.tc, 1)
		s.markActive(job)
		// Its labels go (as only the manager's own account may still do): the label-scoped cache
		// loses it for good, and the run lease names no holder.
		// (Not to an empty map: the API server defaults empty Job labels from the pod template.)
		Eventually(func() error {
			j := get(job)
			j.Labels = map[string]string{"test.captf.io/stripped": "true"}
			return k8s.Update(ctx, j)
		}).Should(Succeed())
		Expect(get(job).Labels).NotTo(HaveKey(infrav1.ManagedLabel))
		s.pauseKeepsMarksUntil("the Job still runs", "the Job ends: the marks go, although the cache never lists it again", func() {
			Expect(envtest.FinishJob(ctx, k8s, get(job), pod, true, "")).To(Succeed())
		})
	})

	It("judges a Job the cache lists under the object's labels but not under one of its Job names: kept while it runs, cleared once it ended", func() {
		s := newScene(nil)
		// Built as the object's Job (labels, controller owner reference), under a name no run
		// of the object takes: the cache lists it, the decision judges only the object's Job
		// names, and no run lease names it. status.activeJob names it (adding is never
		// guarded), so only a live read of that Job can tell that it runs.
		j, err := jobs.Build(jobs.Params{
			Owner: jobs.Owner{APIVersion: infrav1.GroupVersion.String(), Kind: infrav1.TerraformClusterKind,
				Name: s.tc.Name, Namespace: s.ns, UID: s.tc.UID, Cluster: "c1"},
			Suffix: s.suffix(), Seq: 1, Operation: infrav1.OperationApply, InputsHash: "v1-test",
			Spec: s.tc.Spec.TerraformSpec, Defaults: jobs.Defaults{RunnerImage: "captf/manager:test"},
		})
		Expect(err).NotTo(HaveOccurred())
		j.Name = "c1-by-hand"
		Expect(k8s.Create(ctx, j)).To(Succeed())
		pod, err := envtest.StartJob(ctx, k8s, j)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() error { return cached.Get(ctx, client.ObjectKeyFromObject(j), &batchv1.Job{}) }).Should(Succeed(), "the cache lists the Job")
		s.markActive(j)
		s.pauseKeepsMarksUntil("the Job still runs", "the Job ends: the marks go", func() {
			Expect(envtest.FinishJob(ctx, k8s, get(j), pod, true, "")).To(Succeed())
		})
	})

	It("waits when block-move is written but activeJob is not, and the lease holder is hidden", func() {
		s := newScene(nil)
		// Hidden from its creation: no pass ever saw it, so status.activeJob stays unset.
		defer stale.Add(stalecache.ByName(&batchv1.Job{}, s.ns, naming.JobName(s.suffix(), 1)))()
		job, _ := runningJob(s.tc, 1)
		runLease(s.ns, s.suffix(), job.Name)
		s.pause()
		Expect(get(s.tc).Status.ActiveJob).To(BeNil())
		Consistently(annotations(s.tc)).Should(HaveKey(infrav1.BlockMoveAnnotation))
	})

	It("sees no lag when the lease holder is a Job of another object", func() {
		s := newScene(nil)
		other := newSceneIn(s.ns, "c2", nil)
		job, _ := runningJob(other.tc, 1)
		// The other object's running Job sits in this object's lease: evidence of nothing here.
		runLease(s.ns, s.suffix(), job.Name)
		s.pause()
		Eventually(annotations(s.tc)).ShouldNot(HaveKey(infrav1.BlockMoveAnnotation))
	})

	It("keeps block-move while the run lease names a Job another pass may still create, and while that Job runs", func() {
		// The soak's seed 1495, played step by step: a pass of another manager took the run
		// lease for Job 1 and wrote block-move (newScene's pass did that write); the object is
		// paused before that Job exists. Nothing runs anywhere yet, but the lease is inside its
		// grace: the Job may still be created, so block-move stays.
		s := newScene(nil)
		runLease(s.ns, s.suffix(), naming.JobName(s.suffix(), 1))
		s.pause()
		Consistently(annotations(s.tc)).Should(HaveKey(infrav1.BlockMoveAnnotation), "the lease's Job may still be created")

		By("the other pass creates its Job: block-move stays while it runs")
		job, pod := runningJob(s.tc, 1)
		Consistently(annotations(s.tc)).Should(HaveKey(infrav1.BlockMoveAnnotation), "the lease's Job runs")

		By("the Job ends: block-move goes")
		Expect(envtest.FinishJob(ctx, k8s, get(job), pod, true, "")).To(Succeed())
		Eventually(annotations(s.tc)).ShouldNot(HaveKey(infrav1.BlockMoveAnnotation))
	})

	It("sees no lag when the lease holder is not on the API server and the lease is past its grace", func() {
		s := newScene(nil)
		// Taken two minutes ago (the grace is one): whoever took it did not create its Job.
		runLeaseAt(s.ns, s.suffix(), naming.JobName(s.suffix(), 1), time.Now().Add(-2*time.Minute))
		s.pause()
		Eventually(annotations(s.tc)).ShouldNot(HaveKey(infrav1.BlockMoveAnnotation))
	})

	It("keeps the finalizer of a deleting object whose hidden Job holds the run lease", func() {
		s := newScene(map[string]string{infrav1.DeleteForMoveAnnotation: ""})
		unhide := stale.Add(stalecache.ByName(&batchv1.Job{}, s.ns, naming.JobName(s.suffix(), 1)))
		defer unhide()
		job, pod := runningJob(s.tc, 1)
		runLease(s.ns, s.suffix(), job.Name)
		s.pause() // clusterctl move pauses before it deletes: only a paused move deletion skips the destroy
		Expect(k8s.Delete(ctx, s.tc)).To(Succeed())
		Consistently(func() bool {
			return controllerutil.ContainsFinalizer(get(s.tc), infrav1.Finalizer)
		}).Should(BeTrue())

		By("once the cache catches up and the Job and its pod end, the move deletion lets the object go")
		unhide()
		Expect(envtest.FinishJob(ctx, k8s, get(job), pod, true, "")).To(Succeed())
		Eventually(func() bool { return kit.Gone(s.tc)() }).Should(BeTrue())
	})

	It("never takes a Job it created a moment ago, and the cache hides, as missing or failed", func() {
		ns := kit.Namespace()
		Expect(k8s.Create(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.TerraformClusterKind, Name: "c1"}}})).To(Succeed())
		// Hide every Job for its first 4 seconds: longer than several passes.
		defer stale.Add(stalecache.Younger(&batchv1.Job{}, 4*time.Second, time.Now))()
		before := hiddenNow()
		s := newSceneIn(ns, "c1", nil)
		update(s.tc, func(tc *infrav1.TerraformCluster) { tc.Labels[clusterv1.ClusterNameLabel] = "c1" })
		Eventually(func() int { return len(kit.JobsOf(s.tc, infrav1.TerraformClusterKind)) }).Should(Equal(1))
		Consistently(func(g Gomega) {
			g.Expect(kit.JobsOf(s.tc, infrav1.TerraformClusterKind)).To(HaveLen(1), "a hidden Job must not be created twice")
			c := envtest.Condition(get(s.tc), infrav1.ApplyJobSucceededCondition)
			if c != nil {
				g.Expect(c.Status).NotTo(Equal(metav1.ConditionFalse), "a hidden Job must not be reported failed")
			}
		}, "5s").Should(Succeed())
		Expect(hiddenNow()).To(BeNumerically(">", before))
		Expect(get(s.tc).Status.ActiveJob).NotTo(BeNil())
	})

	It("never takes a finished Job of its current run, which the cache hides, as the one it starts: it looks again and counts it", func() {
		ns := kit.Namespace()
		Expect(k8s.Create(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.TerraformClusterKind, Name: "c1"}}})).To(Succeed())
		s := newSceneIn(ns, "c1", nil)
		// Run 1 already ended (another attempt started it, and its bookkeeping lost a
		// conflict), and the cache does not show it: the run sequence still says 1.
		unhide := stale.Add(stalecache.ByName(&batchv1.Job{}, ns, naming.JobName(s.suffix(), 1)))
		defer unhide()
		job, pod := runningJob(s.tc, 1)
		Expect(statetest.Write(ctx, k8s, ns, s.suffix(), statetest.Cluster("10.0.0.9", 6443))).To(Succeed())
		Expect(envtest.FinishJob(ctx, k8s, get(job), pod, true, "")).To(Succeed())
		before := hiddenNow()
		update(s.tc, func(tc *infrav1.TerraformCluster) { tc.Labels[clusterv1.ClusterNameLabel] = "c1" })
		Eventually(hiddenNow).Should(BeNumerically(">", before), "a pass looked for the Job")
		Consistently(func(g Gomega) {
			g.Expect(get(s.tc).Status.ActiveJob).To(BeNil(), "a Job that ended is never reported as the one running")
			g.Expect(kit.JobsOf(s.tc, infrav1.TerraformClusterKind)).To(HaveLen(1))
		}, "3s").Should(Succeed())

		By("the cache shows the Job (no event of it comes again): the next look counts it")
		unhide()
		Eventually(func() *infrav1.LastRun { return get(s.tc).Status.LastRun }, "20s").Should(
			And(Not(BeNil()), HaveField("Job", job.Name), HaveField("Outcome", infrav1.RunSucceeded)))
		Expect(get(s.tc).Spec.ControlPlaneEndpoint.Host).To(Equal("10.0.0.9"))
	})

	It("does not clean up a deleting object while its lease may still get its Job", func() {
		// A lease inside the grace whose Job is not created yet: the finalizer stays, and the
		// cleanup must not delete state and leases under it: another manager may be about to
		// create that Job.
		s := newScene(nil)
		runLease(s.ns, s.suffix(), naming.JobName(s.suffix(), 1))
		Expect(k8s.Delete(ctx, s.tc)).To(Succeed())
		Consistently(func() bool {
			return controllerutil.ContainsFinalizer(get(s.tc), infrav1.Finalizer)
		}).Should(BeTrue())

		By("the Job (its destroy) appears and ends: the lease frees, and the object goes")
		job, pod := runningJobOf(s.tc, 1, infrav1.OperationDestroy)
		Expect(envtest.FinishJob(ctx, k8s, get(job), pod, true, "")).To(Succeed())
		Eventually(func() bool { return kit.Gone(s.tc)() }).Should(BeTrue())
	})

	It("keeps everything while a finished Job's pod still runs", func() {
		s := newScene(map[string]string{infrav1.DeleteForMoveAnnotation: ""})
		job, pod := runningJob(s.tc, 1)
		runLease(s.ns, s.suffix(), job.Name)
		Expect(k8s.Delete(ctx, s.tc)).To(Succeed())
		// The Job controller marked the Job failed (deadline) but the pod still terminates.
		Expect(envtest.FinishJob(ctx, k8s, get(job), nil, false, "")).To(Succeed())
		Consistently(func() bool {
			return controllerutil.ContainsFinalizer(get(s.tc), infrav1.Finalizer)
		}).Should(BeTrue())
		Expect(get(s.tc).Annotations).To(HaveKey(infrav1.BlockMoveAnnotation))

		By("the pod ends: the object goes")
		Expect(envtest.FinishJob(ctx, k8s, get(job), pod, false, "")).To(Succeed())
		Eventually(func() bool { return kit.Gone(s.tc)() }).Should(BeTrue())
	})
})
