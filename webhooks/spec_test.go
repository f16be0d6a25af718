package webhooks_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

var _ = Describe("Defaulting on create", func() {
	It("adds the provider finalizer to every kind, and a lock timeout that fits a short deadline", func() {
		ns := newNamespace()
		for _, kind := range guardedKinds {
			o := newObject(kind, ns, "d")
			Expect(o.GetFinalizers()).To(BeEmpty())
			Expect(admin.Create(ctx, o)).To(Succeed())
			Expect(o.GetFinalizers()).To(ConsistOf(infrav1.Finalizer), "%s as created", kind)
		}
		short := newObject(infrav1.TerraformClusterKind, ns, "short").(*infrav1.TerraformCluster)
		short.Spec.Job.ActiveDeadlineSeconds = ptr.To[int64](120)
		Expect(admin.Create(ctx, short)).To(Succeed(), "without the dependent default the schema's 300 s lock timeout would be refused")
		Expect(short.Spec.Job.LockTimeoutSeconds).To(HaveValue(BeEquivalentTo(60)))
		kept := newObject(infrav1.TerraformClusterKind, ns, "kept").(*infrav1.TerraformCluster)
		kept.Spec.Job.LockTimeoutSeconds = ptr.To[int64](900)
		Expect(admin.Create(ctx, kept)).To(Succeed())
		Expect(kept.Spec.Job.LockTimeoutSeconds).To(HaveValue(BeEquivalentTo(900)))
		Expect(kept.Spec.Job.ActiveDeadlineSeconds).To(HaveValue(BeEquivalentTo(3600)))
	})
})

var _ = Describe("Spec validation", func() {
	It("refuses bad variable names and reserved environment names with a message per field, for objects and templates", func() {
		ns := newNamespace()
		bad := newObject(infrav1.TerraformMachineKind, ns, "bad").(*infrav1.TerraformMachine)
		bad.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"captf":{},"count":2,"9lives":1,"ok_name":"x"}`)}
		bad.Spec.Job.Env = []corev1.EnvVar{{Name: "AWS_REGION", Value: "eu-west-1"}, {Name: "TF_CLI_ARGS", Value: "-lock=false"}}
		err := admin.Create(ctx, bad)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		fmt.Printf("\nSpec validation: %v\n\n", err)
		for _, want := range []string{
			`admission webhook "validate.terraformmachine.captf.io" denied the request`,
			`spec.variables[captf]: Invalid value: "captf"`, "CAPTF reserves for the contract inputs",
			`spec.variables[count]: Invalid value: "count"`, "a name Terraform reserves",
			`spec.variables[9lives]: Invalid value: "9lives"`, "not a valid Terraform identifier",
			"spec.job.env[1].name: Forbidden: TF_CLI_ARGS is reserved",
		} {
			Expect(err.Error()).To(ContainSubstring(want))
		}
		Expect(err.Error()).NotTo(ContainSubstring("ok_name"))
		Expect(err.Error()).NotTo(ContainSubstring("AWS_REGION"))

		tmpl := &infrav1.TerraformMachinePoolTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "t"}}
		tmpl.Spec.Template.Spec.Module.Image = "example.com/module:1"
		tmpl.Spec.Template.Spec.Job.Env = []corev1.EnvVar{{Name: "KUBECONFIG", Value: "/tmp/k"}}
		err = admin.Create(ctx, tmpl)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("spec.template.spec.job.env[0].name: Forbidden: KUBECONFIG is reserved"))
		tmpl.Spec.Template.Spec.Job.Env = nil
		Expect(admin.Create(ctx, tmpl)).To(Succeed())
		tmpl.Spec.Template.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"for_each":1}`)}
		err = admin.Update(ctx, tmpl)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "template updates are validated too: %v", err)

		By("a spec update of a live object is validated")
		good := create(infrav1.TerraformClusterKind, ns, "good").(*infrav1.TerraformCluster)
		good.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"depends_on":[]}`)}
		err = admin.Update(ctx, good)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring(`validate-update.terraformcluster.captf.io`))

		By("a lock timeout not below the deadline is refused (the schema's rule answers first)")
		lt := newObject(infrav1.TerraformClusterKind, ns, "lock").(*infrav1.TerraformCluster)
		lt.Spec.Job.ActiveDeadlineSeconds = ptr.To[int64](120)
		lt.Spec.Job.LockTimeoutSeconds = ptr.To[int64](200)
		err = admin.Create(ctx, lt)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("lockTimeoutSeconds must be below activeDeadlineSeconds"))
	})

	It("freezes the module source kind once the infrastructure is provisioned, including after a move", func() {
		ns := newNamespace()
		c := create(infrav1.TerraformClusterKind, ns, "c").(*infrav1.TerraformCluster)
		By("before provisioning the kind may change")
		c.Spec.Module = infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "module"}}
		Expect(admin.Update(ctx, c)).To(Succeed())
		c.Spec.Module = infrav1.ModuleSource{Image: "example.com/module:1"}
		Expect(admin.Update(ctx, c)).To(Succeed())

		By("provisioned (status): a new image passes, a ConfigMap does not")
		c.Status.Initialization = &infrav1.Initialization{Provisioned: ptr.To(true)}
		Expect(admin.Status().Update(ctx, c)).To(Succeed())
		c.Spec.Module.Image = "example.com/module:2"
		Expect(admin.Update(ctx, c)).To(Succeed())
		c.Spec.Module = infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "module"}}
		err := admin.Update(ctx, c)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("spec.module: Forbidden: the module source kind cannot change from image to configMap once the infrastructure is provisioned"))

		By("a moved object has no status, but its applied-hash annotation says it is provisioned")
		m := newObject(infrav1.TerraformMachineKind, ns, "moved").(*infrav1.TerraformMachine)
		m.Annotations = map[string]string{infrav1.AppliedHashAnnotation: "v1-abc"}
		// clusterctl move creates it with the manager's records: only the manager and the
		// override groups may (the manager's identity plays the mover here).
		Expect(mgrClient.Create(ctx, m)).To(Succeed())
		m.Spec.Module = infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "module"}}
		Expect(apierrors.IsInvalid(admin.Update(ctx, m))).To(BeTrue())
	})

	It("never refuses a deleting object's update for its spec, so its finalizer stays removable", func() {
		ns := newNamespace()
		o := create(infrav1.TerraformMachineKind, ns, "leaving").(*infrav1.TerraformMachine)
		o.Status.Initialization = &infrav1.Initialization{Provisioned: ptr.To(true)}
		Expect(admin.Status().Update(ctx, o)).To(Succeed())
		Expect(admin.Delete(ctx, o)).To(Succeed())
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		Expect(o.DeletionTimestamp).NotTo(BeNil())
		o.Spec.Job.Env = []corev1.EnvVar{{Name: "TF_LOG", Value: "TRACE"}}
		o.Spec.Module = infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "module"}}
		const path = "/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachine"
		before, err := webhookCalls(path)
		Expect(err).NotTo(HaveOccurred())
		Expect(admin.Update(ctx, o)).To(Succeed(), "a deleting object's spec is not judged")
		Expect(webhookCalls(path)).To(Equal(before), "the matchCondition keeps a deleting object's update away from validation")
		By("a plain user may not remove the finalizer of a provisioned object: it would leave its infrastructure without a destroy")
		o.Finalizers = nil
		err = admin.Update(ctx, o)
		Expect(deniedByGuard(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(And(ContainSubstring("may have made infrastructure that no destroy removed"), ContainSubstring("spec.deletionPolicy: Retain")))
		By("the manager removes it once nothing runs (here: after the destroy it plays)")
		Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		o.Finalizers = nil
		Expect(mgrClient.Update(ctx, o)).To(Succeed(), "nothing runs: the finalizer goes")
		Eventually(func() bool {
			return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(o), o))
		}).Should(BeTrue())
	})
})

var _ = Describe("Targeted operations at admission", func() {
	It("refuses a request the parser does not read, on create as on update, and in a template's metadata", func() {
		ns := newNamespace()
		for _, kind := range guardedKinds {
			o := newObject(kind, ns, "tg")
			o.SetAnnotations(map[string]string{infrav1.TargetOperationAnnotation: "replace"})
			err := admin.Create(ctx, o)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: a create is an update from nothing: %v", kind, err)
			Expect(err.Error()).To(ContainSubstring(`metadata.annotations[captf.io/target-operation]: Invalid value: "replace"`))
			Expect(err.Error()).To(ContainSubstring(`want "replace <address>"`))
		}

		o := create(infrav1.TerraformClusterKind, ns, "ok")
		set := func(v string) error {
			return admin.Patch(ctx, o, client.RawPatch(types.MergePatchType,
				[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, infrav1.TargetOperationAnnotation, v))))
		}
		Expect(set("import aws_instance.web i-0abc")).To(Succeed())
		err := set(`import aws_instance.web["a b"] i-1`)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("is not a managed resource instance address"))
		Expect(set("forget aws_instance.web[0]")).To(MatchError(ContainSubstring("forget takes the resource's address without instance keys")))
		Expect(set("forget module.net.aws_instance.web")).To(Succeed())
		Expect(set("remove aws_instance.web")).To(MatchError(ContainSubstring(`unknown operation "remove"`)))
		Expect(set("replace module.net.aws_subnet.a[0]")).To(Succeed())

		tmpl := &infrav1.TerraformMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tg"}}
		tmpl.Spec.Template.Spec.Module.Image = "example.com/module:1"
		tmpl.Spec.Template.ObjectMeta.Annotations = map[string]string{infrav1.TargetOperationAnnotation: "replace aws_instance.web"}
		err = admin.Create(ctx, tmpl)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("a template must not stamp it onto every object Cluster API creates"))
	})
})

var _ = Describe("Externally managed clusters (cluster.x-k8s.io/managed-by)", func() {
	It("adds no finalizer to a marked cluster, and refuses the mark on a cluster CAPTF manages, on create as on update", func() {
		ns := newNamespace()
		markedBy := func(v string) map[string]string { return map[string]string{infrav1.ManagedByAnnotation: v} }

		By("a cluster marked at creation gets no finalizer; a machine's mark means nothing and changes nothing")
		marked := newObject(infrav1.TerraformClusterKind, ns, "ext")
		marked.SetAnnotations(markedBy("other-tool"))
		Expect(admin.Create(ctx, marked)).To(Succeed())
		Expect(marked.GetFinalizers()).To(BeEmpty())
		m := newObject(infrav1.TerraformMachineKind, ns, "m")
		m.SetAnnotations(markedBy(""))
		Expect(admin.Create(ctx, m)).To(Succeed())
		Expect(m.GetFinalizers()).To(ConsistOf(infrav1.Finalizer))

		By("a create that carries both the mark and the finalizer is refused: a create is an update from nothing")
		both := newObject(infrav1.TerraformClusterKind, ns, "both")
		both.SetAnnotations(markedBy(""))
		both.SetFinalizers([]string{infrav1.Finalizer})
		err := admin.Create(ctx, both)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("metadata.annotations[cluster.x-k8s.io/managed-by]: Forbidden: CAPTF manages this TerraformCluster"))

		By("marking a cluster CAPTF manages, by a metadata-only patch, is refused; the mark's removal hands a marked one to CAPTF")
		managed := create(infrav1.TerraformClusterKind, ns, "mine")
		Expect(managed.GetFinalizers()).To(ConsistOf(infrav1.Finalizer))
		err = admin.Patch(ctx, managed, client.RawPatch(types.MergePatchType,
			[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"x"}}}`, infrav1.ManagedByAnnotation))))
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("mark an infrastructure cluster as managed by someone else when you create it"))
		Expect(admin.Patch(ctx, marked, client.RawPatch(types.MergePatchType,
			[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, infrav1.ManagedByAnnotation))))).To(Succeed())
		Expect(admin.Patch(ctx, marked, client.RawPatch(types.MergePatchType,
			[]byte(fmt.Sprintf(`{"metadata":{"finalizers":[%q]}}`, infrav1.Finalizer))))).To(Succeed(), "CAPTF's controller adds its finalizer once the mark is gone")
	})
})
