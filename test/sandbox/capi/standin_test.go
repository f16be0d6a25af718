package capi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/capi"
)

var (
	env   *envtest.Env
	k8s   client.Client
	ctx   context.Context
	nsSeq int
)

func TestStandIn(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Cluster API stand-in (envtest)")
}

var _ = envtest.RegisterSuite(envtest.SuiteOptions{ClusterAPI: true, Log: true,
	EventuallyTimeout: 20 * time.Second, PollingInterval: 100 * time.Millisecond}, func(s *envtest.Suite) {
	env, k8s, ctx = s.Env, s.Client, s.Ctx
	mgr, err := manager.New(env.Config, manager.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	Expect(err).NotTo(HaveOccurred())
	Expect((&capi.StandIn{}).SetupWithManager(mgr)).To(Succeed())
	s.StartManager(mgr)
})

func newNamespace() string {
	nsSeq++
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("standin-%d", nsSeq)}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

func spec() infrav1.TerraformSpec {
	return infrav1.TerraformSpec{
		Module:    infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "module"}},
		Variables: &runtime.RawExtension{Raw: []byte(`{}`)},
	}
}

func ref(kind, name string) clusterv1.ContractVersionedObjectReference {
	return clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: kind, Name: name}
}

// settled waits until the stand-in added its finalizer and the owners it owes the object (the
// Cluster, for a Machine or a MachinePool: one reference; none for the Cluster), and returns
// the object's version then. The stand-in writes them in separate patches.
func settled(o client.Object, finalizer string, owners int) string {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		g.Expect(controllerutil.ContainsFinalizer(o, finalizer)).To(BeTrue())
		g.Expect(o.GetOwnerReferences()).To(HaveLen(owners))
	}).Should(Succeed())
	return o.GetResourceVersion()
}

// linkedTo waits until infra has owner as its controller and the cluster-name label.
func linkedTo(infra client.Object, owner client.Object, cluster string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(infra), infra)).To(Succeed())
		g.Expect(infra.GetLabels()).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, cluster))
		ctl := metav1.GetControllerOf(infra)
		g.Expect(ctl).NotTo(BeNil())
		g.Expect(ctl.UID).To(Equal(owner.GetUID()))
	}).Should(Succeed())
}

var _ = Describe("an infrastructure object created after the object that references it", func() {
	It("is linked at once, without any event on the Cluster", func() {
		ns := newNamespace()
		cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: ref(infrav1.TerraformClusterKind, "c")}}
		Expect(k8s.Create(ctx, cluster)).To(Succeed())
		boot := clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap")}
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m"},
			Spec: clusterv1.MachineSpec{ClusterName: "c", Bootstrap: boot, InfrastructureRef: ref(infrav1.TerraformMachineKind, "m")}}
		Expect(k8s.Create(ctx, m)).To(Succeed())
		mp := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
			Spec: clusterv1.MachinePoolSpec{ClusterName: "c", Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
				ClusterName: "c", Bootstrap: boot, InfrastructureRef: ref(infrav1.TerraformMachinePoolKind, "p")}}}}
		Expect(k8s.Create(ctx, mp)).To(Succeed())
		// The Machine and the MachinePool are owned by the Cluster then: nothing is pending.
		settled(m, capi.MachineFinalizer, 1)
		settled(mp, capi.MachinePoolFinalizer, 1)
		clusterVersion := settled(cluster, capi.ClusterFinalizer, 0)

		By("the infrastructure objects appear afterwards, with no labels and no owners")
		tm := &infrav1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m"},
			Spec: infrav1.TerraformMachineSpec{TerraformSpec: spec()}}
		tp := &infrav1.TerraformMachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
			Spec: infrav1.TerraformMachinePoolSpec{TerraformSpec: spec()}}
		Expect(k8s.Create(ctx, tm)).To(Succeed())
		Expect(k8s.Create(ctx, tp)).To(Succeed())
		linkedTo(tm, m, "c")
		linkedTo(tp, mp, "c")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
		Expect(cluster.ResourceVersion).To(Equal(clusterVersion), "nothing touched the Cluster")

		By("the TerraformCluster too")
		tc := &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"},
			Spec: infrav1.TerraformClusterSpec{TerraformSpec: spec()}}
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		linkedTo(tc, cluster, "c")
	})
})
