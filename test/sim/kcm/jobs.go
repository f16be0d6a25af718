package kcm

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// The users the real controllers run as, for clients that carry them to admission.
const (
	JobControllerUser    = "system:serviceaccount:kube-system:job-controller"
	GarbageCollectorUser = "system:serviceaccount:kube-system:generic-garbage-collector"
)

// Run is how one Job's pod runs: for Duration, then it exits with success or failure.
type Run struct {
	Duration time.Duration
	Fail     bool
}

// JobOptions configure the Job controller.
type JobOptions struct {
	// Seed determines every run.
	Seed uint64
	// MinRun and MaxRun bound a run's duration (drawn uniformly in [MinRun, MaxRun)).
	// Defaults 5 s and 2 min.
	MinRun, MaxRun time.Duration
	// FailPercent is the share of runs that fail, 0 to 100. Default 0.
	FailPercent int
	// Latency is how long the controller takes to start a Job it has heard of (the real one
	// needs a sync and a pod). Default 0. A latency above zero also keeps its first write off
	// the instant of the write that created the Job, so it never interleaves with the creator's
	// next writes of the same instant.
	Latency time.Duration
	// Decide, when set, replaces the seeded draw: it is given the Job (when it starts) and the
	// seeded draw, and returns the run to play.
	Decide func(job *batchv1.Job, drawn Run) Run
	// Observe, when set, is called for every status the controller writes (for traces).
	Observe func(Transition)
	// End, when set, is called when a started Job's pod ends on its own (not when the deadline
	// stops it), before the controller writes how the Job ended: it plays what the pod leaves
	// behind (test/sim/runner writes the state a run leaves) and returns the run as it ended
	// (a run may fail at its end). It is called from the controller's goroutine with the Job
	// as it started.
	End func(ctx context.Context, job *batchv1.Job, run Run) Run
}

// Transition is one status the Job controller wrote.
type Transition struct {
	Namespace, Name string
	UID             types.UID
	// What is "started", "succeeded", "failed" or "deadline".
	What string
	At   time.Time
}

func (t Transition) String() string {
	return fmt.Sprintf("%s %s/%s uid=%s at %s", t.What, t.Namespace, t.Name, t.UID, t.At.Format(time.RFC3339Nano))
}

// JobController plays the Job controller over a client of the store.
type JobController struct {
	c    client.WithWatch
	opts JobOptions

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	running map[types.UID]context.CancelFunc
}

// StartJobController starts the controller; it runs until Stop.
func StartJobController(c client.WithWatch, o JobOptions) *JobController {
	if o.MinRun <= 0 {
		o.MinRun = 5 * time.Second
	}
	if o.MaxRun <= o.MinRun {
		o.MaxRun = max(o.MinRun+time.Second, 2*time.Minute)
	}
	ctx, cancel := context.WithCancel(context.Background())
	jc := &JobController{c: c, opts: o, ctx: ctx, cancel: cancel, running: map[types.UID]context.CancelFunc{}}
	jc.wg.Add(1)
	go jc.loop()
	return jc
}

// Stop ends the controller and every run it plays (the Jobs stay as they are: a new controller
// over the same store picks them up).
func (jc *JobController) Stop() {
	jc.cancel()
	jc.wg.Wait()
}

// Draw is the seeded run of a Job: a pure function of the seed and the Job's identity.
func (jc *JobController) Draw(job *batchv1.Job) Run {
	h := fnv.New64a()
	_, _ = h.Write([]byte(job.Namespace + "/" + job.Name + "/" + string(job.UID)))
	r := rand.New(rand.NewPCG(jc.opts.Seed, h.Sum64()))
	run := Run{Duration: jc.opts.MinRun + time.Duration(r.Int64N(int64(jc.opts.MaxRun-jc.opts.MinRun)))}
	run.Fail = r.IntN(100) < jc.opts.FailPercent
	if jc.opts.Decide != nil {
		run = jc.opts.Decide(job.DeepCopy(), run)
	}
	return run
}

// loop watches Jobs (the current state, then every change), reopening the watch from the
// current state when it ends (handle is idempotent; a run whose Job went meanwhile stops at
// its write).
func (jc *JobController) loop() {
	defer jc.wg.Done()
	logger := log.FromContext(jc.ctx).WithValues("controller", "job")
	for jc.ctx.Err() == nil {
		w, err := jc.c.Watch(jc.ctx, &batchv1.JobList{})
		if err != nil {
			logger.Info("watch failed; retrying in one second", "error", err.Error())
			select {
			case <-time.After(time.Second):
			case <-jc.ctx.Done():
			}
			continue
		}
		for ev := range w.ResultChan() {
			job, ok := ev.Object.(*batchv1.Job)
			if !ok {
				continue
			}
			jc.handle(ev.Type, job)
		}
		w.Stop()
	}
}

// handle starts, resumes or stops the run of one Job.
func (jc *JobController) handle(typ watch.EventType, job *batchv1.Job) {
	jc.mu.Lock()
	defer jc.mu.Unlock()
	if typ == watch.Deleted {
		if stop, ok := jc.running[job.UID]; ok {
			stop()
			delete(jc.running, job.UID)
		}
		return
	}
	if _, ok := jc.running[job.UID]; ok || finished(job) {
		return
	}
	if job.Status.StartTime == nil && job.Spec.Suspend != nil && *job.Spec.Suspend {
		return
	}
	ctx, stop := context.WithCancel(jc.ctx)
	jc.running[job.UID] = stop
	jc.wg.Add(1)
	go jc.play(ctx, job.DeepCopy())
}

// play starts the Job (unless it has started), waits for its run or its deadline, and writes
// how it ended.
func (jc *JobController) play(ctx context.Context, job *batchv1.Job) {
	defer jc.wg.Done()
	defer jc.forget(job.UID)
	if job.Status.StartTime == nil && jc.opts.Latency > 0 {
		t := time.NewTimer(jc.opts.Latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
	start := time.Now()
	if job.Status.StartTime != nil {
		start = job.Status.StartTime.Time
	} else if !jc.write(ctx, job, "started", func(j *batchv1.Job) {
		at := metav1.NewTime(start)
		j.Status.StartTime = &at
		j.Status.Active = 1
	}) {
		return
	}
	run := jc.Draw(job)
	end, what := start.Add(run.Duration), "succeeded"
	if run.Fail {
		what = "failed"
	}
	if d := job.Spec.ActiveDeadlineSeconds; d != nil && time.Duration(*d)*time.Second <= run.Duration {
		end, what = start.Add(time.Duration(*d)*time.Second), "deadline"
	}
	t := time.NewTimer(time.Until(end))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return
	}
	if what != "deadline" && jc.opts.End != nil {
		if run = jc.opts.End(ctx, job.DeepCopy(), run); run.Fail {
			what = "failed"
		} else {
			what = "succeeded"
		}
	}
	jc.write(ctx, job, what, func(j *batchv1.Job) { finish(j, what, time.Now()) })
}

// forget drops a run that ended.
func (jc *JobController) forget(uid types.UID) {
	jc.mu.Lock()
	defer jc.mu.Unlock()
	if stop, ok := jc.running[uid]; ok {
		stop()
		delete(jc.running, uid)
	}
}

// write applies change to the Job's status, from a fresh read, retrying on Conflict; it reports
// false when the Job is gone (or is another Job of the same name), is finished, or the
// controller stops.
func (jc *JobController) write(ctx context.Context, job *batchv1.Job, what string, change func(*batchv1.Job)) bool {
	logger := log.FromContext(ctx).WithValues("job", job.Namespace+"/"+job.Name)
	for ctx.Err() == nil {
		cur := &batchv1.Job{}
		if err := jc.c.Get(ctx, client.ObjectKeyFromObject(job), cur); err != nil {
			if !apierrors.IsNotFound(err) {
				logger.Info("read failed", "error", err.Error())
			}
			return false
		}
		if cur.UID != job.UID || finished(cur) {
			return false
		}
		change(cur)
		err := jc.c.Status().Update(ctx, cur)
		if err == nil {
			if jc.opts.Observe != nil {
				jc.opts.Observe(Transition{Namespace: job.Namespace, Name: job.Name, UID: job.UID, What: what, At: time.Now()})
			}
			return true
		}
		if !apierrors.IsConflict(err) {
			logger.Info("status write failed; retrying in one second", "status", what, "error", err.Error())
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
		}
	}
	return false
}

// finish writes the end of a run as the Job controller does (backoffLimit 0, one pod).
func finish(j *batchv1.Job, what string, now time.Time) {
	at := metav1.NewTime(now)
	j.Status.Active = 0
	target, final, reason := batchv1.JobFailureTarget, batchv1.JobFailed, "BackoffLimitExceeded"
	msg := "Job has reached the specified backoff limit"
	switch what {
	case "succeeded":
		target, final, reason, msg = batchv1.JobSuccessCriteriaMet, batchv1.JobComplete, "CompletionsReached", "Reached expected number of succeeded pods"
		j.Status.Succeeded = 1
		j.Status.CompletionTime = &at
	case "deadline":
		reason, msg = "DeadlineExceeded", "Job was active longer than specified deadline"
		j.Status.Failed = 1
	default:
		j.Status.Failed = 1
	}
	for _, t := range []batchv1.JobConditionType{target, final} {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue,
			LastProbeTime: at, LastTransitionTime: at, Reason: reason, Message: msg})
	}
}

// finished reports a Job with a True Complete or Failed condition.
func finished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
