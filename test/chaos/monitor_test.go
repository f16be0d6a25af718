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
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
)

// monitor records, through watches on the API server, every version of every Job and every
// reconciled object of the three kinds, then replays them in resourceVersion order (etcd's
// global revision) and checks I1-I5 of ARCHITECTURE.md at every step. A Job runs from its
// creation until it carries a Complete or Failed condition (jobstatus.Finished: the test's
// kubelet ends the pod before the Job), or is deleted.
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
	for _, list := range []client.ObjectList{&batchv1.JobList{}, &infrav1.TerraformClusterList{}, &infrav1.TerraformMachineList{}, &infrav1.TerraformMachinePoolList{}} {
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
	mutating := map[string]mutatingJob{}    // namespace/job -> a running mutating Job
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
			key := o.Namespace + "/" + o.Name
			if e.deleted || terminal(o) {
				delete(running[owner], o.Name)
				delete(mutating, key)
			} else {
				running[owner][o.Name] = true
				if infrav1.Operation(o.Labels[infrav1.OperationLabel]).Mutating() {
					mutating[key] = mutatingJob{namespace: o.Namespace, cluster: o.Labels[infrav1.ClusterNameLabel], kind: o.Labels[infrav1.OwnerKindLabel], name: o.Name}
				}
			}
			violations = append(violations, verify(e.rv, owner, running[owner], objs[owner])...)
			violations = append(violations, verifyGate(e.rv, mutating)...)
		case *infrav1.TerraformCluster:
			owner := infrav1.TerraformClusterKind + "/" + o.Namespace + "/" + o.Name
			violations = append(violations, m.object(e, owner, o, o.Status.ActiveJob, running[owner], objs)...)
		case *infrav1.TerraformMachine:
			owner := infrav1.TerraformMachineKind + "/" + o.Namespace + "/" + o.Name
			violations = append(violations, m.object(e, owner, o, o.Status.ActiveJob, running[owner], objs)...)
		case *infrav1.TerraformMachinePool:
			owner := infrav1.TerraformMachinePoolKind + "/" + o.Namespace + "/" + o.Name
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

// mutatingJob is a running apply, destroy or restore Job and the Cluster it belongs to.
type mutatingJob struct{ namespace, cluster, kind, name string }

// verifyGate checks I5: no mutating Job of a TerraformCluster runs while a mutating Job of one
// of its Cluster's machines or pools runs.
func verifyGate(rv uint64, mutating map[string]mutatingJob) []string {
	clusterJobs := map[string][]string{} // namespace/cluster -> running mutating cluster Jobs
	memberJobs := map[string][]string{}
	for _, j := range mutating {
		c := j.namespace + "/" + j.cluster
		if j.kind == infrav1.TerraformClusterKind {
			clusterJobs[c] = append(clusterJobs[c], j.name)
		} else {
			memberJobs[c] = append(memberJobs[c], j.name)
		}
	}
	var out []string
	for c, cj := range clusterJobs {
		if mj := memberJobs[c]; len(mj) > 0 {
			sort.Strings(cj)
			sort.Strings(mj)
			out = append(out, fmt.Sprintf("I5 at rv %d: cluster %s runs mutating Job(s) %v while its members run %v", rv, c, cj, mj))
		}
	}
	return out
}

func ownerOf(j *batchv1.Job) string {
	for _, r := range j.OwnerReferences {
		return r.Name
	}
	return ""
}

func terminal(j *batchv1.Job) bool { return jobstatus.Finished(j) }
