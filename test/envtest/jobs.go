package envtest

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// envtest runs no Job controller and no kubelet: these helpers play them, writing the status
// a real cluster would write, through the real API server (which validates it).

// StartJob marks a Job started and creates its running pod (named <job>-pod).
func StartJob(ctx context.Context, c client.Client, job *batchv1.Job) (*corev1.Pod, error) {
	now := metav1.Now()
	job.Status.StartTime = &now
	job.Status.Active = 1
	if err := c.Status().Update(ctx, job); err != nil {
		return nil, fmt.Errorf("mark job %s started: %w", job.Name, err)
	}
	b := objects.PodOf(job, job.Name+"-pod")
	// The manager trusts a Plan Job's result only from a pod the Job controls; a Job without a
	// UID was never created, and its pod gets no reference.
	if job.UID != "" {
		b.ControlledBy(job)
	}
	pod := b.Obj()
	if err := c.Create(ctx, pod); err != nil {
		return nil, fmt.Errorf("create pod of job %s: %w", job.Name, err)
	}
	pod.Status.Phase = corev1.PodRunning
	if err := c.Status().Update(ctx, pod); err != nil {
		return nil, fmt.Errorf("mark pod running: %w", err)
	}
	return pod, nil
}

// FinishJob ends a Job the way the Job controller and the kubelet would: the pod terminates
// with the runner's result as its termination message, then the Job gets its terminal
// conditions. The pod, when given, must be the one StartJob created.
func FinishJob(ctx context.Context, c client.Client, job *batchv1.Job, pod *corev1.Pod, succeeded bool, message string) error {
	exit, phase := int32(0), corev1.PodSucceeded
	if !succeeded {
		exit, phase = 1, corev1.PodFailed
	}
	if pod != nil {
		now := metav1.Now()
		pod.Status.Phase = phase
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: job.Spec.Template.Spec.Containers[0].Name, Image: job.Spec.Template.Spec.Containers[0].Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: exit, Message: message, StartedAt: now, FinishedAt: now,
			}},
		}}
		if err := c.Status().Update(ctx, pod); err != nil {
			return fmt.Errorf("terminate pod: %w", err)
		}
	}
	now := metav1.NewTime(time.Now())
	if job.Status.StartTime == nil {
		job.Status.StartTime = &now
	}
	job.Status.Active = 0
	if succeeded {
		job.Status.Succeeded = 1
		job.Status.CompletionTime = &now
		job.Status.Conditions = append(job.Status.Conditions,
			batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
			batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now})
	} else {
		job.Status.Failed = 1
		job.Status.Conditions = append(job.Status.Conditions,
			batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now, LastProbeTime: now},
			batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now, LastProbeTime: now})
	}
	if err := c.Status().Update(ctx, job); err != nil {
		return fmt.Errorf("finish job %s: %w", job.Name, err)
	}
	return nil
}

// DriftResult is the termination message the runner leaves after a drift check that succeeded:
// with drift found, one resource to update (terraform_data.network), so the controller has
// counts and an address to report.
func DriftResult(found bool) string {
	r := runnerapi.Result{Operation: runnerapi.OperationDrift, Outcome: runnerapi.OutcomeSucceeded, Binary: "tofu",
		Steps: []runnerapi.Step{{Name: "init"}, {Name: "plan"}}, Drift: &found}
	if found {
		r.Summary = &runnerapi.PlanSummary{Update: 1, Addresses: []string{"terraform_data.network"}}
	}
	return string(runnerapi.Encode(r))
}
