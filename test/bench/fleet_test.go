package bench

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/controllers/engine"
	"github.com/captf/cluster-api-provider-terraform/controllers/inputs"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	captfmetrics "github.com/captf/cluster-api-provider-terraform/controllers/metrics"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/controllers/terraformcluster"
	"github.com/captf/cluster-api-provider-terraform/controllers/terraformmachine"
	"github.com/captf/cluster-api-provider-terraform/controllers/terraformmachinepool"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// One namespace of the fleet (a cell) holds a Cluster with its TerraformCluster, fleetMachines
// TerraformMachines and fleetPools TerraformMachinePools, each already applied.
const (
	fleetMachines = 6
	fleetPools    = 3
	fleetPerCell  = 1 + fleetMachines + fleetPools
	// fleetWorkers is how many cells are written at once.
	fleetWorkers = 16
	// fleetGateObjects is the size of the fleet TestFleetColdStartGate starts on.
	fleetGateObjects = 200
)

// fleet is a set of applied objects on the package's control plane, one cell per namespace.
type fleet struct {
	namespaces []string
	prefix     string
	// shards label the fleet's cells cluster.x-k8s.io/watch-filter=<shard> in turn (cell i
	// gets shards[i mod len(shards)]; none when empty), as a platform labels the clusters each
	// manager of several is to reconcile.
	shards []string
}

// shardOf is the shard of the fleet's i-th cell ("" when the fleet has none).
func (f *fleet) shardOf(i int) string {
	if len(f.shards) == 0 {
		return ""
	}
	return f.shards[i%len(f.shards)]
}

func (f *fleet) objects() int { return len(f.namespaces) * fleetPerCell }

// grow writes cells until the fleet holds n objects (a multiple of fleetPerCell), fleetWorkers
// cells at a time.
func (f *fleet) grow(tb testing.TB, n int) {
	tb.Helper()
	// An applied fleet had a manager before, which left the identity-token audience check's
	// probe account (cmd/manager/setup): a restart reads it once and writes nothing.
	probe := types.NamespacedName{Namespace: metav1.NamespaceDefault, Name: jobs.DefaultAudienceProbeAccountName}
	if err := jobs.EnsureAudienceProbeAccount(ctx, k8s, k8s, probe); err != nil {
		tb.Fatal(err)
	}
	want := n / fleetPerCell
	var added []string
	shards := map[string]string{}
	for len(f.namespaces) < want {
		ns := namespace(tb, f.prefix)
		shards[ns] = f.shardOf(len(f.namespaces))
		f.namespaces = append(f.namespaces, ns)
		added = append(added, ns)
	}
	if err := inParallel(added, func(ns string) error {
		if err := appliedCell(ns, shards[ns]); err != nil {
			return fmt.Errorf("cell %s: %w", ns, err)
		}
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	waitJobsComplete(tb, added)
}

// fixtureTimeout bounds how long the Job controller, the scheduler and the node may take to
// run a fixture's Jobs to completion, or the garbage collector to remove a fleet's pods.
const fixtureTimeout = 10 * time.Minute

// waitJobsComplete waits until every managed Job in namespaces is Complete: the fixture's
// apply Jobs ran through their pods, so the fleet is what a completed apply leaves before any
// manager sees it. Each poll reads the namespaces in order up to the first one not done.
func waitJobsComplete(tb testing.TB, namespaces []string) {
	tb.Helper()
	pending := slices.Clone(namespaces)
	waitUntil(tb, fixtureTimeout, func() (bool, string) {
		for len(pending) > 0 {
			ns := pending[0]
			jobList := &batchv1.JobList{}
			if err := k8s.List(ctx, jobList, client.InNamespace(ns), client.MatchingLabels{infrav1.ManagedLabel: "true"}); err != nil {
				return false, fmt.Sprintf("list jobs of %s: %v", ns, err)
			}
			for i := range jobList.Items {
				if !jobstatus.Succeeded(&jobList.Items[i]) {
					return false, fmt.Sprintf("%d of %d namespaces have an apply Job that is not Complete yet (%s/%s first)",
						len(pending), len(namespaces), ns, jobList.Items[i].Name)
				}
			}
			pending = pending[1:]
		}
		return true, ""
	})
}

// inParallel runs fn on every item, fleetWorkers at a time, and joins the errors.
func inParallel[T any](items []T, fn func(T) error) error {
	var mu sync.Mutex
	var errs []error
	work := make(chan T)
	var wg sync.WaitGroup
	for w := 0; w < fleetWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for item := range work {
				if err := fn(item); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, item := range items {
		work <- item
	}
	close(work)
	wg.Wait()
	return errors.Join(errs...)
}

// shardLabels are the labels of a cell's Cluster API objects and bootstrap data: the shard's
// watch-filter label, when there is a shard, and the cluster name unless empty.
func shardLabels(cluster, shard string) map[string]string {
	l := map[string]string{}
	if cluster != "" {
		l[clusterv1.ClusterNameLabel] = cluster
	}
	if shard != "" {
		l[clusterv1.WatchLabel] = shard
	}
	return l
}

// appliedCell writes one cell: the Cluster and its TerraformCluster first (the members'
// inputs read the cluster's state outputs), then the machines and pools.
func appliedCell(ns, shard string) error {
	const cluster = "c1"
	if err := k8s.Create(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster, Labels: shardLabels("", shard)},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.TerraformClusterKind, Name: cluster}}}); err != nil {
		return fmt.Errorf("create cluster: %w", err)
	}
	tc := objects.Cluster(ns, cluster).Spec(fleetSpec(`{"region":"eu-west-1"}`)).Obj()
	if err := applied(tc, terraformcluster.Kind{}, cluster, shard, statetest.Cluster("10.0.0.1", 6443)); err != nil {
		return err
	}
	for i := 0; i < fleetMachines; i++ {
		name := fmt.Sprintf("m%d", i)
		boot, err := bootstrap(ns, cluster, shard, name)
		if err != nil {
			return err
		}
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: shardLabels(cluster, shard)},
			Spec: clusterv1.MachineSpec{ClusterName: cluster, Bootstrap: clusterv1.Bootstrap{DataSecretName: &boot},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.TerraformMachineKind, Name: name}}}
		if err := k8s.Create(ctx, m); err != nil {
			return fmt.Errorf("create machine: %w", err)
		}
		tm := objects.Machine(ns, name).Spec(fleetSpec(`{"flavor":"small"}`)).
			OwnerRef(metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: name, UID: m.UID}).Obj()
		if err := applied(tm, terraformmachine.Kind(), cluster, shard, statetest.Machine("tf://"+ns+"/"+name)); err != nil {
			return err
		}
	}
	for i := 0; i < fleetPools; i++ {
		name := fmt.Sprintf("p%d", i)
		boot, err := bootstrap(ns, cluster, shard, name)
		if err != nil {
			return err
		}
		mp := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: shardLabels(cluster, shard)},
			Spec: clusterv1.MachinePoolSpec{ClusterName: cluster, Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
				ClusterName: cluster, Bootstrap: clusterv1.Bootstrap{DataSecretName: &boot},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.TerraformMachinePoolKind, Name: name}}}}}
		if err := k8s.Create(ctx, mp); err != nil {
			return fmt.Errorf("create machine pool: %w", err)
		}
		tp := objects.MachinePool(ns, name).Spec(fleetSpec(`{"instances":2}`)).
			OwnerRef(metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachinePool", Name: name, UID: mp.UID}).Obj()
		if err := applied(tp, terraformmachinepool.Kind(), cluster, shard, statetest.MachinePool("tf://"+ns+"/"+name+"-0", "tf://"+ns+"/"+name+"-1")); err != nil {
			return err
		}
	}
	return nil
}

// fleetSpec makes a fleet object's spec: the module ConfigMap m, and vars.
func fleetSpec(vars string) func(*infrav1.TerraformSpec) {
	return func(s *infrav1.TerraformSpec) {
		s.Module = infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "m"}}
		s.Variables = &k8sruntime.RawExtension{Raw: []byte(vars)}
	}
}

// bootstrap writes a member's bootstrap data Secret, labelled with its Cluster's name as
// Cluster API's bootstrap contract asks.
func bootstrap(ns, cluster, shard, name string) (string, error) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-bootstrap", Labels: shardLabels(cluster, shard)},
		Data: map[string][]byte{"value": []byte("#cloud-config")}}
	if err := k8s.Create(ctx, s); err != nil {
		return "", fmt.Errorf("create bootstrap data: %w", err)
	}
	return s.Name, nil
}

// applied writes obj (not yet created) as the manager leaves it after its first apply
// succeeded and was counted, using the product's own builders wherever the engine has one:
//   - the object: the provider finalizer, block-move (a live, unpaused object keeps it), the
//     run sequence moved past the counted Job (2), the applied inputs hash (computed by the
//     kind's Contract and inputs.Assemble, as the engine does), the contract fields the kind
//     maps from the outputs (ApplyOutputs) and status.initialization.provisioned;
//   - the state Secret (Terraform's layout with the owner and move labels and the protection
//     finalizer the bookkeeping adds), the durable inputs (inputs.DurableSecret), the outputs
//     Secret (state.OutputsSecret), the plan Secret, the runner's ServiceAccount, Role and
//     RoleBinding, the state lock Lease;
//   - the apply Job of run 1 (jobs.Build), run to completion by the Job controller through its
//     pod, which the bench's node ends succeeded (grow waits until every Job is Complete).
//
// Nothing else: the run lease and the cluster lease were released and the per-run Secret
// deleted by the bookkeeping. Conditions are left to the first manager that sees the object.
func applied(obj engine.Object, kind engine.Kind, cluster, shard string, st statetest.State) error {
	ns, name := obj.GetNamespace(), obj.GetName()
	suffix := naming.StateSuffix(ns, kind.Name(), name)
	stateSecret, err := statetest.Secret(ns, suffix, st)
	if err != nil {
		return err
	}
	parsed, err := state.FromSecret(stateSecret)
	if err != nil {
		return fmt.Errorf("parse test state: %w", err)
	}
	obj.SetLabels(shardLabels(cluster, shard))
	if err := kind.ApplyOutputs(obj, parsed); err != nil {
		return fmt.Errorf("apply outputs: %w", err)
	}
	contract, wait, err := kind.Contract(ctx, engine.Env{Cache: k8s, Live: k8s, ClusterName: cluster}, obj)
	if err != nil {
		return fmt.Errorf("contract inputs: %w", err)
	}
	if wait != nil {
		return fmt.Errorf("contract inputs wait: %s", wait.Message)
	}
	in, err := inputs.Assemble(ctx, k8s, ns, obj.GetTerraformSpec(), contract)
	if err != nil {
		return fmt.Errorf("assemble inputs: %w", err)
	}
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[infrav1.BlockMoveAnnotation] = ""
	ann[infrav1.RunSeqAnnotation] = "2"
	ann[infrav1.AppliedHashAnnotation] = in.Hash
	obj.SetAnnotations(ann)
	obj.SetFinalizers([]string{infrav1.Finalizer})
	status := obj.GetTerraformStatus().DeepCopy()
	if err := k8s.Create(ctx, obj); err != nil {
		return fmt.Errorf("create %s %s: %w", kind.Name(), name, err)
	}
	*obj.GetTerraformStatus() = *status
	obj.GetTerraformStatus().Initialization = &infrav1.Initialization{Provisioned: ptr.To(true)}
	if err := k8s.Status().Update(ctx, obj); err != nil {
		return fmt.Errorf("write status of %s %s: %w", kind.Name(), name, err)
	}
	gvk, err := apiutil.GVKForObject(obj, env.Scheme)
	if err != nil {
		return fmt.Errorf("kind of object: %w", err)
	}
	objs, err := appliedSecrets(obj, gvk, suffix, cluster, stateSecret, parsed, in)
	if err != nil {
		return err
	}
	ownerRef := []metav1.OwnerReference{*metav1.NewControllerRef(obj, gvk)}
	owned := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: naming.RunnerServiceAccountName(suffix),
			Labels: naming.OwnerLabels(kind.Name(), name, cluster, shard), OwnerReferences: ownerRef}
	}
	objs = append(objs,
		&corev1.ServiceAccount{ObjectMeta: owned(), AutomountServiceAccountToken: new(bool)},
		&rbacv1.Role{ObjectMeta: owned(), Rules: jobs.RunnerPolicyRules(suffix)},
		&rbacv1.RoleBinding{ObjectMeta: owned(),
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: naming.RunnerServiceAccountName(suffix)},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: naming.RunnerServiceAccountName(suffix), Namespace: ns}}},
		objects.Lease(ns, naming.StateLockLeaseName(suffix)).Labels(runnerapi.StateLabels(suffix)).Obj(),
	)
	for _, o := range objs {
		if err := k8s.Create(ctx, o); err != nil {
			return fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	job, err := jobs.Build(jobs.Params{
		Owner: jobs.Owner{APIVersion: gvk.GroupVersion().String(), Kind: kind.Name(), Name: name, Namespace: ns, UID: obj.GetUID(),
			Cluster: cluster, Shard: shard},
		Suffix: suffix, Seq: 1, Operation: infrav1.OperationApply, InputsHash: in.Hash, Spec: *obj.GetTerraformSpec(),
		Defaults: jobs.Defaults{RunnerImage: "captf/manager:bench", ServiceAccountName: naming.RunnerServiceAccountName(suffix)},
	})
	if err != nil {
		return fmt.Errorf("build job: %w", err)
	}
	// The Job runs as in a cluster: the Job controller creates its pod, the scheduler binds it,
	// the bench's node runs it and ends it at once (succeeded), the Job controller completes the
	// Job; grow waits for that.
	if err := node.end(ns, job.Name, true, ""); err != nil {
		return err
	}
	if err := k8s.Create(ctx, job); err != nil {
		return fmt.Errorf("create job: %w", err)
	}
	return nil
}

// appliedSecrets are the object's state, durable inputs, outputs and plan Secrets as the
// engine writes them.
func appliedSecrets(obj engine.Object, gvk schema.GroupVersionKind, suffix, cluster string, stateSecret *corev1.Secret, parsed *state.State, in *inputs.Inputs) ([]client.Object, error) {
	roleLabels := func(role string) map[string]string {
		l := naming.OwnerLabels(gvk.Kind, obj.GetName(), cluster, naming.ShardOf(obj))
		l[infrav1.SecretRoleLabel] = role
		l[inputs.MoveLabel] = ""
		return l
	}
	stateSecret.Labels = roleLabels(infrav1.SecretRoleState)
	maps.Copy(stateSecret.Labels, runnerapi.StateLabels(suffix))
	stateSecret.Finalizers = []string{infrav1.StateProtectionFinalizer}

	durable, err := inputs.DurableSecret(obj, gvk, suffix, in)
	if err != nil {
		return nil, fmt.Errorf("durable inputs: %w", err)
	}
	durable.Labels[infrav1.SecretRoleLabel] = infrav1.SecretRoleInputs
	durable.Finalizers = []string{infrav1.StateProtectionFinalizer}

	outputs, err := state.OutputsSecret(obj, gvk, suffix, parsed)
	if err != nil {
		return nil, fmt.Errorf("outputs secret: %w", err)
	}
	outputs.Labels[infrav1.SecretRoleLabel] = infrav1.SecretRoleOutputs

	plan := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: naming.PlanSecretName(suffix),
		Labels: roleLabels(infrav1.SecretRolePlan), OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(obj, gvk)}},
		Type: corev1.SecretTypeOpaque}
	return []client.Object{stateSecret, durable, outputs, plan}, nil
}

// remove deletes the fleet (no manager runs): finalizers off the objects and the protected
// Secrets, then everything the cells hold, and waits until the garbage collector and the node
// removed the Jobs' pods, so later tests and benchmarks of the package start from the same
// control plane without it.
func (f *fleet) remove(tb testing.TB) {
	tb.Helper()
	if err := inParallel(f.namespaces, func(ns string) error {
		if err := removeCell(ns); err != nil {
			return fmt.Errorf("remove cell %s: %w", ns, err)
		}
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	// The garbage collector deletes the pods of the deleted Jobs and the node removes them:
	// wait, so no later measurement sees the node or the Job controller still at work. Each
	// poll reads the namespaces in order up to the first one that still has a pod.
	pending := slices.Clone(f.namespaces)
	waitUntil(tb, fixtureTimeout, func() (bool, string) {
		for len(pending) > 0 {
			pods := &metav1.PartialObjectMetadataList{}
			pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
			if err := k8s.List(ctx, pods, client.InNamespace(pending[0])); err != nil {
				return false, fmt.Sprintf("list pods of %s: %v", pending[0], err)
			}
			if n := len(pods.Items); n > 0 {
				return false, fmt.Sprintf("%d of %d namespaces of the removed fleet still have pods (%s: %d)", len(pending), len(f.namespaces), pending[0], n)
			}
			pending = pending[1:]
		}
		return true, ""
	})
	f.namespaces = nil
}

func removeCell(ns string) error {
	unfinalize := func(list client.ObjectList) error {
		if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		return meta.EachListItem(list, func(item k8sruntime.Object) error {
			o, ok := item.(client.Object)
			if !ok || len(o.GetFinalizers()) == 0 {
				return nil
			}
			patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
			if err := k8s.Patch(ctx, o, patch); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("remove finalizers of %s: %w", o.GetName(), err)
			}
			return nil
		})
	}
	for _, l := range []client.ObjectList{&infrav1.TerraformClusterList{}, &infrav1.TerraformMachineList{}, &infrav1.TerraformMachinePoolList{}, &corev1.SecretList{}} {
		if err := unfinalize(l); err != nil {
			return err
		}
	}
	bg := client.PropagationPolicy(metav1.DeletePropagationBackground)
	for _, o := range []client.Object{&infrav1.TerraformMachine{}, &infrav1.TerraformMachinePool{}, &infrav1.TerraformCluster{},
		&clusterv1.Machine{}, &clusterv1.MachinePool{}, &clusterv1.Cluster{}, &batchv1.Job{}, &corev1.Secret{},
		&corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}, &coordinationv1.Lease{}} {
		if err := k8s.DeleteAllOf(ctx, o, client.InNamespace(ns), bg); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete %T: %w", o, err)
		}
	}
	return nil
}

// fleetRequests counts the requests of a manager by what they are for: discovery, the
// informers' lists and watches (cache fill), live reads of single objects or of uncached
// lists, and writes.
type fleetRequests struct {
	mu     sync.Mutex
	byKey  map[string]int
	byKind map[string]int
}

func newFleetRequests() *fleetRequests {
	return &fleetRequests{byKey: map[string]int{}, byKind: map[string]int{}}
}

// Request categories.
const (
	reqDiscovery = "discovery"
	reqCacheFill = "cache fill"
	reqLiveRead  = "live read"
	reqWrite     = "write"
)

// uncachedLists are the collections the manager lists live (never through an informer).
var uncachedLists = map[string]bool{"pods": true, "leases": true, "configmaps": true}

func (c *fleetRequests) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		kind, key := classify(r)
		c.mu.Lock()
		c.byKind[kind]++
		c.byKey[kind+": "+key]++
		c.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

// classify sorts one request into a category, with "VERB resource" as its detail.
func classify(r *http.Request) (string, string) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	// /api/v1/..., /apis/group/version/...: the rest after the group version.
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:]
	}
	if len(rest) == 0 {
		return reqDiscovery, r.Method + " " + r.URL.Path
	}
	if rest[0] == "namespaces" && len(rest) >= 3 {
		rest = rest[2:]
	}
	resource, named := rest[0], len(rest) >= 2
	key := r.Method + " " + resource
	if len(rest) >= 3 {
		key += "/" + rest[2]
	}
	switch {
	case r.Method != http.MethodGet:
		return reqWrite, key
	case r.URL.Query().Get("watch") == "true":
		// An informer's watch: with client-go's watch-list it also carries the initial list.
		return reqCacheFill, "WATCH " + resource
	case named && resource == "secrets":
		return reqLiveRead, "GET secrets (" + secretRole(rest[1]) + ")"
	case named:
		return reqLiveRead, "GET " + resource
	case uncachedLists[resource]:
		return reqLiveRead, "LIST " + resource
	}
	return reqCacheFill, "LIST " + resource
}

// secretRole names what a Secret is by its name: the fleet's bootstrap data, or the prefix
// of a CAPTF or Terraform Secret (its name up to the object's suffix).
func secretRole(name string) string {
	if strings.HasSuffix(name, "-bootstrap") {
		return "bootstrap data"
	}
	if i := strings.LastIndex(name, "-"); i > 0 && len(name)-i-1 == naming.SuffixLength {
		return name[:i]
	}
	return "other"
}

func (c *fleetRequests) snapshot() (map[string]int, map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.byKind), maps.Clone(c.byKey)
}

// controllerMetrics sums controller-runtime metrics over the three CAPTF controllers (label
// controller, or name for the workqueue's), by metric name, from one gather.
func controllerMetrics() map[string]float64 {
	out := map[string]float64{}
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		return out
	}
	ours := map[string]bool{infrav1.TerraformClusterKind: true, infrav1.TerraformMachineKind: true, infrav1.TerraformMachinePoolKind: true}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if (l.GetName() == "controller" || l.GetName() == "name") && ours[l.GetValue()] {
					out[mf.GetName()] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
					break
				}
			}
		}
	}
	return out
}

// Metrics the cold start is read from.
const (
	metricPasses  = "controller_runtime_reconcile_total"
	metricErrors  = "controller_runtime_reconcile_errors_total"
	metricDepth   = "workqueue_depth"
	metricWorkers = "controller_runtime_active_workers"
)

// coldStart is what one manager start over the fleet cost.
type coldStart struct {
	objects int
	// all is the time from the manager's start until every object had been reconciled once
	// (each controller's queue drained, no worker busy, at least one pass per object).
	all    time.Duration
	passes float64
	errors float64
	byKind map[string]int
	byKey  map[string]int
	// peakHeap is the highest live heap sampled (every 20 ms) above the heap before the
	// start; settledHeap the heap after a GC once all objects were reconciled.
	peakHeap, settledHeap uint64
	// shards, when the fleet was split between managers (--watch-filter), are the requests of
	// each manager by kind, in the order of the shards; byKind and byKey are their sums.
	shards  []string
	byShard []map[string]int
	// memLimit is the soft memory limit the manager ran under (0: none), as
	// setup.MemoryLimit sets it from the container's.
	memLimit int64
}

func (s coldStart) requests() int {
	n := 0
	for _, v := range s.byKind {
		n += v
	}
	return n
}

func (s coldStart) per(kind string) float64 { return float64(s.byKind[kind]) / float64(s.objects) }

// startCold starts the product's manager on the fleet and measures it until every object was
// reconciled once, then stops it. With shards, it starts one manager per shard
// (--watch-filter) at once and measures them together.
func startCold(tb testing.TB, objects int, shards ...string) coldStart {
	tb.Helper()
	return startColdLimited(tb, objects, 0, shards...)
}

// deploymentMemoryLimit is the manager container's memory limit in config/manager.
const deploymentMemoryLimit = 512 << 20

// deploymentSoftLimit is the soft memory limit a manager of config/manager's Deployment gives
// the Go runtime (setup.MemoryLimit of deploymentMemoryLimit).
func deploymentSoftLimit(tb testing.TB) int64 {
	tb.Helper()
	limit, err := setup.MemoryLimit(func(k string) string {
		if k == setup.EnvMemoryLimit {
			return strconv.Itoa(deploymentMemoryLimit)
		}
		return ""
	})
	if err != nil || limit == 0 {
		tb.Fatalf("no soft memory limit from a %d-byte container limit: %v", deploymentMemoryLimit, err)
	}
	return limit
}

// startColdLimited is startCold with the Go runtime's soft memory limit set, while the manager
// runs, to limit bytes above what the process holds before it starts (0: no limit): the
// manager's share of the process is then held to limit as its own process would be.
func startColdLimited(tb testing.TB, objects int, limit int64, shards ...string) coldStart {
	tb.Helper()
	runtime.GC()
	var base runtime.MemStats
	if limit > 0 {
		// Give back what the collector freed, so the budget counts only what the process holds.
		debug.FreeOSMemory()
		runtime.ReadMemStats(&base)
		prev := debug.SetMemoryLimit(int64(base.Sys-base.HeapReleased) + limit)
		defer debug.SetMemoryLimit(prev)
	}
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-stopSampling:
				return
			case <-t.C:
			}
		}
	}()

	managers := shards
	if len(managers) == 0 {
		managers = []string{""}
	}
	var all []*fleetRequests
	var stops []func()
	stop := func() {
		for _, s := range stops {
			s()
		}
	}
	before := controllerMetrics()
	profile(tb, objects, len(shards), limit, "before")
	t0 := time.Now()
	for _, shard := range managers {
		reqs := newFleetRequests()
		all = append(all, reqs)
		_, s := startManagerOpts(tb, reqs.wrap, setup.Options{WatchFilter: shard})
		stops = append(stops, s)
	}
	// captf_objects lists every object from the cache each time the registry is gathered;
	// polled here every few milliseconds it would cost more than the manager measured. The
	// manager registered it afresh; take it out again (a collector is known by its metrics).
	metrics.Registry.Unregister(&captfmetrics.Objects{})
	now, ok := waitReconciled(before, objects)
	if !ok {
		stop()
		tb.Fatalf("the cold-started manager did not reconcile %d objects within 10 minutes (%.0f passes)", objects, now[metricPasses]-before[metricPasses])
	}
	took := time.Since(t0)
	close(stopSampling)
	<-sampled
	res := coldStart{objects: objects, all: took, byKind: map[string]int{}, byKey: map[string]int{},
		passes: now[metricPasses] - before[metricPasses], errors: now[metricErrors] - before[metricErrors]}
	for _, reqs := range all {
		byKind, byKey := reqs.snapshot()
		for k, v := range byKind {
			res.byKind[k] += v
		}
		for k, v := range byKey {
			res.byKey[k] += v
		}
		if len(shards) > 0 {
			res.byShard = append(res.byShard, byKind)
		}
	}
	res.shards = shards
	res.memLimit = limit
	if p := peak.Load(); p > base.HeapAlloc {
		res.peakHeap = p - base.HeapAlloc
	}
	runtime.GC()
	profile(tb, objects, len(shards), limit, "after")
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if after.HeapAlloc > base.HeapAlloc {
		res.settledHeap = after.HeapAlloc - base.HeapAlloc
	}
	stop()
	return res
}

// waitReconciled polls the controllers' metrics until, since before, at least objects passes
// ran and every queue is empty with no worker busy (every manager of the process counted), for
// 10 minutes at most. It returns the last metrics read and whether that happened.
func waitReconciled(before map[string]float64, objects int) (map[string]float64, bool) {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		now := controllerMetrics()
		// Deltas for the passes and the queue depth: a manager stopped while its queue held
		// items (a gate that measures a fixed window) leaves the shared series where they were.
		// The active workers are read as they are: each controller that starts sets that shared
		// gauge to 0 (controller-runtime's initMetrics), so a start while another manager's
		// workers were busy leaves it below 0 for good once they finish, and a delta from such a
		// value never comes back to 0 (TestShardsGate's restart waited 10 minutes at "active
		// workers 10" with every pass done and no queue). All done, it is 0 or below.
		passes := now[metricPasses] - before[metricPasses]
		depth, workers := now[metricDepth]-before[metricDepth], now[metricWorkers]
		if depth <= 0 && workers <= 0 && passes >= float64(objects) {
			return now, true
		}
		if time.Now().After(deadline) {
			return now, false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// settle runs one manager over the fleet until every object was reconciled once, so the
// conditions the fleet's objects carry are the ones the product writes, and fails if that
// manager started any Job: the fixture then lacks something an applied object has.
func settle(tb testing.TB, objects int) {
	tb.Helper()
	s := startCold(tb, objects)
	if n := s.byKey[reqWrite+": POST jobs"]; n > 0 || s.errors > 0 {
		tb.Fatalf("the first manager on the fleet started %d Jobs (%.0f passes failed): the fixture is not what a completed apply leaves; writes: %s",
			n, s.errors, format(filterKind(s.byKey, reqWrite)))
	}
}

func filterKind(byKey map[string]int, kind string) map[string]int {
	out := map[string]int{}
	for k, v := range byKey {
		if strings.HasPrefix(k, kind+": ") {
			out[strings.TrimPrefix(k, kind+": ")] = v
		}
	}
	return out
}

func printFleet(rows []coldStart) {
	fmt.Printf("\n%-8s %-9s %12s %14s %9s %11s %10s %12s %6s %11s %11s\n",
		"objects", "managers", "memory limit", "all reconciled", "requests", "req/object", "live reads", "live/object", "writes", "peak heap", "heap after")
	for _, r := range rows {
		limit := "-"
		if r.memLimit > 0 {
			limit = fmt.Sprintf("%.1f MB", mb(uint64(r.memLimit)))
		}
		fmt.Printf("%-8d %-9s %12s %13.2fs %9d %11.2f %10d %12.2f %6d %8.1f MB %8.1f MB\n", r.objects, r.managers(), limit, r.all.Seconds(),
			r.requests(), float64(r.requests())/float64(r.objects), r.byKind[reqLiveRead], r.per(reqLiveRead), r.byKind[reqWrite],
			mb(r.peakHeap), mb(r.settledHeap))
	}
	for _, r := range rows {
		label := r.managers()
		if r.memLimit > 0 {
			label += fmt.Sprintf(", memory limit %.1f MB", mb(uint64(r.memLimit)))
		}
		fmt.Printf("%d objects, %s: passes %.0f (errors %.0f); live reads %s; cache fill %s; writes %s; discovery %d\n", r.objects, label, r.passes, r.errors,
			format(filterKind(r.byKey, reqLiveRead)), format(filterKind(r.byKey, reqCacheFill)), format(filterKind(r.byKey, reqWrite)), r.byKind[reqDiscovery])
		for i, shard := range r.shards {
			n := 0
			for _, v := range r.byShard[i] {
				n += v
			}
			fmt.Printf("  the manager of shard %s: %d requests (%s)\n", shard, n, format(r.byShard[i]))
		}
	}
}

// managers names the managers of a cold start: "1", or "2 shards".
func (s coldStart) managers() string {
	if len(s.shards) == 0 {
		return "1"
	}
	return fmt.Sprintf("%d shards", len(s.shards))
}

// BenchmarkFleetColdStart writes a fleet of already-applied objects (cells of one cluster, six
// machines and three pools with everything a completed apply leaves; the cells labelled for two
// shards, a and b, in turn), lets one manager see it once, then measures a second manager's cold
// start on it: time until every object was reconciled once, API requests by purpose (live reads
// by idle objects: target 0), writes (target 0), peak heap; then the same under the soft memory
// limit a manager of config/manager's Deployment sets itself (deploymentSoftLimit); then the
// same with two managers, --watch-filter=a and --watch-filter=b, started at once. 200, 2,000 and 10,000 objects side
// by side in one run (FLEET_SIZES, comma-separated, overrides them); each size is the one
// before plus more.
func BenchmarkFleetColdStart(b *testing.B) {
	start(b)
	f := &fleet{prefix: "fleet", shards: []string{"a", "b"}}
	defer f.remove(b)
	sizes := []int{200, 2000, 10000}
	if env := os.Getenv("FLEET_SIZES"); env != "" {
		sizes = nil
		for _, v := range strings.Split(env, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n <= 0 || n%fleetPerCell != 0 {
				b.Fatalf("FLEET_SIZES: %q is not a positive multiple of %d", v, fleetPerCell)
			}
			sizes = append(sizes, n)
		}
	}
	var rows []coldStart
	for _, n := range sizes {
		t := time.Now()
		f.grow(b, n)
		fmt.Fprintf(os.Stderr, "fleet of %d written in %.1fs\n", n, time.Since(t).Seconds())
		settle(b, n)
		rows = append(rows, startCold(b, n), startColdLimited(b, n, deploymentSoftLimit(b)), startCold(b, n, "a", "b"))
	}
	printFleet(rows)
	for _, r := range rows {
		name := fmt.Sprintf("%d", r.objects)
		if len(r.shards) > 0 {
			name += "-shards"
		}
		if r.memLimit > 0 {
			name += "-memlimit"
		}
		b.ReportMetric(r.all.Seconds(), "s-all-reconciled-"+name)
		b.ReportMetric(r.per(reqLiveRead), "live-reads/object-"+name)
		b.ReportMetric(float64(r.requests())/float64(r.objects), "requests/object-"+name)
		b.ReportMetric(mb(r.peakHeap), "peak-heap-MB-"+name)
	}
}

// coldManagerReads are the live reads a manager makes once per start, whatever the fleet: the
// identity-token audience check's probe account (cmd/manager/setup, probe.go).
var coldManagerReads = map[string]int{"GET serviceaccounts": 1}

// maxCacheFill bounds the lists and watches of a cold start: one list and one watch per
// informer at most (9 informers: 8 in the manager's cache, the bootstrap data Secrets'
// metadata in the second), however large the fleet.
const maxCacheFill = 18

// TestFleetColdStartGate is the gate in `make test`: a manager that starts cold on a fleet of
// fleetGateObjects applied objects reconciles every one of them and writes nothing (no Job, no
// patch: it finds nothing to do), fills its cache with a fixed number of lists and watches,
// and its idle objects read nothing live: each one's record of its inputs' sources
// (status.inputs) still matches what the caches show. Counts only, never times.
func TestFleetColdStartGate(t *testing.T) {
	start(t)
	f := &fleet{prefix: "fleetgate"}
	defer f.remove(t)
	f.grow(t, fleetGateObjects)
	settle(t, f.objects())
	r := startCold(t, f.objects())
	printFleet([]coldStart{r})
	if r.passes < float64(f.objects()) || r.errors > 0 {
		t.Errorf("%.0f passes (%.0f failed) for %d objects: every object must be reconciled once without an error", r.passes, r.errors, f.objects())
	}
	if n := r.byKind[reqWrite]; n != 0 {
		t.Errorf("the cold start over an applied fleet wrote %d times, want 0: %s", n, format(filterKind(r.byKey, reqWrite)))
	}
	if n := r.byKind[reqCacheFill]; n > maxCacheFill {
		t.Errorf("the cold start filled its cache with %d lists and watches, want at most %d: %s", n, maxCacheFill, format(filterKind(r.byKey, reqCacheFill)))
	}
	for what, n := range filterKind(r.byKey, reqLiveRead) {
		if n > coldManagerReads[what] {
			t.Errorf("the cold start read %q live %d times, want %d (idle objects read nothing live)", what, n, coldManagerReads[what])
		}
	}
}

// profile writes a heap profile to $FLEET_PROFILES/<objects>-<shards>-<limit>-<when>.pprof
// when FLEET_PROFILES names a folder: the difference of the before and after profiles of one
// cold start (go tool pprof -base) is what that start allocated, and what it kept.
func profile(tb testing.TB, objects, shards int, limit int64, when string) {
	tb.Helper()
	dir := os.Getenv("FLEET_PROFILES")
	if dir == "" {
		return
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%d-%d-%d-%s.pprof", objects, shards, limit, when)))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		tb.Fatal(err)
	}
}
