package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/test/stalecache"
)

// Fault types, as the summary counts them: each is counted when it was injected, not when a
// plan asked for it.
const (
	faultJobHidden = "stale read: a Job missing from the cache"
	faultObjectOld = "stale read: the object one version old"
	faultLateJoin  = "stale read: the object unknown to the second manager (not joined yet)"
	faultFail      = "write refused by the API server"
	faultLost      = "write done, response lost (timeout)"
	faultConflict  = "write answered with a conflict"
	faultCrash     = "manager crashed right after a write, then restarted"
	faultJobFailed = "Job failed (runner reported a failure)"
	faultStateLost = "state Secret lost (deleted by hand), then restored"
)

var faultTypes = []string{faultJobHidden, faultObjectOld, faultLateJoin, faultFail, faultLost, faultConflict, faultCrash, faultJobFailed, faultStateLost}

// soakManagerConcurrency is each soak manager's workers per controller.
const soakManagerConcurrency = 4

// minUptime is how long a restarted manager runs before a crash may hit it again: a crash
// while its caches still sync would only stop it before it did anything. The first
// incarnation may crash at once (a manager writes only once its caches synced), so the slice's
// planned crashes, which hit the first writes, are carried out.
const minUptime = 3 * time.Second

// role is one of the soak's two managers across its crashes: a manager that dies is started
// again, with the same faults, after its plan's restartAfter.
type role struct {
	s   *soak
	idx int

	mu       sync.Mutex
	cur      *running
	since    time.Time
	stopping bool
	restarts int
	declined int
	wg       sync.WaitGroup
	stopped  chan struct{}
	errs     []error
}

func newRole(s *soak, idx int) *role { return &role{s: s, idx: idx, stopped: make(chan struct{})} }

// start builds and runs a fresh manager for the role (r.mu held or not yet shared).
func (r *role) start() error {
	inj := &injector{s: r.s, r: r}
	logger, err := r.logger()
	if err != nil {
		return err
	}
	m, err := newManager(managerOpts{withStale: true, concurrency: soakManagerConcurrency, stateBackups: 2,
		intercept: inj.funcs(), logger: &logger,
		built: func(run *running) {
			inj.run = run
			run.stale.Add(r.s.staleRule(r.idx))
		}})
	if err != nil {
		return err
	}
	r.cur, r.since = m, time.Now()
	return nil
}

// logger is the log of the role's next incarnation: dropped, or a file of its own in the
// run's log directory (CAPTF_SOAK_LOG_DIR), kept after the run.
func (r *role) logger() (logr.Logger, error) {
	dir := r.s.cfg.logDir
	if dir == "" {
		return logr.New(dropSink{}), nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return logr.Logger{}, fmt.Errorf("soak log directory: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.log", managerName(r.idx), r.restarts)))
	if err != nil {
		return logr.Logger{}, fmt.Errorf("soak log: %w", err)
	}
	// The file stays open until the test process exits: a stopped manager's goroutines may
	// still log their last lines.
	return zap.New(zap.WriteTo(f), zap.Level(zapcore.Level(-1)), zap.JSONEncoder()), nil
}

// crash kills inj's manager right away (every later write of it fails) and starts a new one
// after restartAfter. It declines while the role's manager is not inj's, has not run minUptime
// yet, or the soak is stopping.
func (r *role) crash(inj *injector, restartAfter time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping || r.cur != inj.run || (r.restarts > 0 && time.Since(r.since) < minUptime) {
		r.declined++
		return false
	}
	inj.dead.Store(true)
	dead := r.cur
	r.cur = nil
	dead.cancel()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		<-dead.exited
		select {
		case <-r.stopped:
			return
		case <-time.After(restartAfter):
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.stopping {
			return
		}
		r.restarts++
		if err := r.start(); err != nil {
			r.errs = append(r.errs, fmt.Errorf("restart manager %s: %w", managerName(r.idx), err))
		}
	}()
	return true
}

// stop ends the role's manager and any restart in flight.
func (r *role) stop() error {
	r.mu.Lock()
	if !r.stopping {
		r.stopping = true
		close(r.stopped)
	}
	cur := r.cur
	r.cur = nil
	r.mu.Unlock()
	r.wg.Wait()
	var err error
	if cur != nil {
		err = cur.Stop()
	}
	return errors.Join(append(r.errs, err)...)
}

// dropSink drops every log line. logr.Discard() has no sink, which the manager takes for "no
// logger given" and replaces by the suite's (Ginkgo's buffer, which a long soak would fill).
type dropSink struct{}

func (dropSink) Init(logr.RuntimeInfo)            {}
func (dropSink) Enabled(int) bool                 { return false }
func (dropSink) Info(int, string, ...any)         {}
func (dropSink) Error(error, string, ...any)      {}
func (d dropSink) WithValues(...any) logr.LogSink { return d }
func (d dropSink) WithName(string) logr.LogSink   { return d }

// injector carries out the write faults of the schedules' plans on one manager incarnation.
type injector struct {
	s    *soak
	r    *role
	run  *running
	dead atomic.Bool
}

func (in *injector) funcs() *interceptor.Funcs {
	return &interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return in.write(obj, pointOf("create", obj), func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return in.write(obj, pointOf("update", obj), func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return in.write(obj, pointOf("patch", obj), func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return in.write(obj, pointOf("delete", obj), func() error { return c.Delete(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			point := ""
			if sub == "status" && reconciled(obj) {
				point = pointStatus
			}
			return in.write(obj, point, func() error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return in.write(obj, "", func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
	}
}

// write performs one write of the manager, or the fault its schedule's plan puts there.
func (in *injector) write(obj client.Object, point string, do func() error) error {
	if in.dead.Load() {
		return errCrashed
	}
	sc := in.s.scheduleOf(obj)
	if sc == nil || point == "" {
		return do()
	}
	f, hit := sc.plan.faultAt(point, in.r.idx, sc.countWrite(point, in.r.idx))
	if !hit {
		return do()
	}
	gr := schema.GroupResource{Resource: fmt.Sprintf("%T", obj)}
	switch f.mode {
	case modeFail:
		in.s.count(faultFail)
		return apierrors.NewInternalError(errors.New("injected by the soak: the write was refused"))
	case modeConflict:
		in.s.count(faultConflict)
		return apierrors.NewConflict(gr, obj.GetName(), errors.New("injected by the soak"))
	case modeLost:
		if err := do(); err != nil {
			return err
		}
		in.s.count(faultLost)
		return apierrors.NewServerTimeout(gr, "write", 1)
	case modeCrash:
		err := do()
		if err == nil && in.r.crash(in, sc.plan.restartAfter) {
			in.s.count(faultCrash)
		}
		return err
	}
	return do()
}

// reconciled reports whether obj is one of the three reconciled kinds.
func reconciled(obj client.Object) bool {
	switch obj.(type) {
	case *infrav1.TerraformCluster, *infrav1.TerraformMachine, *infrav1.TerraformMachinePool:
		return true
	}
	return false
}

// pointOf names the write a manager makes (verb on obj), or "" for writes no fault hits.
func pointOf(verb string, obj client.Object) string {
	switch o := obj.(type) {
	case *coordinationv1.Lease:
		if o.Labels[infrav1.LeaseLabel] == "" && !strings.HasPrefix(o.Name, "captf-") {
			return "" // the state lock Lease, created empty for the state channel
		}
		if verb == "delete" {
			return pointRelease
		}
		return pointLease
	case *batchv1.Job:
		if verb == "create" {
			return pointJob
		}
	case *corev1.Secret:
		switch {
		case verb == "delete":
			return pointCleanup
		case strings.HasPrefix(o.Name, "captf-inputs-"):
			return pointInputs
		case strings.HasSuffix(o.Name, "-run"):
			return pointRunSecret
		}
		return pointSecret
	case *infrav1.TerraformCluster, *infrav1.TerraformMachine, *infrav1.TerraformMachinePool:
		if verb != "patch" {
			return ""
		}
		if !obj.GetDeletionTimestamp().IsZero() && !controllerutil.ContainsFinalizer(obj, infrav1.Finalizer) {
			return pointFinalizer
		}
		return pointMeta
	}
	return ""
}

// staleRule is the stale-cache double's rule for manager m: it hides Jobs and serves objects
// one version old with each schedule's own probabilities, and hides an object from B until B
// joins its schedule.
func (s *soak) staleRule(m int) stalecache.Rule {
	return func(obj client.Object) (bool, client.Object) {
		switch obj.(type) {
		case *batchv1.Job:
			sc := s.scheduleOf(obj)
			if sc != nil && sc.plan.hideJobs[m] > 0 && sc.draw() < sc.plan.hideJobs[m] {
				s.count(faultJobHidden)
				return true, nil
			}
		case *infrav1.TerraformCluster, *infrav1.TerraformMachine, *infrav1.TerraformMachinePool:
			sc := s.scheduleOf(obj)
			if sc == nil {
				return false, nil
			}
			if m == managerB && int(sc.step.Load()) < sc.plan.bJoins {
				s.count(faultLateJoin)
				return true, nil
			}
			if older := sc.lagging(m, obj); older != nil {
				s.count(faultObjectOld)
				return false, older
			}
		}
		return false, nil
	}
}

// scheduleOf finds the schedule an object belongs to: a reconciled object by its name, anything
// else by CAPTF's owner labels or by the state suffix in its name.
func (s *soak) scheduleOf(obj client.Object) *schedule {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.byObject) == 0 {
		return nil
	}
	if reconciled(obj) {
		return s.byObject[kindOf(obj)+"/"+obj.GetNamespace()+"/"+obj.GetName()]
	}
	if l := obj.GetLabels(); l[infrav1.OwnerKindLabel] != "" {
		if sc := s.byObject[l[infrav1.OwnerKindLabel]+"/"+obj.GetNamespace()+"/"+l[infrav1.OwnerNameLabel]]; sc != nil {
			return sc
		}
	}
	for _, part := range strings.Split(obj.GetName(), "-") {
		if len(part) == naming.SuffixLength {
			if sc := s.bySuffix[part]; sc != nil {
				return sc
			}
		}
	}
	return nil
}

// kindOf names the Terraform kind of obj.
func kindOf(obj client.Object) string { return objects.KindOf(obj) }

func (s *soak) count(fault string) { s.faults[fault].Add(1) }
