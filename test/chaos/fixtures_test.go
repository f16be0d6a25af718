package chaos_test

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// clusterObjects builds a Cluster and the TerraformCluster its infrastructureRef names.
func clusterObjects(ns, name string, finalizer bool) (*clusterv1.Cluster, *infrav1.TerraformCluster) {
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.TerraformClusterKind, Name: name}}}
	b := objects.Cluster(ns, name).Spec(moduleM(`{"size":1}`))
	if finalizer {
		b.Finalizer()
	}
	return c, b.Obj()
}

// moduleM sets the suite's module (the ConfigMap m) and vars.
func moduleM(vars string) func(*infrav1.TerraformSpec) {
	return func(s *infrav1.TerraformSpec) {
		s.Module = infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "m"}}
		s.Variables = &runtime.RawExtension{Raw: []byte(vars)}
	}
}

func createCluster(ns, name string, finalizer bool) *infrav1.TerraformCluster {
	GinkgoHelper()
	c, tc := clusterObjects(ns, name, finalizer)
	Expect(k8s.Create(ctx, c)).To(Succeed())
	Expect(k8s.Create(ctx, tc)).To(Succeed())
	return tc
}

// machineObjects builds a Machine with its bootstrap data and the TerraformMachine it owns
// (ownedBy sets the owner's UID once the Machine exists).
func machineObjects(ns, cluster, name string) (*corev1.Secret, *clusterv1.Machine, *infrav1.TerraformMachine) {
	boot := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-bootstrap"}, Data: map[string][]byte{"value": []byte("#cloud-config")}}
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.MachineSpec{ClusterName: cluster, Bootstrap: clusterv1.Bootstrap{DataSecretName: &boot.Name},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.TerraformMachineKind, Name: name}}}
	return boot, m, objects.Machine(ns, name).Cluster(cluster).Spec(moduleM(`{"flavor":"small"}`)).Obj()
}

// poolObjects builds a MachinePool with its bootstrap data and the TerraformMachinePool it owns.
func poolObjects(ns, cluster, name string) (*corev1.Secret, *clusterv1.MachinePool, *infrav1.TerraformMachinePool) {
	boot := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-bootstrap"}, Data: map[string][]byte{"value": []byte("#cloud-config")}}
	mp := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.MachinePoolSpec{ClusterName: cluster, Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
			ClusterName: cluster, Bootstrap: clusterv1.Bootstrap{DataSecretName: &boot.Name},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.TerraformMachinePoolKind, Name: name}}}}}
	return boot, mp, objects.MachinePool(ns, name).Cluster(cluster).Spec(moduleM(`{"instances":2}`)).Obj()
}

// ownedBy makes owner (a Machine or MachinePool that exists) the controller owner of o.
func ownedBy(o, owner client.Object) {
	kind := "Machine"
	if _, ok := owner.(*clusterv1.MachinePool); ok {
		kind = "MachinePool"
	}
	o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: kind, Name: owner.GetName(), UID: owner.GetUID()}})
}

// createMachine creates a Machine with its bootstrap data and the TerraformMachine it owns.
func createMachine(ns, cluster, name string) *infrav1.TerraformMachine {
	GinkgoHelper()
	boot, m, tm := machineObjects(ns, cluster, name)
	Expect(k8s.Create(ctx, boot)).To(Succeed())
	Expect(k8s.Create(ctx, m)).To(Succeed())
	ownedBy(tm, m)
	Expect(k8s.Create(ctx, tm)).To(Succeed())
	return tm
}

// createPool creates a MachinePool with its bootstrap data and the TerraformMachinePool it owns.
func createPool(ns, cluster, name string) *infrav1.TerraformMachinePool {
	GinkgoHelper()
	boot, mp, tp := poolObjects(ns, cluster, name)
	Expect(k8s.Create(ctx, boot)).To(Succeed())
	Expect(k8s.Create(ctx, mp)).To(Succeed())
	ownedBy(tp, mp)
	Expect(k8s.Create(ctx, tp)).To(Succeed())
	return tp
}

func jobsIn(ns string) []batchv1.Job {
	GinkgoHelper()
	list := &batchv1.JobList{}
	Expect(k8s.List(ctx, list, client.InNamespace(ns), client.HasLabels{infrav1.ManagedLabel})).To(Succeed())
	return list.Items
}

// jobOwner is the name of the object a Job runs for, and its state suffix.
func jobOwner(job *batchv1.Job) (name, suffix string) {
	for _, r := range job.OwnerReferences {
		name = r.Name
	}
	return name, naming.StateSuffix(job.Namespace, job.Labels[infrav1.OwnerKindLabel], name)
}

// appliedState is the state a successful apply of the Job's owner leaves (its contract
// outputs), or a successful destroy (nothing).
func appliedState(job *batchv1.Job) statetest.State {
	owner, _ := jobOwner(job)
	switch kind := job.Labels[infrav1.OwnerKindLabel]; {
	case job.Labels[infrav1.OperationLabel] == string(infrav1.OperationDestroy):
		return statetest.Destroyed()
	case kind == infrav1.TerraformClusterKind:
		return statetest.Cluster("10.9.0.1", 6443)
	case kind == infrav1.TerraformMachineKind:
		return statetest.Machine("tf://" + strings.ToLower(owner))
	default:
		return statetest.MachinePool("tf://" + owner + "-0")
	}
}

// completeJob plays terraform and the kubelet for a Job: writeState (the state the run leaves;
// nil leaves the state alone), then the pod starts and ends, with result as the runner's
// termination message when it succeeds, and the Job gets its terminal conditions, succeeded or
// failed. A Job deleted meanwhile is done with (errJobGone).
func completeJob(ctx context.Context, job *batchv1.Job, succeeded bool, result []byte, writeState func() error) error {
	if writeState != nil {
		if err := writeState(); err != nil {
			return fmt.Errorf("job %s/%s: write state: %w", job.Namespace, job.Name, err)
		}
	}
	// A Job that reuses the name of a deleted one (a re-created object counts its runs from 1
	// again) finds that Job's pod: envtest has no garbage collector to have removed it.
	stale := objects.PodOf(job, job.Name+"-pod").Obj()
	if err := k8s.Delete(ctx, stale); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("job %s/%s: delete the pod of a deleted Job of that name: %w", job.Namespace, job.Name, err)
	}
	pod, err := envtest.StartJob(ctx, k8s, job)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return errJobGone
		}
		return fmt.Errorf("job %s/%s: %w", job.Namespace, job.Name, err)
	}
	message := string(result)
	if !succeeded && result == nil {
		message = "injected failure: the module's apply failed"
	}
	if err := envtest.FinishJob(ctx, k8s, job, pod, succeeded, message); err != nil {
		if apierrors.IsNotFound(err) {
			return errJobGone
		}
		return fmt.Errorf("job %s/%s: %w", job.Namespace, job.Name, err)
	}
	return nil
}

// finish plays terraform and the kubelet for a Job that succeeds: the state it leaves, then
// the pod and Job.
func finish(job *batchv1.Job) {
	GinkgoHelper()
	_, suffix := jobOwner(job)
	Expect(completeJob(ctx, job, true, nil, func() error {
		return statetest.Write(ctx, k8s, job.Namespace, suffix, appliedState(job))
	})).To(Succeed())
}

func get[T client.Object](o T) T { return envtest.Get(kit, o) }

// dropNamespace removes what a spec left in ns once its manager stopped, so no later spec's
// managers (the soak slice's watch every namespace) reconcile it: the TerraformClusters lose
// their finalizer and go, then their Jobs, Secrets, Leases and Cluster API objects.
func dropNamespace(ns string) {
	GinkgoHelper()
	list := &infrav1.TerraformClusterList{}
	Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	for i := range list.Items {
		tc := &list.Items[i]
		Expect(client.IgnoreNotFound(k8s.Patch(ctx, tc, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))))).To(Succeed())
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, tc))).To(Succeed())
	}
	Expect(cleanNamespace(ns)).To(Succeed())
}
