package chaos_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

func createCluster(ns, name string, finalizer bool) *infrav1.TerraformCluster {
	GinkgoHelper()
	Expect(k8s.Create(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.TerraformClusterKind, Name: name}}})).To(Succeed())
	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
		Spec: infrav1.TerraformClusterSpec{TerraformSpec: infrav1.TerraformSpec{
			Module:    infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "m"}},
			Variables: &runtime.RawExtension{Raw: []byte(`{"size":1}`)}}},
	}
	if finalizer {
		tc.Finalizers = []string{infrav1.Finalizer}
	}
	Expect(k8s.Create(ctx, tc)).To(Succeed())
	return tc
}

func jobsIn(ns string) []batchv1.Job {
	GinkgoHelper()
	list := &batchv1.JobList{}
	Expect(k8s.List(ctx, list, client.InNamespace(ns), client.HasLabels{infrav1.ManagedLabel})).To(Succeed())
	return list.Items
}

// finish plays terraform and the kubelet for a Job: the state it leaves, then the pod and Job.
func finish(job *batchv1.Job) {
	GinkgoHelper()
	owner := ""
	for _, r := range job.OwnerReferences {
		owner = r.Name
	}
	kind := job.Labels[infrav1.OwnerKindLabel]
	suffix := naming.StateSuffix(job.Namespace, kind, owner)
	var st statetest.State
	switch {
	case job.Labels[infrav1.OperationLabel] == string(infrav1.OperationDestroy):
		st = statetest.Destroyed()
	case kind == infrav1.TerraformClusterKind:
		st = statetest.Cluster("10.9.0.1", 6443)
	case kind == infrav1.TerraformMachineKind:
		st = statetest.Machine("tf://" + strings.ToLower(owner))
	default:
		st = statetest.MachinePool("tf://" + owner + "-0")
	}
	Expect(statetest.Write(ctx, k8s, job.Namespace, suffix, st)).To(Succeed())
	pod, err := envtest.StartJob(ctx, k8s, job)
	Expect(err).NotTo(HaveOccurred())
	Expect(envtest.FinishJob(ctx, k8s, job, pod, true, "")).To(Succeed())
}

func get[T client.Object](o T) T { return envtest.Get(kit, o) }
