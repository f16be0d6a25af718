package engine_test

import (
	"fmt"
	"strconv"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// fixture is one Cluster API Cluster in its own namespace.
type fixture struct {
	ns      string
	cluster string
	// unlabelledBootstrap leaves the cluster-name label off the bootstrap data Secrets.
	unlabelledBootstrap bool
}

func newFixture() *fixture {
	f := &fixture{ns: kit.Namespace(), cluster: "c1"}
	c := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.cluster},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.TerraformClusterKind, Name: f.cluster,
		}},
	}
	Expect(k8s.Create(ctx, c)).To(Succeed())
	return f
}

// moduleSpec gives a Terraform spec the suite's module (a ConfigMap) and the variables vars.
func moduleSpec(vars string) func(*infrav1.TerraformSpec) {
	return func(s *infrav1.TerraformSpec) {
		s.Module = infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "module"}}
		s.Variables = &runtime.RawExtension{Raw: []byte(vars)}
	}
}

func (f *fixture) labels() map[string]string {
	return map[string]string{clusterv1.ClusterNameLabel: f.cluster}
}

// bootstrapLabels are the labels of a bootstrap data Secret: the cluster-name label, as Cluster
// API's bootstrap contract asks, unless the fixture leaves it off.
func (f *fixture) bootstrapLabels() map[string]string {
	if f.unlabelledBootstrap {
		return nil
	}
	return f.labels()
}

// terraformCluster starts the TerraformCluster of the fixture's Cluster as createCluster creates
// it, for a spec that changes it before creating it.
func (f *fixture) terraformCluster() *objects.TerraformBuilder[*infrav1.TerraformCluster] {
	return objects.Cluster(f.ns, f.cluster).Spec(moduleSpec(`{"size":1}`))
}

func (f *fixture) createCluster() *infrav1.TerraformCluster {
	tc := f.terraformCluster().Obj()
	Expect(k8s.Create(ctx, tc)).To(Succeed())
	return tc
}

// createMachine creates a Machine with its bootstrap data and the TerraformMachine it owns.
func (f *fixture) createMachine(name string) *infrav1.TerraformMachine {
	boot := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name + "-bootstrap", Labels: f.bootstrapLabels()},
		Data: map[string][]byte{"value": []byte("#cloud-config for " + name)}}
	Expect(k8s.Create(ctx, boot)).To(Succeed())
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Labels: f.labels()},
		Spec: clusterv1.MachineSpec{
			ClusterName: f.cluster,
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: &boot.Name},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.TerraformMachineKind, Name: name},
		},
	}
	Expect(k8s.Create(ctx, m)).To(Succeed())
	tm := objects.Machine(f.ns, name).Cluster(f.cluster).Spec(moduleSpec(`{"flavor":"small"}`)).
		OwnerRef(metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID}).Obj()
	Expect(k8s.Create(ctx, tm)).To(Succeed())
	return tm
}

// createPool creates a MachinePool with its bootstrap data and the TerraformMachinePool it owns.
func (f *fixture) createPool(name string) *infrav1.TerraformMachinePool {
	boot := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name + "-bootstrap", Labels: f.bootstrapLabels()},
		Data: map[string][]byte{"value": []byte("#cloud-config for pool " + name)}}
	Expect(k8s.Create(ctx, boot)).To(Succeed())
	mp := &clusterv1.MachinePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Labels: f.labels()},
		Spec: clusterv1.MachinePoolSpec{
			ClusterName: f.cluster,
			Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
				ClusterName: f.cluster,
				Bootstrap:   clusterv1.Bootstrap{DataSecretName: &boot.Name},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.TerraformMachinePoolKind, Name: name},
			}},
		},
	}
	Expect(k8s.Create(ctx, mp)).To(Succeed())
	tp := objects.MachinePool(f.ns, name).Cluster(f.cluster).Spec(moduleSpec(`{"instances":2}`)).
		OwnerRef(metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachinePool", Name: mp.Name, UID: mp.UID}).Obj()
	Expect(k8s.Create(ctx, tp)).To(Succeed())
	return tp
}

func suffixOf(o client.Object, kind string) string {
	return naming.StateSuffix(o.GetNamespace(), kind, o.GetName())
}

// waitForJob waits until the Job of run number seq of the object exists and returns it.
func waitForJob(o client.Object, kind string, seq int64) *batchv1.Job {
	GinkgoHelper()
	job := &batchv1.Job{}
	key := types.NamespacedName{Namespace: o.GetNamespace(), Name: naming.JobName(suffixOf(o, kind), seq)}
	Eventually(func() error {
		err := k8s.Get(ctx, key, job)
		if err != nil {
			// Say what the object reports, to tell a wait from a bug.
			fresh := o.DeepCopyObject().(client.Object)
			_ = k8s.Get(ctx, client.ObjectKeyFromObject(o), fresh)
			if c, ok := fresh.(interface{ GetConditions() []metav1.Condition }); ok {
				return fmt.Errorf("%w; object conditions: %+v", err, c.GetConditions())
			}
		}
		return err
	}).Should(Succeed(), "Job %s was never created", key.Name)
	return job
}

func result(op infrav1.Operation, ok bool, errText string) string {
	r := runnerapi.Result{Operation: string(op), Outcome: runnerapi.OutcomeSucceeded, Binary: "tofu",
		Steps: []runnerapi.Step{{Name: "init"}, {Name: "apply"}}}
	if !ok {
		r.Outcome = runnerapi.OutcomeFailed
		r.Steps[1].ExitCode = 1
		r.Error = errText
	}
	return string(runnerapi.Encode(r))
}

// completeJob plays terraform and the kubelet: it writes the state the module would leave,
// then finishes the Job's pod and the Job.
func completeJob(job *batchv1.Job, st *statetest.State, ok bool, errText string) {
	GinkgoHelper()
	if st != nil {
		suffix := job.Labels[infrav1.OwnerKindLabel]
		suffix = naming.StateSuffix(job.Namespace, suffix, ownerName(job))
		Expect(statetest.Write(ctx, k8s, job.Namespace, suffix, *st)).To(Succeed())
	}
	pod, err := envtest.StartJob(ctx, k8s, job)
	Expect(err).NotTo(HaveOccurred())
	op := infrav1.Operation(job.Labels[infrav1.OperationLabel])
	Expect(envtest.FinishJob(ctx, k8s, job, pod, ok, result(op, ok, errText))).To(Succeed())
}

func ownerName(job *batchv1.Job) string {
	for _, r := range job.OwnerReferences {
		if r.Controller != nil && *r.Controller {
			return r.Name
		}
	}
	Fail("job " + job.Name + " has no controller owner")
	return ""
}

func secretExists(ns, name string) bool {
	err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &corev1.Secret{})
	if err != nil && !apierrors.IsNotFound(err) {
		Fail(err.Error())
	}
	return err == nil
}

func leasesOf(ns string) []coordinationv1.Lease {
	GinkgoHelper()
	list := &coordinationv1.LeaseList{}
	Expect(k8s.List(ctx, list, client.InNamespace(ns), client.HasLabels{infrav1.LeaseLabel})).To(Succeed())
	return list.Items
}

func runSeqOf(o client.Object) int64 {
	v, _ := strconv.ParseInt(o.GetAnnotations()[infrav1.RunSeqAnnotation], 10, 64)
	return v
}

var _ = fmt.Sprintf

func crashParams(tc *infrav1.TerraformCluster, name string) jobs.Params {
	seq, err := naming.ParseJobSeq(suffixOf(tc, infrav1.TerraformClusterKind), name)
	Expect(err).NotTo(HaveOccurred())
	return jobs.Params{
		Owner: jobs.Owner{APIVersion: infrav1.GroupVersion.String(), Kind: infrav1.TerraformClusterKind, Name: tc.Name,
			Namespace: tc.Namespace, UID: tc.UID, Cluster: tc.Labels[clusterv1.ClusterNameLabel]},
		Suffix: suffixOf(tc, infrav1.TerraformClusterKind), Seq: seq, Operation: infrav1.OperationApply,
		InputsHash: "v1-crashed-attempt", Spec: tc.Spec.TerraformSpec,
		Defaults: jobs.Defaults{RunnerImage: "captf/manager:test", RuntimeImage: "captf/tofu:test"},
	}
}

func get[T client.Object](o T) T { return envtest.Get(kit, o) }

func update[T client.Object](o T, fn func(T)) { envtest.Update(kit, o, fn) }

// waitForClusterInfrastructure waits until the machine reports DependenciesReady=False with
// WaitingForClusterInfrastructure: its cluster is not provisioned.
func waitForClusterInfrastructure(tm *infrav1.TerraformMachine) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		c := envtest.Condition(get(tm), infrav1.DependenciesReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(infrav1.WaitingForClusterInfrastructureReason))
	}).Should(Succeed())
}
