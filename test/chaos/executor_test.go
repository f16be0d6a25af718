package chaos_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// errJobGone: the Job was deleted before the executor could end it.
var errJobGone = errors.New("job deleted before it ended")

// run is how the executor plays one Job: it runs for delay, then ends, succeeded or failed,
// after writeState (nil: the state is left alone), with result (the runner's result
// document; nil: none) as its termination message.
type run struct {
	delay      time.Duration
	succeeded  bool
	result     []byte
	writeState func() error
	// refuse, when set, is the state channel's check at the Job's first request, made when
	// the Job starts: a reason ends the Job failed with that reason as the runner's error,
	// and nothing is written.
	refuse func() (reason string, err error)
}

// executor plays the Job controller and the node for envtest, which has neither: every CAPTF
// Job it sees (through a watch on the API server) runs for a moment, then ends as plan says.
// Plans return ok=false for Jobs that are not theirs.
type executor struct {
	plan    func(job *batchv1.Job) (r run, ok bool)
	onError func(error)
	wg      sync.WaitGroup
}

// startExecutor runs an executor until ctx ends; wait waits for every Job it is playing.
func startExecutor(ctx context.Context, plan func(*batchv1.Job) (run, bool), onError func(error)) *executor {
	e := &executor{plan: plan, onError: onError}
	e.wg.Add(1)
	go e.watch(ctx)
	return e
}

func (e *executor) wait() { e.wg.Wait() }

// watch follows the managed Jobs, re-watching from the last version seen when the API server
// closes the watch (or from now, with every Job listed again, when that version is too old).
func (e *executor) watch(ctx context.Context) {
	defer e.wg.Done()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		e.onError(err)
		return
	}
	handled := map[types.UID]bool{}
	rv := ""
	for ctx.Err() == nil {
		opts := []client.ListOption{client.HasLabels{infrav1.ManagedLabel}}
		if rv != "" {
			opts = append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		}
		w, err := wc.Watch(ctx, &batchv1.JobList{}, opts...)
		if err != nil {
			if ctx.Err() == nil {
				e.onError(err)
			}
			rv = ""
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		rv = e.consume(ctx, w, handled, rv)
		w.Stop()
	}
}

// consume plays every new Job of one watch until it closes; it returns the version to watch
// from next ("" after an expired version).
func (e *executor) consume(ctx context.Context, w watch.Interface, handled map[types.UID]bool, rv string) string {
	for {
		select {
		case <-ctx.Done():
			return rv
		case ev, open := <-w.ResultChan():
			if !open {
				return rv
			}
			if ev.Type == watch.Error {
				// Most often the version expired: list afresh (handled Jobs are not played twice).
				return ""
			}
			j, ok := ev.Object.(*batchv1.Job)
			if !ok {
				continue
			}
			if _, err := strconv.ParseUint(j.ResourceVersion, 10, 64); err == nil {
				rv = j.ResourceVersion
			}
			// By UID: a re-created object counts its runs from 1 again, so its Jobs reuse the
			// names of its first incarnation's.
			key := j.UID
			if ev.Type == watch.Deleted || handled[key] || terminal(j) {
				continue
			}
			r, mine := e.plan(j)
			if !mine {
				continue
			}
			handled[key] = true
			e.wg.Add(1)
			go e.play(ctx, j.DeepCopy(), r)
		}
	}
}

func (e *executor) play(ctx context.Context, j *batchv1.Job, r run) {
	defer e.wg.Done()
	select {
	case <-ctx.Done():
		return
	case <-time.After(r.delay):
	}
	if r.refuse != nil {
		why, err := r.refuse()
		if err != nil {
			if ctx.Err() == nil {
				e.onError(fmt.Errorf("job %s/%s: the state channel's check: %w", j.Namespace, j.Name, err))
			}
			return
		}
		if why != "" {
			res, err := json.Marshal(runnerapi.Result{Operation: j.Labels[infrav1.OperationLabel], Outcome: runnerapi.OutcomeFailed, Error: why})
			if err != nil {
				e.onError(err)
				return
			}
			r.succeeded, r.result, r.writeState = false, res, nil
		}
	}
	if err := completeJob(ctx, j, r.succeeded, r.result, r.writeState); err != nil && !errors.Is(err, errJobGone) && ctx.Err() == nil {
		e.onError(err)
	}
}
