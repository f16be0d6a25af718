package monitor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

const (
	// fenceTimeout bounds the wait for every watch to deliver its fence object.
	fenceTimeout = 60 * time.Second
	// fenceName names the fence objects, and the ServiceAccount of the fence pod (created
	// with them: the ServiceAccount admission wants it, and no controller may have made the
	// namespace's default one yet).
	fenceName = "fence"
)

// Monitor records, through watches on the API server, every change that matters to the
// invariants of every Job, every pod of a Job, every reconciled object of the three kinds and
// every Terraform state Secret, and checks them (Check). Start it before the namespaces it is
// to check exist.
type Monitor struct {
	client  client.WithWatch
	keep    func(namespace string) bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	streams []*stream

	mu      sync.Mutex
	facts   []fact
	last    map[string]fact
	gaps    []string
	stopped bool
}

// stream is one watch of the monitor: the kind it lists, the fence object that proves it has
// delivered everything written before, and the last version it delivered.
type stream struct {
	list   func() client.ObjectList
	opts   []client.ListOption
	fence  func(namespace string) client.Object
	lastRV atomic.Uint64
	done   chan struct{} // closed when the watch has stopped for good
}

// Start watches, from their current versions, the Jobs, the pods of Jobs (those labelled
// batch.kubernetes.io/job-name), the three reconciled kinds and the Secrets of cfg's API
// server, and records the changes in the namespaces keep accepts (nil: all). Objects of a
// namespace created afterwards are seen from their creation. scheme must hold the core, batch
// and CAPTF kinds (nil: client-go's scheme and the CAPTF kinds). The watches run until ctx
// ends, Stop or Check.
func Start(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, keep func(namespace string) bool) (*Monitor, error) {
	if scheme == nil {
		scheme = runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(scheme); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
		if err := infrav1.AddToScheme(scheme); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	if keep == nil {
		keep = func(string) bool { return true }
	}
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("monitor client: %w", err)
	}
	mctx, cancel := context.WithCancel(ctx)
	m := &Monitor{client: wc, keep: keep, cancel: cancel, last: map[string]fact{}}
	for _, s := range streams() {
		// Start from the collection's current version, so nothing already there is replayed.
		l := s.list()
		if err := wc.List(mctx, l, append([]client.ListOption{client.Limit(1)}, s.opts...)...); err != nil {
			m.Stop()
			return nil, fmt.Errorf("list %T: %w", l, err)
		}
		rv, err := strconv.ParseUint(l.GetResourceVersion(), 10, 64)
		if err != nil {
			m.Stop()
			return nil, fmt.Errorf("version of %T: %w", l, err)
		}
		s.lastRV.Store(rv)
		s.done = make(chan struct{})
		m.streams = append(m.streams, s)
		m.wg.Add(1)
		go m.follow(mctx, s)
	}
	return m, nil
}

// streams lists the watches, each with its fence object. The fence objects start nothing: the
// three reconciled kinds have no owning Cluster (a manager leaves them waiting for one), the
// Job is suspended (no Job controller makes pods of it) and the pod has a scheduling gate (no
// scheduler binds it to a node).
func streams() []*stream {
	spec := infrav1.TerraformSpec{Module: infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "m"}}}
	meta := func(ns string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: fenceName} }
	podSpec := func() corev1.PodSpec {
		return corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, ServiceAccountName: fenceName, AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "c", Image: "fence"}}}
	}
	return []*stream{{
		list: func() client.ObjectList { return &batchv1.JobList{} },
		fence: func(ns string) client.Object {
			return &batchv1.Job{ObjectMeta: meta(ns), Spec: batchv1.JobSpec{Suspend: new(true),
				Template: corev1.PodTemplateSpec{Spec: podSpec()}}}
		},
	}, {
		// Only pods of Jobs matter: a pod keeps its Job running until it is terminal or gone.
		list: func() client.ObjectList { return &corev1.PodList{} },
		opts: []client.ListOption{client.HasLabels{batchv1.JobNameLabel}},
		fence: func(ns string) client.Object {
			o := meta(ns)
			o.Labels = map[string]string{batchv1.JobNameLabel: fenceName}
			spec := podSpec()
			spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "captf.io/monitor-fence"}}
			return &corev1.Pod{ObjectMeta: o, Spec: spec}
		},
	}, {
		list: func() client.ObjectList { return &infrav1.TerraformClusterList{} },
		fence: func(ns string) client.Object {
			return &infrav1.TerraformCluster{ObjectMeta: meta(ns), Spec: infrav1.TerraformClusterSpec{TerraformSpec: spec}}
		},
	}, {
		list: func() client.ObjectList { return &infrav1.TerraformMachineList{} },
		fence: func(ns string) client.Object {
			return &infrav1.TerraformMachine{ObjectMeta: meta(ns), Spec: infrav1.TerraformMachineSpec{TerraformSpec: spec}}
		},
	}, {
		list: func() client.ObjectList { return &infrav1.TerraformMachinePoolList{} },
		fence: func(ns string) client.Object {
			return &infrav1.TerraformMachinePool{ObjectMeta: meta(ns), Spec: infrav1.TerraformMachinePoolSpec{TerraformSpec: spec}}
		},
	}, {
		list:  func() client.ObjectList { return &corev1.SecretList{} },
		fence: func(ns string) client.Object { return &corev1.Secret{ObjectMeta: meta(ns)} },
	}}
}

// follow watches one stream from its last version until ctx ends.
func (m *Monitor) follow(ctx context.Context, s *stream) {
	defer m.wg.Done()
	defer close(s.done)
	for ctx.Err() == nil {
		from := strconv.FormatUint(s.lastRV.Load(), 10)
		opts := append([]client.ListOption{&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: from}}}, s.opts...)
		w, err := m.client.Watch(ctx, s.list(), opts...)
		if err != nil {
			if ctx.Err() == nil {
				m.gap(fmt.Sprintf("watch %T from version %s: %v", s.list(), from, err))
			}
			return
		}
		goOn := m.consume(ctx, w, s)
		w.Stop()
		if !goOn {
			return
		}
	}
}

// consume records the events of one watch; it returns false when the stream cannot go on.
func (m *Monitor) consume(ctx context.Context, w watch.Interface, s *stream) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case ev, open := <-w.ResultChan():
			if !open {
				return true // the API server ended the watch: resume from the last version
			}
			if ev.Type == watch.Error {
				m.gap(fmt.Sprintf("watch %T after version %d: %v", s.list(), s.lastRV.Load(), ev.Object))
				return false
			}
			obj, ok := ev.Object.(client.Object)
			if !ok || ev.Type == watch.Bookmark {
				continue
			}
			rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
			if err != nil {
				continue
			}
			if m.keep(obj.GetNamespace()) {
				if f, ok := factOf(obj, rv, ev.Type == watch.Deleted); ok {
					m.record(f)
				}
			}
			s.lastRV.Store(rv)
		}
	}
}

func (m *Monitor) gap(msg string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gaps = append(m.gaps, msg)
}

// record keeps f unless it changes nothing the checks look at.
func (m *Monitor) record(f fact) {
	key := f.key()
	m.mu.Lock()
	defer m.mu.Unlock()
	if prev, ok := m.last[key]; ok && prev.same(f) {
		return
	}
	m.last[key] = f
	m.facts = append(m.facts, f)
}

// Stop ends the watches and waits for them. It may be called more than once.
func (m *Monitor) Stop() {
	m.cancel()
	m.wg.Wait()
	m.mu.Lock()
	m.stopped = true
	m.mu.Unlock()
}

// Check makes sure every change made so far has been recorded (fence), stops the watches and
// replays the history of namespaces (created after the monitor started, so their whole
// history was watched). It checks once: the monitor is stopped afterwards.
func (m *Monitor) Check(ctx context.Context, namespaces map[string]bool) (Result, error) {
	m.mu.Lock()
	stopped := m.stopped
	m.mu.Unlock()
	if stopped {
		return Result{}, errors.New("monitor already stopped")
	}
	err := m.fence(ctx)
	m.Stop()
	if err != nil {
		return Result{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	sort.SliceStable(m.facts, func(i, j int) bool { return m.facts[i].rv < m.facts[j].rv })
	return replay(m.facts, m.gaps, namespaces), nil
}

// fence writes one object of each watched type into a namespace of its own and waits until
// every watch has delivered it: a watch delivers in version order, so every earlier change has
// been recorded by then. The fence objects start nothing (see streams).
func (m *Monitor) fence(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "monitor-fence-"}}
	if err := m.client.Create(ctx, ns); err != nil {
		return fmt.Errorf("create fence namespace: %w", err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: fenceName}}
	if err := m.client.Create(ctx, sa); err != nil {
		return fmt.Errorf("create fence service account: %w", err)
	}
	var written []client.Object
	err := m.deliver(ctx, ns.Name, &written)
	for _, o := range written {
		if derr := client.IgnoreNotFound(m.client.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground))); derr != nil {
			err = errors.Join(err, fmt.Errorf("delete fence %T: %w", o, derr))
		}
	}
	return err
}

// deliver writes the fence objects into namespace, adding each to written, and waits for each
// watch to deliver its own.
func (m *Monitor) deliver(ctx context.Context, namespace string, written *[]client.Object) error {
	for _, s := range m.streams {
		o := s.fence(namespace)
		if err := m.client.Create(ctx, o); err != nil {
			return fmt.Errorf("create fence %T: %w", o, err)
		}
		*written = append(*written, o)
		rv, err := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
		if err != nil {
			return fmt.Errorf("version of fence %T: %w", o, err)
		}
		err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, fenceTimeout, true, func(context.Context) (bool, error) {
			if s.lastRV.Load() >= rv {
				return true, nil
			}
			select {
			case <-s.done:
				return false, fmt.Errorf("watch of %T stopped before it delivered its fence", o)
			default:
				return false, nil
			}
		})
		if err != nil {
			return fmt.Errorf("wait for fence %T: %w", o, err)
		}
	}
	return nil
}
