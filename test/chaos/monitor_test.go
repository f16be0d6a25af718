package chaos_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// monitor records, through watches on the API server, every version of every Job and every
// reconciled object, then replays them in resourceVersion order (etcd's global revision) and
// checks I1-I4 of ARCHITECTURE.md at every step.
type monitor struct {
	mu     sync.Mutex
	events []recorded
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type recorded struct {
	rv      uint64
	deleted bool
	obj     client.Object
}

func startMonitor() *monitor {
	GinkgoHelper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	Expect(err).NotTo(HaveOccurred())
	mctx, cancel := context.WithCancel(ctx)
	m := &monitor{cancel: cancel}
	DeferCleanup(func() {
		cancel()
		m.wg.Wait()
	})
	for _, list := range []client.ObjectList{&batchv1.JobList{}, &infrav1.TerraformClusterList{}, &infrav1.TerraformMachineList{}} {
		w, err := wc.Watch(mctx, list)
		Expect(err).NotTo(HaveOccurred())
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			defer w.Stop()
			for {
				select {
				case <-mctx.Done():
					return
				case ev, ok := <-w.ResultChan():
					if !ok {
						return
					}
					obj, isObj := ev.Object.(client.Object)
					if !isObj || ev.Type == watch.Error || ev.Type == watch.Bookmark {
						continue
					}
					rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
					if err != nil {
						continue
					}
					m.mu.Lock()
					m.events = append(m.events, recorded{rv: rv, deleted: ev.Type == watch.Deleted, obj: obj.DeepCopyObject().(client.Object)})
					m.mu.Unlock()
				}
			}
		}()
	}
	return m
}

type objState struct {
	exists, blockMove, finalizer bool
	activeJob                    string
}

// check stops the watches and replays the history of the given namespaces (created after the
// monitor started, so their whole history was watched; other specs' leftovers are ignored); it
// returns the violations found.
func (m *monitor) check(namespaces map[string]bool) (violations []string, jobs int) {
	m.cancel()
	m.wg.Wait()
	sort.SliceStable(m.events, func(i, j int) bool { return m.events[i].rv < m.events[j].rv })
	running := map[string]map[string]bool{} // owner -> running Job names
	objs := map[string]*objState{}
	seen := map[string]bool{}
	for _, e := range m.events {
		if !namespaces[e.obj.GetNamespace()] {
			continue
		}
		switch o := e.obj.(type) {
		case *batchv1.Job:
			owner := o.Labels[infrav1.OwnerKindLabel] + "/" + o.Namespace + "/" + ownerOf(o)
			if !seen[o.Namespace+"/"+o.Name] {
				seen[o.Namespace+"/"+o.Name] = true
				jobs++
			}
			if running[owner] == nil {
				running[owner] = map[string]bool{}
			}
			if e.deleted || terminal(o) {
				delete(running[owner], o.Name)
			} else {
				running[owner][o.Name] = true
			}
			violations = append(violations, verify(e.rv, owner, running[owner], objs[owner])...)
		case *infrav1.TerraformCluster:
			owner := infrav1.TerraformClusterKind + "/" + o.Namespace + "/" + o.Name
			violations = append(violations, m.object(e, owner, o, o.Status.ActiveJob, running[owner], objs)...)
		case *infrav1.TerraformMachine:
			owner := infrav1.TerraformMachineKind + "/" + o.Namespace + "/" + o.Name
			violations = append(violations, m.object(e, owner, o, o.Status.ActiveJob, running[owner], objs)...)
		}
	}
	return violations, jobs
}

func (m *monitor) object(e recorded, owner string, o client.Object, aj *infrav1.ActiveJob, run map[string]bool, objs map[string]*objState) []string {
	prev := objs[owner]
	_, bm := o.GetAnnotations()[infrav1.BlockMoveAnnotation]
	next := &objState{exists: !e.deleted, blockMove: bm, finalizer: controllerutil.ContainsFinalizer(o, infrav1.Finalizer)}
	if aj != nil {
		next.activeJob = aj.Name
	}
	objs[owner] = next
	var out []string
	if prev != nil && prev.activeJob != "" && next.activeJob != prev.activeJob && run[prev.activeJob] {
		out = append(out, fmt.Sprintf("I4 at rv %d: %s cleared status.activeJob %s while it runs", e.rv, owner, prev.activeJob))
	}
	return append(out, verify(e.rv, owner, run, next)...)
}

func verify(rv uint64, owner string, run map[string]bool, o *objState) []string {
	if len(run) == 0 {
		return nil
	}
	var out []string
	if len(run) > 1 {
		out = append(out, fmt.Sprintf("I1 at rv %d: %s runs %d Jobs at once: %v", rv, owner, len(run), run))
	}
	if o == nil || !o.exists {
		return append(out, fmt.Sprintf("I3 at rv %d: %s is gone while a Job runs", rv, owner))
	}
	if !o.blockMove {
		out = append(out, fmt.Sprintf("I2 at rv %d: %s lacks block-move while a Job runs", rv, owner))
	}
	if !o.finalizer {
		out = append(out, fmt.Sprintf("I3 at rv %d: %s lacks its finalizer while a Job runs", rv, owner))
	}
	return out
}

func ownerOf(j *batchv1.Job) string {
	for _, r := range j.OwnerReferences {
		return r.Name
	}
	return ""
}

func terminal(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed ||
			c.Type == batchv1.JobSuccessCriteriaMet || c.Type == batchv1.JobFailureTarget) {
			return true
		}
	}
	return false
}
