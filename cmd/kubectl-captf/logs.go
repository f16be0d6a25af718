package main

import (
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// ResultView is what logs --result prints: the runner's result document of a Job's pod (its
// main container's termination message). It is the JSON and YAML output of logs --result.
type ResultView struct {
	Job    string            `json:"job"`
	Pod    string            `json:"pod"`
	Result *runnerapi.Result `json:"result,omitempty"`
	// Raw is the termination message when it is no result document.
	Raw string `json:"raw,omitempty"`
}

func newLogsCommand(o *options) *cobra.Command {
	var job, operation, container string
	var result, follow bool
	cmd := o.objectCommand("logs KIND/NAME [--job NAME | --operation OP]",
		"Print the logs of the object's last Job (or of a named one, or the last of an operation); --result prints the runner's result document",
		func(ctx context.Context, c client.Client, t target) error {
			j, err := pickJob(ctx, c, t, job, infrav1.Operation(operation))
			if err != nil {
				return err
			}
			pod, err := podOf(ctx, c, j)
			if err != nil {
				return err
			}
			if result {
				v := resultView(j.Name, pod)
				return o.show(v, func(p *printer) error { return renderResult(p, v) })
			}
			if container == "" {
				container = jobs.MainContainer
			}
			fmt.Fprintf(o.streams.ErrOut, "Job %s (%s), pod %s, container %s:\n", j.Name, j.Labels[infrav1.OperationLabel], pod.Name, container)
			return o.streamLogs(ctx, pod, container, follow)
		})
	cmd.Flags().StringVar(&job, "job", "", "a Job of the object, by name")
	cmd.Flags().StringVar(&operation, "operation", "", "the last Job of this operation (Apply, Destroy, Plan, Refresh, Drift, Restore)")
	cmd.Flags().StringVarP(&container, "container", "c", "", "the container (default: the main container, "+jobs.MainContainer+")")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the log")
	cmd.Flags().BoolVar(&result, "result", false, "print the runner's result document (the main container's termination message) instead of the log")
	o.addOutputFlag(cmd)
	return cmd
}

// pickJob finds the Job: the named one (it must be the object's), or the object's newest Job
// (of the operation, when one is given). The newest is the one with the highest run sequence.
func pickJob(ctx context.Context, c client.Client, t target, name string, op infrav1.Operation) (*batchv1.Job, error) {
	sel := client.MatchingLabels{infrav1.OwnerKindLabel: t.kind.Kind, infrav1.OwnerNameLabel: naming.LabelValue(t.obj.GetName())}
	if name != "" {
		j := &batchv1.Job{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: t.obj.GetNamespace(), Name: name}, j); err != nil {
			return nil, fmt.Errorf("get Job %s/%s: %w", t.obj.GetNamespace(), name, err)
		}
		if !naming.OwnedBy(j.Labels, t.kind.Kind, t.obj.GetName()) {
			return nil, refused("Job %s is not a Job of %s", name, t.ref())
		}
		return j, nil
	}
	if op != "" {
		sel[infrav1.OperationLabel] = string(op)
	}
	var list batchv1.JobList
	if err := c.List(ctx, &list, client.InNamespace(t.obj.GetNamespace()), sel); err != nil {
		return nil, fmt.Errorf("list the Jobs of %s: %w", t.ref(), err)
	}
	j := newestJob(list.Items, naming.StateSuffix(t.obj.GetNamespace(), t.kind.Kind, t.obj.GetName()))
	if j == nil {
		what := "no Job"
		if op != "" {
			what = "no " + string(op) + " Job"
		}
		return nil, &exitError{code: exitFailed, msg: fmt.Sprintf("%s of %s is left (the Job history keeps the newest per operation)", what, t.ref())}
	}
	return j, nil
}

// newestJob is the Job with the highest run sequence (names end in it, so a name sort would put
// -10 before -9); Jobs whose name does not parse count as oldest.
func newestJob(items []batchv1.Job, suffix string) *batchv1.Job {
	if len(items) == 0 {
		return nil
	}
	seq := func(j batchv1.Job) int64 {
		n, err := naming.ParseJobSeq(suffix, j.Name)
		if err != nil {
			return -1
		}
		return n
	}
	sort.SliceStable(items, func(a, b int) bool { return seq(items[a]) < seq(items[b]) })
	return &items[len(items)-1]
}

// podOf is the Job's pod (a CAPTF Job runs one: backoffLimit 0); the newest when there are more.
func podOf(ctx context.Context, c client.Client, j *batchv1.Job) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(j.Namespace), client.MatchingLabels{batchv1.JobNameLabel: j.Name}); err != nil {
		return nil, fmt.Errorf("list the pods of Job %s: %w", j.Name, err)
	}
	if len(pods.Items) == 0 {
		return nil, &exitError{code: exitFailed, msg: fmt.Sprintf("Job %s has no pod (not started yet, or deleted)", j.Name)}
	}
	sort.SliceStable(pods.Items, func(a, b int) bool {
		return pods.Items[a].CreationTimestamp.Before(&pods.Items[b].CreationTimestamp)
	})
	return &pods.Items[len(pods.Items)-1], nil
}

// resultView reads the runner's result from the main container's termination message.
func resultView(job string, pod *corev1.Pod) ResultView {
	v := ResultView{Job: job, Pod: pod.Name}
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name != jobs.MainContainer || s.State.Terminated == nil {
			continue
		}
		msg := s.State.Terminated.Message
		if res, err := runnerapi.ParseResult([]byte(msg)); err == nil {
			v.Result = &res
		} else {
			v.Raw = msg
		}
	}
	return v
}

func renderResult(p *printer, v ResultView) error {
	p.line("", "Job %s, pod %s:", v.Job, v.Pod)
	switch {
	case v.Result != nil:
		r := v.Result
		p.line("", "  operation %s, outcome %s, binary %s", r.Operation, r.Outcome, r.Binary)
		for _, s := range r.Steps {
			p.line("", "  step %s: exit %d (%d ms)", s.Name, s.ExitCode, s.DurationMs)
		}
		if r.Error != "" {
			p.line("", "  error: %s", r.Error)
		}
	case v.Raw != "":
		p.line("", "  termination message (no result document): %s", v.Raw)
	default:
		p.line("", "  no result yet: the main container has not ended")
	}
	return p.err
}

// streamLogs copies a container's log to the output, through the API server's pods/log.
func (o *options) streamLogs(ctx context.Context, pod *corev1.Pod, container string, follow bool) error {
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("build clientset: %w", err)
	}
	rc, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container, Follow: follow}).Stream(ctx)
	if err != nil {
		return fmt.Errorf("logs of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	defer func() { _ = rc.Close() }()
	if _, err := io.Copy(o.streams.Out, rc); err != nil {
		return fmt.Errorf("logs of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}
