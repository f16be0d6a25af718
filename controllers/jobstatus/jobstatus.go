package jobstatus

import (
	"context"
	"fmt"
	"slices"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// Pod labels that name a pod's Job: the current one and the legacy one. Either is accepted.
const (
	JobNameLabel       = runnerapi.PodJobNameLabel
	LegacyJobNameLabel = runnerapi.PodLegacyJobNameLabel
)

// Finished reports whether the Job carries a Complete or Failed condition that is True.
func Finished(job *batchv1.Job) bool {
	if job == nil {
		return false
	}
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// Succeeded reports whether the Job carries a Complete condition that is True.
func Succeeded(job *batchv1.Job) bool {
	if job == nil {
		return false
	}
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// Decided returns the first True condition by which the Job controller has said how the Job
// ends, and whether it means success: Complete or Failed, or the interim SuccessCriteriaMet or
// FailureTarget that it sets as soon as it has decided, while it still stops the pods. It is
// for reading a run's outcome as early as it is known (a deadline's FailureTarget already says
// the run was interrupted); it never says that a Job is over: a decided Job may still have a
// pod running, and only Finished (Complete or Failed) and the pods (Runs) say that.
func Decided(job *batchv1.Job) (*batchv1.JobCondition, bool) {
	if job == nil {
		return nil, false
	}
	for i := range job.Status.Conditions {
		c := &job.Status.Conditions[i]
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobSuccessCriteriaMet:
			return c, true
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			return c, false
		}
	}
	return nil, false
}

// PodTerminal reports whether a pod is Succeeded or Failed (runnerapi.PodTerminal, the one
// rule the runner's state channel applies too).
func PodTerminal(p *corev1.Pod) bool {
	return runnerapi.PodTerminal(string(p.Status.Phase))
}

// NonTerminal returns the names of the pods that are neither Succeeded nor Failed, sorted.
func NonTerminal(pods []corev1.Pod) []string {
	var out []string
	for i := range pods {
		if !PodTerminal(&pods[i]) {
			out = append(out, pods[i].Name)
		}
	}
	slices.Sort(out)
	return out
}

// Summary is what the rule needs to know of a Job: whether the API server has it, whether it
// finished, and which of its pods are not terminal.
type Summary struct {
	// Found is false when the API server has no Job of that name.
	Found bool
	// Finished: the Job carries a Complete or Failed condition (Finished).
	Finished bool
	// LivePods names the Job's pods that are neither Succeeded nor Failed.
	LivePods []string
}

// Runs is the rule: a Job runs while it exists and has not finished, or while a pod of it is
// not terminal.
func (s Summary) Runs() bool { return (s.Found && !s.Finished) || len(s.LivePods) > 0 }

// Summarize summarises job (nil when the API server has none) and its pods.
func Summarize(job *batchv1.Job, pods []corev1.Pod) Summary {
	return Summary{Found: job != nil, Finished: Finished(job), LivePods: NonTerminal(pods)}
}

// Runs reports whether a Job runs (Summary.Runs). pods must be the Job's pods as ListPods
// returns them; callers that skip the pod listing for an unfinished Job lose nothing, since
// such a Job runs anyway.
func Runs(job *batchv1.Job, pods []corev1.Pod) bool { return Summarize(job, pods).Runs() }

// ListPods lists, through reader (the API server, never a cache), the pods of the Job named
// job in namespace by either Job-name label, each pod once.
func ListPods(ctx context.Context, reader client.Reader, namespace, job string) ([]corev1.Pod, error) {
	return listPods(ctx, reader, namespace, job, nil)
}

// listPods lists by either Job-name label with raw list options (nil: a consistent read). The
// two lists are made at once: each may wait for the API server's watch cache.
func listPods(ctx context.Context, reader client.Reader, namespace, job string, raw *metav1.ListOptions) ([]corev1.Pod, error) {
	labels := []string{JobNameLabel, LegacyJobNameLabel}
	lists := make([]corev1.PodList, len(labels))
	errs := make([]error, len(labels))
	var wg sync.WaitGroup
	for i, label := range labels {
		opts := []client.ListOption{client.InNamespace(namespace), client.MatchingLabels{label: job}}
		if raw != nil {
			opts = append(opts, &client.ListOptions{Raw: raw.DeepCopy()})
		}
		wg.Go(func() { errs[i] = reader.List(ctx, &lists[i], opts...) })
	}
	wg.Wait()
	var out []corev1.Pod
	seen := map[types.UID]bool{}
	for i := range lists {
		if errs[i] != nil {
			return nil, fmt.Errorf("list pods of job %s/%s: %w", namespace, job, errs[i])
		}
		for _, p := range lists[i].Items {
			if !seen[p.UID] {
				seen[p.UID] = true
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// Live is what the API server says, right now, about one Job by name.
type Live struct {
	// Name of the Job.
	Name string
	// Job as read; nil when the API server has none.
	Job *batchv1.Job
	// Pods of the Job, listed only when the Job is gone or finished (an unfinished Job runs
	// whatever its pods do); PodsListed says whether they were.
	Pods       []corev1.Pod
	PodsListed bool
}

// Runs applies the package's rule to what was read.
func (l Live) Runs() bool { return Runs(l.Job, l.Pods) }

// GetJob reads the Job named name through reader; nil when reader has none.
func GetJob(ctx context.Context, reader client.Reader, namespace, name string) (*batchv1.Job, error) {
	j := &batchv1.Job{}
	err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, j)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read job %s/%s: %w", namespace, name, err)
	}
	return j, nil
}

// Read reads the Job named name through reader and, when it is gone or finished, its pods.
// known, when not nil, is that Job as the caller just read it live, and saves the read.
func Read(ctx context.Context, reader client.Reader, namespace, name string, known *batchv1.Job) (Live, error) {
	l := Live{Name: name, Job: known}
	if l.Job == nil {
		j, err := GetJob(ctx, reader, namespace, name)
		if err != nil {
			return l, err
		}
		l.Job = j
	}
	if l.Job != nil && !Finished(l.Job) {
		return l, nil
	}
	pods, err := ListPods(ctx, reader, namespace, name)
	if err != nil {
		return l, err
	}
	l.Pods, l.PodsListed = pods, true
	return l, nil
}

// ListPodsOf lists the pods of the Job named name in namespace, like ListPods, but reads a
// finished Job's pods without waiting for the API server's watch cache to catch up with etcd
// when it can do so without losing anything:
//
//   - job is the Job as the caller just read it live (a quorum read). When it has finished
//     (Finished), its pods are first listed no older than the Job's own resourceVersion
//     (resourceVersionMatch=NotOlderThan). The Job controller writes Complete or Failed only
//     once every pod of the Job is terminal, and never starts a pod for a finished Job, so that
//     list already holds every pod of the Job in a state at least as recent as the one in which
//     it finished; a pod terminal there stays terminal.
//   - When that list shows a pod that is not terminal (it may have ended since), or cannot be
//     served, the pods are listed again with a consistent read, which decides.
//   - A Job that is gone, not finished or not given is listed with a consistent read (ListPods).
//
// A consistent LIST waits until the watch cache holds the latest etcd revision, which takes up
// to a watch-progress period (100 ms) when pods are rarely written; the first list does not.
func ListPodsOf(ctx context.Context, reader client.Reader, namespace, name string, job *batchv1.Job) ([]corev1.Pod, error) {
	if job == nil || job.Name != name || job.Namespace != namespace || job.ResourceVersion == "" || !Finished(job) {
		return ListPods(ctx, reader, namespace, name)
	}
	pods, err := listPods(ctx, reader, namespace, name, &metav1.ListOptions{
		ResourceVersion: job.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil || len(NonTerminal(pods)) > 0 {
		return ListPods(ctx, reader, namespace, name)
	}
	return pods, nil
}
