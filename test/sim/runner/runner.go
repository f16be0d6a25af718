package runner

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/sim/kcm"
)

// Outcome is how a run ends.
type Outcome string

// Outcomes of a run.
const (
	Succeeded Outcome = "succeeded" // exit 0, the state written
	Crashed   Outcome = "crashed"   // exit 1; an apply may have written a state first
	Killed    Outcome = "killed"    // SIGKILL (exit 137): nothing written
	Overran   Outcome = "overran"   // still running at activeDeadlineSeconds: stopped, nothing written
	Refused   Outcome = "refused"   // the state channel refused the state: nothing written
)

// Options configure a Model. Percentages are of all runs; the rest succeed.
type Options struct {
	Seed uint64
	// MinRun and MaxRun bound a run's duration. Defaults 5 s and 90 s.
	MinRun, MaxRun time.Duration
	// CrashPercent, KillPercent and OverrunPercent are the shares of runs that crash, are
	// killed and outrun their deadline (a Job without a deadline crashes instead).
	CrashPercent, KillPercent, OverrunPercent int
	// State is the state channel's client (reads and writes the state Secret).
	State client.Client
	// Observe, when set, is told how every run that reached its end ended.
	Observe func(Ended)
}

// Ended is one run's end.
type Ended struct {
	Namespace, Name string
	Operation       string
	Outcome         Outcome
	// Serial is the state serial the run wrote (0: none).
	Serial uint64
	// Err is a failed state read or write (the run then fails).
	Err error
}

func (e Ended) String() string {
	s := fmt.Sprintf("runner %s %s/%s %s", e.Operation, e.Namespace, e.Name, e.Outcome)
	if e.Serial > 0 {
		s += fmt.Sprintf(" serial=%d", e.Serial)
	}
	if e.Err != nil {
		s += " error " + e.Err.Error()
	}
	return s
}

// Model plays the pods of CAPTF's Jobs.
type Model struct{ o Options }

// New returns a model.
func New(o Options) *Model {
	if o.MinRun <= 0 {
		o.MinRun = 5 * time.Second
	}
	if o.MaxRun <= o.MinRun {
		o.MaxRun = max(o.MinRun+time.Second, 90*time.Second)
	}
	return &Model{o: o}
}

// Plan is a run as drawn: its outcome, how long it runs, and (crashed applies) whether it
// writes a state before it exits.
type Plan struct {
	Outcome    Outcome
	Duration   time.Duration
	WriteFirst bool
}

// Draw is the run of a Job: a pure function of the seed and the Job's identity.
func (m *Model) Draw(job *batchv1.Job) Plan {
	h := fnv.New64a()
	_, _ = h.Write([]byte("runner/" + job.Namespace + "/" + job.Name + "/" + string(job.UID)))
	r := rand.New(rand.NewPCG(m.o.Seed, h.Sum64()))
	p := Plan{Outcome: Succeeded, Duration: m.o.MinRun + time.Duration(r.Int64N(int64(m.o.MaxRun-m.o.MinRun)))}
	x := r.IntN(100)
	switch {
	case x < m.o.CrashPercent:
		p.Outcome = Crashed
	case x < m.o.CrashPercent+m.o.KillPercent:
		p.Outcome, p.Duration = Killed, p.Duration/2+time.Millisecond
	case x < m.o.CrashPercent+m.o.KillPercent+m.o.OverrunPercent:
		p.Outcome = Overran
		if d := job.Spec.ActiveDeadlineSeconds; d != nil {
			p.Duration = time.Duration(*d)*time.Second + time.Second
		} else {
			p.Outcome = Crashed
		}
	}
	p.WriteFirst = r.IntN(2) == 0
	return p
}

// Decide is kcm.JobOptions.Decide: the Job controller plays the drawn duration, and a crash or
// kill as a failure (an overrun is cut by the Job controller at the deadline).
func (m *Model) Decide(job *batchv1.Job, _ kcm.Run) kcm.Run {
	p := m.Draw(job)
	return kcm.Run{Duration: p.Duration, Fail: p.Outcome == Crashed || p.Outcome == Killed}
}

// End is kcm.JobOptions.End: the state channel's check and the state the run leaves.
func (m *Model) End(ctx context.Context, job *batchv1.Job, run kcm.Run) kcm.Run {
	p := m.Draw(job)
	e := Ended{Namespace: job.Namespace, Name: job.Name, Operation: job.Labels[infrav1.OperationLabel], Outcome: p.Outcome}
	defer func() {
		if m.o.Observe != nil {
			m.o.Observe(e)
		}
	}()
	if p.Outcome == Killed {
		return run
	}
	cur, err := m.current(ctx, job)
	if err != nil {
		e.Err = err
		run.Fail = true
		return run
	}
	if lineage := jobs.StateLineageOf(job); lineage != "" && (cur == nil || cur.Lineage != lineage) {
		e.Outcome = Refused
		run.Fail = true
		return run
	}
	writes := p.Outcome == Succeeded || (p.Outcome == Crashed && p.WriteFirst)
	if next, ok := leaves(job, cur); ok && writes {
		if err := statetest.Write(ctx, m.o.State, job.Namespace, suffix(job), next); err != nil {
			e.Err = err
			run.Fail = true
			return run
		}
		e.Serial = next.Serial
	}
	run.Fail = p.Outcome != Succeeded
	return run
}

// current reads the Job's object's state (nil: no state Secret, or one holding no state).
func (m *Model) current(ctx context.Context, job *batchv1.Job) (*state.State, error) {
	sec := &corev1.Secret{}
	err := m.o.State.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: naming.StateSecretName(suffix(job))}, sec)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	st, err := state.FromSecret(sec)
	if err != nil {
		return nil, nil //nolint:nilerr // a Secret holding no state is no state
	}
	return st, nil
}

// leaves is the state a Job's run leaves over cur, if its operation writes one.
func leaves(job *batchv1.Job, cur *state.State) (statetest.State, bool) {
	var next statetest.State
	switch infrav1.Operation(job.Labels[infrav1.OperationLabel]) {
	case infrav1.OperationApply:
		next = applied(job)
	case infrav1.OperationDestroy:
		next = statetest.Destroyed()
	default:
		return next, false
	}
	next.Serial, next.Lineage = 1, statetest.DefaultLineage
	if cur != nil {
		next.Serial, next.Lineage = cur.Serial+1, cur.Lineage
	}
	return next, true
}

// applied is the state a successful apply of the Job's object leaves: its kind's contract outputs.
func applied(job *batchv1.Job) statetest.State {
	owner := ownerName(job)
	switch job.Labels[infrav1.OwnerKindLabel] {
	case infrav1.TerraformClusterKind:
		return statetest.Cluster("10.9.0.1", 6443)
	case infrav1.TerraformMachineKind:
		return statetest.Machine("tf://" + strings.ToLower(owner))
	default:
		return statetest.MachinePool("tf://" + owner + "-0")
	}
}

func ownerName(job *batchv1.Job) string {
	for _, r := range job.OwnerReferences {
		return r.Name
	}
	return ""
}

func suffix(job *batchv1.Job) string {
	return naming.StateSuffix(job.Namespace, job.Labels[infrav1.OwnerKindLabel], ownerName(job))
}
