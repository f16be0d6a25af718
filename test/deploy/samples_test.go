package deploy_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/inputs"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// terraformBinary is bin/tofu (make runtime-bin), else tofu or terraform on PATH.
func terraformBinary() (string, error) {
	if p, err := tool("tofu"); err == nil {
		return p, nil
	}
	for _, name := range []string{"tofu", "terraform"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no terraform or tofu binary (bin/tofu, or tofu/terraform on PATH): run 'make runtime-bin'")
}

// runModule applies a sample module offline with local state, as the runner would with the
// kubernetes backend, and returns the state as CAPTF reads it. vars is the Job's
// variables.tfvars.json, as inputs.Assemble builds it.
func runModule(tf, dir, main string, vars []byte) *state.State {
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(dir, "main.tf"), []byte(main), 0o644)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(dir, "vars.tfvars.json"), vars, 0o644)).To(Succeed())
	env := cleanEnv("TF_IN_AUTOMATION=1", "TF_CLI_CONFIG_FILE="+filepath.Join(dir, "none.tfrc"), "CHECKPOINT_DISABLE=1")
	_, err := run(dir, env, tf, "init", "-input=false", "-no-color")
	Expect(err).NotTo(HaveOccurred())
	_, err = run(dir, env, tf, "apply", "-auto-approve", "-input=false", "-no-color", "-var-file=vars.tfvars.json")
	Expect(err).NotTo(HaveOccurred())
	raw, err := os.ReadFile(filepath.Join(dir, "terraform.tfstate"))
	Expect(err).NotTo(HaveOccurred())
	st, err := state.Parse(raw)
	Expect(err).NotTo(HaveOccurred())
	return st
}

var _ = Describe("config/samples", func() {
	var all objects

	BeforeEach(func() {
		var err error
		all, err = kustomizeBuild("config/samples")
		Expect(err).NotTo(HaveOccurred())
	})

	It("holds one sample per CAPTF kind, and the Cluster API objects reference them", func() {
		for _, kind := range []string{"TerraformCluster", "TerraformMachine", "TerraformMachinePool"} {
			Expect(all.ofKind(kind)).To(HaveLen(1), kind)
		}
		for _, kind := range []string{"TerraformClusterTemplate", "TerraformMachineTemplate", "TerraformMachinePoolTemplate"} {
			Expect(all.ofKind(kind)).NotTo(BeEmpty(), kind)
		}
		infraRefs := map[string][]string{
			"Cluster":           {"spec", "infrastructureRef"},
			"Machine":           {"spec", "infrastructureRef"},
			"MachinePool":       {"spec", "template", "spec", "infrastructureRef"},
			"MachineDeployment": {"spec", "template", "spec", "infrastructureRef"},
		}
		for kind, path := range infraRefs {
			objs := all.ofKind(kind)
			if kind == "Cluster" {
				objs = objects{all.named("Cluster", "sample")}
			}
			Expect(objs).To(HaveLen(1), kind)
			ref, _, _ := unstructured.NestedStringMap(objs[0].Object, path...)
			Expect(ref["apiGroup"]).To(Equal(infrav1.GroupVersion.Group))
			Expect(all.find(ref["kind"], "", ref["name"])).NotTo(BeNil(), "%s references %s %s, which is not a sample", kind, ref["kind"], ref["name"])
		}
		// The ClusterClass cluster: its class and every template the class names are samples.
		topology := all.named("Cluster", "sample-topology")
		Expect(topology).NotTo(BeNil())
		class, _, _ := unstructured.NestedString(topology.Object, "spec", "topology", "classRef", "name")
		cc := all.named("ClusterClass", class)
		Expect(cc).NotTo(BeNil(), "sample-topology's class %q is not a sample", class)
		refs := templateRefs(cc)
		Expect(refs).To(HaveLen(7))
		for _, ref := range refs {
			Expect(all.named(ref.kind, ref.name)).NotTo(BeNil(), "the class names %s %s", ref.kind, ref.name)
		}
		// Every module ConfigMap a sample names exists.
		for _, u := range all {
			if u.GetAPIVersion() != infrav1.GroupVersion.String() {
				continue
			}
			path := []string{"spec", "module", "configMap", "name"}
			if _, isTemplate, _ := unstructured.NestedMap(u.Object, "spec", "template"); isTemplate {
				path = append([]string{"spec", "template"}, path...)
			}
			name, ok, _ := unstructured.NestedString(u.Object, path...)
			Expect(ok).To(BeTrue(), "%s %s uses no ConfigMap module", u.GetKind(), u.GetName())
			Expect(all.find("ConfigMap", "", name)).NotTo(BeNil(), "%s %s names ConfigMap %s", u.GetKind(), u.GetName(), name)
		}
	})

	It("runs its modules offline and they produce valid contract outputs", func() {
		tf, err := terraformBinary()
		Expect(err).NotTo(HaveOccurred())
		dir := GinkgoT().TempDir()
		cluster, err := as[clusterv1.Cluster](all.named("Cluster", "sample"))
		Expect(err).NotTo(HaveOccurred())
		bootstrap, err := as[corev1.Secret](all.ofKind("Secret")[0])
		Expect(err).NotTo(HaveOccurred())
		machine, err := as[clusterv1.Machine](all.ofKind("Machine")[0])
		Expect(err).NotTo(HaveOccurred())
		mp, err := as[clusterv1.MachinePool](all.ofKind("MachinePool")[0])
		Expect(err).NotTo(HaveOccurred())

		// apply runs the sample of kind with the variables its Job would get: inputs.Assemble,
		// the one place that builds them (the object's variables and the captf object), given
		// what the engine would give it (contract, filled here from the samples).
		apply := func(kind string, contract inputs.ContractInputs) *state.State {
			GinkgoHelper()
			u := all.ofKind(kind)[0]
			var spec infrav1.TerraformSpec
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object["spec"].(map[string]any), &spec)).To(Succeed())
			Expect(spec.Module.ConfigMap).NotTo(BeNil(), "%s %s uses no ConfigMap module", kind, u.GetName())
			// Offline there is no API server to read variablesFrom sources from.
			Expect(spec.VariablesFrom).To(BeEmpty(), "%s %s reads variablesFrom, which this offline run cannot", kind, u.GetName())
			cm, err := as[corev1.ConfigMap](all.find("ConfigMap", "", spec.Module.ConfigMap.Name))
			Expect(err).NotTo(HaveOccurred())
			contract.Kind, contract.Name, contract.Namespace, contract.ClusterName = kind, u.GetName(), "demo", cluster.Name
			contract.ClusterNetwork = &cluster.Spec.ClusterNetwork
			in, err := inputs.Assemble(ctx, nil, "demo", &spec, contract)
			Expect(err).NotTo(HaveOccurred())
			return runModule(tf, filepath.Join(dir, kind), cm.Data["main.tf"], in.Variables)
		}

		cs := apply("TerraformCluster", inputs.ContractInputs{})
		co, err := state.Cluster(cs)
		Expect(err).NotTo(HaveOccurred())
		Expect(co.ControlPlaneEndpoint.Host).NotTo(BeEmpty())
		Expect(co.FailureDomains).NotTo(BeEmpty())

		member := inputs.ContractInputs{ControlPlaneEndpoint: &co.ControlPlaneEndpoint, BootstrapData: bootstrap.StringData["value"],
			ClusterOutputs: state.ClusterOutputsForMachines(cs)}
		m := member
		m.FailureDomain, m.Version = machine.Spec.FailureDomain, machine.Spec.Version
		mo, err := state.Machine(apply("TerraformMachine", m))
		Expect(err).NotTo(HaveOccurred())
		Expect(mo.ProviderID).To(HavePrefix("captf://"))
		Expect(mo.Addresses).NotTo(BeEmpty())

		p := member
		p.Version, p.Replicas = mp.Spec.Template.Spec.Version, mp.Spec.Replicas
		po, err := state.MachinePool(apply("TerraformMachinePool", p))
		Expect(err).NotTo(HaveOccurred())
		Expect(po.Replicas).To(Equal(*mp.Spec.Replicas), "the pool module's replicas differ from the MachinePool's")
		Expect(po.ProviderIDList).To(HaveLen(int(*mp.Spec.Replicas)))
		// The sample module reports each instance (the instances output), all ready.
		Expect(po.Instances).To(HaveLen(int(*mp.Spec.Replicas)))
		Expect(po.ReadyInstances).To(HaveValue(Equal(*mp.Spec.Replicas)))
	})
})
