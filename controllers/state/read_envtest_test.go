package state_test

import (
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

var _ = Describe("reading the backend's state Secret through the API server", func() {
	var ns, suffix string

	BeforeEach(func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "state-"}}
		Expect(k8s.Create(ctx, n)).To(Succeed())
		ns = n.Name
		suffix = naming.StateSuffix(ns, infrav1.TerraformMachineKind, "m1")
	})

	writeRaw := func(data map[string][]byte) {
		GinkgoHelper()
		Expect(k8s.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: naming.StateSecretName(suffix), Namespace: ns},
			Data:       data,
		})).To(Succeed())
	}

	gzipped := func(b []byte) []byte {
		GinkgoHelper()
		z, err := state.Compress(b)
		Expect(err).NotTo(HaveOccurred())
		return z
	}

	It("reads outputs from a gzip'd state written like the backend", func() {
		st := statetest.Machine("aws:///az1/i-1")
		st.Outputs["addresses"] = statetest.Output{Value: []map[string]string{{"type": "InternalIP", "address": "10.0.0.9"}}}
		st.Outputs["token"] = statetest.Output{Value: "tok", Sensitive: true}
		Expect(statetest.Write(ctx, k8s, ns, suffix, st)).To(Succeed())

		s, err := state.Read(ctx, k8s, ns, suffix)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.OutputNames()).To(Equal([]string{"addresses", "provider_id", "token"}))
		m, err := state.Machine(s)
		Expect(err).NotTo(HaveOccurred())
		Expect(m.ProviderID).To(Equal("aws:///az1/i-1"))
		Expect(m.Addresses).To(HaveLen(1))
		Expect(state.StateEmpty(s)).To(BeFalse())

		By("reading the state a destroy leaves, written over the same Secret")
		Expect(statetest.Write(ctx, k8s, ns, suffix, statetest.Destroyed())).To(Succeed())
		s, err = state.Read(ctx, k8s, ns, suffix)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Serial).To(Equal(uint64(2)))
		Expect(state.StateEmpty(s)).To(BeTrue())
	})

	It("reports a missing Secret as no state", func() {
		_, err := state.Read(ctx, k8s, ns, suffix)
		Expect(errors.Is(err, state.ErrNoState)).To(BeTrue(), "got %v", err)
	})

	It("reports a Secret without data as no state, as the backend does", func() {
		writeRaw(nil)
		_, err := state.Read(ctx, k8s, ns, suffix)
		Expect(errors.Is(err, state.ErrNoState)).To(BeTrue(), "got %v", err)
	})

	It("refuses corrupt gzip, never calling it no state", func() {
		z := gzipped([]byte(`{"version": 4}`))
		writeRaw(map[string][]byte{state.StateKey: z[:len(z)/2]})
		_, err := state.Read(ctx, k8s, ns, suffix)
		Expect(err).To(HaveOccurred())
		Expect(errors.Is(err, state.ErrNoState)).To(BeFalse())
		se, ok := state.AsStateError(err)
		Expect(ok).To(BeTrue(), "got %T %v", err, err)
		Expect(se.Reason).To(Equal(state.ReasonStateCorrupt))
		Expect(se.Secret).To(Equal(ns + "/" + naming.StateSecretName(suffix)))
	})

	It("refuses gzip'd data that is not state JSON", func() {
		writeRaw(map[string][]byte{state.StateKey: gzipped([]byte(`{"outputs": {}}`))})
		_, err := state.Read(ctx, k8s, ns, suffix)
		se, ok := state.AsStateError(err)
		Expect(ok).To(BeTrue(), "got %T %v", err, err)
		Expect(se.Reason).To(Equal(state.ReasonStateCorrupt))
		Expect(se.Error()).To(ContainSubstring("no format version"))
	})

	It("refuses a layout it does not know (a chunked state) with a clear error", func() {
		writeRaw(map[string][]byte{"tfstate-chunk-0": gzipped([]byte(`{"ver`)), "tfstate-chunk-1": gzipped([]byte(`sion": 4}`))})
		_, err := state.Read(ctx, k8s, ns, suffix)
		se, ok := state.AsStateError(err)
		Expect(ok).To(BeTrue(), "got %T %v", err, err)
		Expect(se.Reason).To(Equal(state.ReasonStateLayoutUnknown))
		Expect(se.Error()).To(ContainSubstring("tfstate-chunk-0, tfstate-chunk-1"))
	})

	It("returns an API error as an API error, never as no state", func() {
		Expect(statetest.Write(ctx, k8s, ns, suffix, statetest.Machine("p://m"))).To(Succeed())
		user, err := env.AddUser(ctrlenvtest.User{Name: "no-rights"}, nil)
		Expect(err).NotTo(HaveOccurred())
		weak, err := client.New(user.Config(), client.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
		_, err = state.Read(ctx, weak, ns, suffix)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
		Expect(errors.Is(err, state.ErrNoState)).To(BeFalse())
		_, isStateErr := state.AsStateError(err)
		Expect(isStateErr).To(BeFalse())
	})

	It("writes an outputs Secret the API server accepts, owned by the object", func() {
		tc := objects.Cluster(ns, "c1").Cluster("capi-c1").Module("example.com/module:1").Obj()
		Expect(k8s.Create(ctx, tc)).To(Succeed())
		csuffix := naming.StateSuffix(ns, infrav1.TerraformClusterKind, tc.Name)
		st := statetest.Cluster("10.0.0.1", 6443)
		st.Outputs["kubeconfig"] = statetest.Output{Value: "apiVersion: v1", Sensitive: true}
		Expect(statetest.Write(ctx, k8s, ns, csuffix, st)).To(Succeed())
		s, err := state.Read(ctx, k8s, ns, csuffix)
		Expect(err).NotTo(HaveOccurred())

		sec, err := state.OutputsSecret(tc, infrav1.GroupVersion.WithKind(infrav1.TerraformClusterKind), csuffix, s)
		Expect(err).NotTo(HaveOccurred())
		Expect(k8s.Create(ctx, sec)).To(Succeed())
		var got corev1.Secret
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sec), &got)).To(Succeed())
		Expect(got.Data).To(HaveKeyWithValue("kubeconfig", []byte(`"apiVersion: v1"`)))
		Expect(got.Data).To(HaveKeyWithValue("control_plane_endpoint", []byte(`{"host":"10.0.0.1","port":6443}`)))
		Expect(got.OwnerReferences).To(HaveLen(1))
		Expect(got.OwnerReferences[0].UID).To(Equal(tc.UID))
		Expect(got.Labels).To(HaveKeyWithValue(state.MoveLabel, ""))
		Expect(state.ClusterOutputsForMachines(s)).NotTo(HaveKey("kubeconfig"))
	})
})
