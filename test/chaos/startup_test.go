package chaos_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	envtestpkg "sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

var _ = Describe("Start-up before the caches sync", func() {
	It("clears, deletes and releases nothing while its Job cache cannot sync, then gives up", func() {
		ns := kit.Namespace()
		// An object a working manager would change at once: paused with block-move (it would
		// clear block-move) and deleting with delete-for-move (it would drop the finalizer).
		Expect(k8s.Create(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.TerraformClusterKind, Name: "c1"}}})).To(Succeed())
		tc := objects.Cluster(ns, "c1").Finalizer().Paused().BlockMove().Annotation(infrav1.DeleteForMoveAnnotation, "").
			Module("m").Spec(func(s *infrav1.TerraformSpec) { s.Variables = &runtime.RawExtension{Raw: []byte(`{}`)} }).Obj()
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		Expect(k8s.Delete(ctx, tc)).To(Succeed())

		By("a manager whose user may not list Jobs (a broken role, as in the Kong report)")
		user, err := env.ControlPlane.AddUser(envtestpkg.User{Name: "starved-manager"}, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(k8s.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "starved-manager"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"", "coordination.k8s.io", "rbac.authorization.k8s.io", "events.k8s.io",
					"cluster.x-k8s.io", "infrastructure.cluster.x-k8s.io"}, Resources: []string{"*"}, Verbs: []string{"*"}},
				{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "create", "delete"}},
			}})).To(Succeed())
		Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "starved-manager"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "starved-manager"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "starved-manager"}}})).To(Succeed())

		m := startManager(managerOpts{cfg: user.Config(), syncTimeout: 5 * time.Second})
		Consistently(func(g Gomega) {
			fresh := &infrav1.TerraformCluster{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tc), fresh)).To(Succeed())
			g.Expect(fresh.Annotations).To(HaveKey(infrav1.BlockMoveAnnotation))
			g.Expect(fresh.Finalizers).To(ContainElement(infrav1.Finalizer))
		}, "6s").Should(Succeed())
		Eventually(m.exited, "30s").Should(BeClosed(), "the manager must give up by itself, not run half-blind")
		Expect(m.err).To(MatchError(ContainSubstring("timed out waiting for cache to be synced")))
		get(tc)
		Expect(tc.Annotations).To(HaveKey(infrav1.BlockMoveAnnotation))
		Expect(tc.Finalizers).To(ContainElement(infrav1.Finalizer))
	})
})
