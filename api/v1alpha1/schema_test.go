package v1alpha1_test

import (
	"encoding/json"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

func imageSpec() infrav1.TerraformSpec {
	return infrav1.TerraformSpec{Module: infrav1.ModuleSource{Image: "registry.example/modules/net:1.0"}}
}

func newCluster(name string, mutate func(*infrav1.TerraformCluster)) *infrav1.TerraformCluster {
	c := objects.Cluster("default", name).Module(imageSpec().Module.Image).Obj()
	if mutate != nil {
		mutate(c)
	}
	return c
}

var nameSeq int

func uniqueName(prefix string) string {
	nameSeq++
	return fmt.Sprintf("%s-%d", prefix, nameSeq)
}

// expectInvalid asserts that the API server refused the create with a field error at field
// whose message contains msg.
func expectInvalid(err error, field, msg string) {
	GinkgoHelper()
	Expect(err).To(HaveOccurred(), "the API server accepted a spec it must refuse")
	Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want 422 Invalid, got %v", err)
	status, ok := err.(apierrors.APIStatus)
	Expect(ok).To(BeTrue())
	var found []string
	for _, c := range status.Status().Details.Causes {
		found = append(found, c.Field+": "+c.Message)
		if c.Field == field && strings.Contains(c.Message, msg) {
			return
		}
	}
	Fail(fmt.Sprintf("no cause at %q containing %q; causes: %v", field, msg, found))
}

var _ = Describe("TerraformCluster schema", func() {
	DescribeTable("refuses bad specs with a field error",
		func(mutate func(*infrav1.TerraformCluster), field, msg string) {
			err := k8s.Create(ctx, newCluster(uniqueName("bad"), mutate))
			expectInvalid(err, field, msg)
		},
		Entry("both module sources", func(c *infrav1.TerraformCluster) {
			c.Spec.Module.ConfigMap = &infrav1.ConfigMapModule{Name: "mod"}
		}, "spec.module", "set exactly one of module.image and module.configMap"),
		Entry("no module source", func(c *infrav1.TerraformCluster) {
			c.Spec.Module = infrav1.ModuleSource{}
		}, "spec.module", "set exactly one of module.image and module.configMap"),
		Entry("endpoint host without port", func(c *infrav1.TerraformCluster) {
			c.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "10.0.0.1"}
		}, "spec.controlPlaneEndpoint", "set controlPlaneEndpoint.host and controlPlaneEndpoint.port together"),
		Entry("endpoint port out of range", func(c *infrav1.TerraformCluster) {
			c.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 70000}
		}, "spec.controlPlaneEndpoint.port", "less than or equal to 65535"),
		Entry("deadline above a day", func(c *infrav1.TerraformCluster) {
			c.Spec.Job.ActiveDeadlineSeconds = ptr.To[int64](86401)
		}, "spec.job.activeDeadlineSeconds", "less than or equal to 86400"),
		Entry("deadline below a minute", func(c *infrav1.TerraformCluster) {
			c.Spec.Job.ActiveDeadlineSeconds = ptr.To[int64](30)
		}, "spec.job.activeDeadlineSeconds", "greater than or equal to 60"),
		Entry("lock timeout not below the deadline", func(c *infrav1.TerraformCluster) {
			c.Spec.Job.ActiveDeadlineSeconds = ptr.To[int64](600)
			c.Spec.Job.LockTimeoutSeconds = ptr.To[int64](600)
		}, "spec.job", "lockTimeoutSeconds must be below activeDeadlineSeconds"),
		Entry("unknown drift mode", func(c *infrav1.TerraformCluster) {
			c.Spec.Drift.Mode = "Sometimes"
		}, "spec.drift.mode", "Unsupported value"),
		Entry("variablesFrom naming both a Secret and a ConfigMap", func(c *infrav1.TerraformCluster) {
			c.Spec.VariablesFrom = []infrav1.VariablesSource{{
				SecretRef:    &infrav1.LocalObjectReference{Name: "s"},
				ConfigMapRef: &infrav1.LocalObjectReference{Name: "c"},
			}}
		}, "spec.variablesFrom[0]", "set exactly one of secretRef and configMapRef"),
		Entry("variables that are not a JSON object", func(c *infrav1.TerraformCluster) {
			c.Spec.Variables = &runtime.RawExtension{Raw: []byte(`["a","b"]`)}
		}, "spec.variables", "must be of type object"),
		Entry("module path with a shell character", func(c *infrav1.TerraformCluster) {
			c.Spec.Module.Path = "mod;rm -rf"
		}, "spec.module.path", "should match"),
	)

	It("accepts good specs and fills schema defaults", func() {
		good := []*infrav1.TerraformCluster{
			newCluster(uniqueName("good"), nil),
			newCluster(uniqueName("good"), func(c *infrav1.TerraformCluster) {
				c.Spec.Module = infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "net-module"}}
				c.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"region":"eu-1","sizes":{"cp":3}}`)}
				c.Spec.VariablesFrom = []infrav1.VariablesSource{{SecretRef: &infrav1.LocalObjectReference{Name: "creds"}}}
				c.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "api.example", Port: 6443}
				c.Spec.Job.ActiveDeadlineSeconds = ptr.To[int64](7200)
				c.Spec.Job.LockTimeoutSeconds = ptr.To[int64](60)
				c.Spec.Drift = infrav1.DriftPolicy{Interval: &metav1.Duration{Duration: 3600e9}, Mode: infrav1.DriftModeRemediate}
			}),
		}
		for _, c := range good {
			Expect(k8s.Create(ctx, c)).To(Succeed())
		}
		// Defaults come from the schema, so a plain kubectl apply without job: gets them too.
		got := &infrav1.TerraformCluster{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(good[0]), got)).To(Succeed())
		// The schema's markers and the constants the code reads must agree.
		Expect(got.Spec.Job.ActiveDeadlineSeconds).To(HaveValue(Equal(infrav1.DefaultActiveDeadlineSeconds)))
		Expect(got.Spec.Job.LockTimeoutSeconds).To(HaveValue(Equal(infrav1.DefaultLockTimeoutSeconds)))
		Expect(got.Spec.Job.SuccessfulJobsHistory).To(HaveValue(Equal(infrav1.DefaultJobsHistory)))
		Expect(got.Spec.Job.FailedJobsHistory).To(HaveValue(Equal(infrav1.DefaultJobsHistory)))
		Expect(got.Spec.Drift.Mode).To(Equal(infrav1.DriftModeReport))
	})

	It("keeps controlPlaneEndpoint once set", func() {
		c := newCluster(uniqueName("ep"), func(c *infrav1.TerraformCluster) {
			c.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "api.example", Port: 6443}
		})
		Expect(k8s.Create(ctx, c)).To(Succeed())
		c.Spec.ControlPlaneEndpoint.Port = 443
		expectInvalid(k8s.Update(ctx, c), "spec", "controlPlaneEndpoint cannot change once set")

		// An unset endpoint may be filled later (the controller does it from outputs).
		open := newCluster(uniqueName("ep"), nil)
		Expect(k8s.Create(ctx, open)).To(Succeed())
		open.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "api.example", Port: 6443}
		Expect(k8s.Update(ctx, open)).To(Succeed())
	})

	It("serves status through the status subresource only", func() {
		c := newCluster(uniqueName("st"), nil)
		Expect(k8s.Create(ctx, c)).To(Succeed())

		c.Status.ActiveJob = &infrav1.ActiveJob{Name: "job-a", Operation: infrav1.OperationApply}
		Expect(k8s.Update(ctx, c)).To(Succeed())
		got := &infrav1.TerraformCluster{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
		Expect(got.Status.ActiveJob).To(BeNil(), "an update of the main resource must not write status")

		got.Status.ActiveJob = &infrav1.ActiveJob{Name: "job-a", Operation: infrav1.OperationApply}
		got.Status.Initialization = &infrav1.Initialization{Provisioned: ptr.To(true)}
		Expect(k8s.Status().Update(ctx, got)).To(Succeed())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
		Expect(got.Status.ActiveJob).NotTo(BeNil())
		Expect(got.Status.ActiveJob.Name).To(Equal("job-a"))
	})

	It("prints the columns a person wants in kubectl get", func() {
		c := newCluster(uniqueName("cols"), func(c *infrav1.TerraformCluster) {
			c.Labels = map[string]string{infrav1.ClusterNameLabel: "prod"}
		})
		Expect(k8s.Create(ctx, c)).To(Succeed())
		c.Status.ActiveJob = &infrav1.ActiveJob{Name: "apply-abc", Operation: infrav1.OperationApply}
		c.Status.Initialization = &infrav1.Initialization{Provisioned: ptr.To(true)}
		Expect(k8s.Status().Update(ctx, c)).To(Succeed())

		table := getTable("terraformclusters", c.Name)
		cols := map[string]any{}
		for i, col := range table.ColumnDefinitions {
			cols[col.Name] = table.Rows[0].Cells[i]
		}
		Expect(cols).To(HaveKeyWithValue("Cluster", "prod"))
		Expect(cols).To(HaveKeyWithValue("Provisioned", true))
		Expect(cols).To(HaveKeyWithValue("Job", "apply-abc"))
		Expect(cols).To(HaveKeyWithValue("Operation", "Apply"))
		Expect(cols).To(HaveKey("Ready"))
		Expect(cols).To(HaveKey("Age"))
	})
})

var _ = Describe("TerraformMachine and TerraformMachinePool schema", func() {
	It("keeps providerID once set, and lets it be set once", func() {
		m := objects.Machine("default", uniqueName("m")).Module(imageSpec().Module.Image).Obj()
		Expect(k8s.Create(ctx, m)).To(Succeed())
		m.Spec.ProviderID = "tf://vm-1"
		Expect(k8s.Update(ctx, m)).To(Succeed())
		m.Spec.ProviderID = "tf://vm-2"
		expectInvalid(k8s.Update(ctx, m), "spec", "providerID cannot change once set")
	})

	It("bounds spec.health.unhealthyThreshold to 1..100, unset meaning the default", func() {
		withThreshold := func(n int32) *infrav1.TerraformMachine {
			return objects.Machine("default", uniqueName("m")).Module(imageSpec().Module.Image).With(func(m *infrav1.TerraformMachine) {
				m.Spec.Health = &infrav1.MachineHealthSpec{UnhealthyThreshold: n}
			}).Obj()
		}
		expectInvalid(k8s.Create(ctx, withThreshold(101)), "spec.health.unhealthyThreshold", "less than or equal to 100")
		neg := withThreshold(-1)
		expectInvalid(k8s.Create(ctx, neg), "spec.health.unhealthyThreshold", "greater than or equal to 1")
		ok := withThreshold(100)
		Expect(k8s.Create(ctx, ok)).To(Succeed())
		Expect(ok.HealthThreshold()).To(BeEquivalentTo(100))
		unset := withThreshold(0) // omitted on the wire
		Expect(k8s.Create(ctx, unset)).To(Succeed())
		Expect(unset.HealthThreshold()).To(BeEquivalentTo(infrav1.DefaultUnhealthyThreshold))
	})

	It("refuses a machine without a module source", func() {
		m := objects.Machine("default", uniqueName("m")).Spec(func(s *infrav1.TerraformSpec) { s.Module = infrav1.ModuleSource{} }).Obj()
		expectInvalid(k8s.Create(ctx, m), "spec.module", "set exactly one of module.image and module.configMap")
	})

	It("accepts a pool with provider IDs and reports replicas through status", func() {
		p := objects.MachinePool("default", uniqueName("p")).Module(imageSpec().Module.Image).With(func(p *infrav1.TerraformMachinePool) {
			p.Spec.ProviderIDList = []string{"tf://a", "tf://b"}
		}).Obj()
		Expect(k8s.Create(ctx, p)).To(Succeed())
		p.Status.Replicas = ptr.To[int32](2)
		p.Status.Ready = true
		Expect(k8s.Status().Update(ctx, p)).To(Succeed())
		table := getTable("terraformmachinepools", p.Name)
		names := []string{}
		for _, c := range table.ColumnDefinitions {
			names = append(names, c.Name)
		}
		Expect(names).To(ContainElements("Cluster", "Provisioned", "Ready", "Replicas", "Job", "Operation", "Age"))
	})

	It("refuses an empty provider ID in a pool", func() {
		p := objects.MachinePool("default", uniqueName("p")).Module(imageSpec().Module.Image).With(func(p *infrav1.TerraformMachinePool) {
			p.Spec.ProviderIDList = []string{""}
		}).Obj()
		expectInvalid(k8s.Create(ctx, p), "spec.providerIDList[0]", "at least 1 chars long")
	})
})

var _ = Describe("Templates", func() {
	It("validate the embedded spec like the object itself", func() {
		t := &infrav1.TerraformMachineTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: uniqueName("t"), Namespace: "default"},
			Spec: infrav1.TerraformMachineTemplateSpec{Template: infrav1.TerraformMachineTemplateResource{
				Spec: infrav1.TerraformMachineSpec{TerraformSpec: infrav1.TerraformSpec{Module: infrav1.ModuleSource{
					Image: "img", ConfigMap: &infrav1.ConfigMapModule{Name: "cm"},
				}}},
			}},
		}
		expectInvalid(k8s.Create(ctx, t), "spec.template.spec.module", "set exactly one of module.image and module.configMap")
		t.Spec.Template.Spec.Module.ConfigMap = nil
		Expect(k8s.Create(ctx, t)).To(Succeed())

		ct := &infrav1.TerraformClusterTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: uniqueName("t"), Namespace: "default"},
			Spec: infrav1.TerraformClusterTemplateSpec{Template: infrav1.TerraformClusterTemplateResource{
				Spec: infrav1.TerraformClusterSpec{TerraformSpec: imageSpec()},
			}},
		}
		Expect(k8s.Create(ctx, ct)).To(Succeed())
		pt := &infrav1.TerraformMachinePoolTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: uniqueName("t"), Namespace: "default"},
			Spec: infrav1.TerraformMachinePoolTemplateSpec{Template: infrav1.TerraformMachinePoolTemplateResource{
				Spec: infrav1.TerraformMachinePoolSpec{TerraformSpec: imageSpec()},
			}},
		}
		Expect(k8s.Create(ctx, pt)).To(Succeed())
	})
})

// getTable asks the API server for the server-side printed table of one object, as kubectl
// get does.
func getTable(resource, name string) *metav1.Table {
	GinkgoHelper()
	cfg := rest.CopyConfig(env.Config)
	cfg.GroupVersion = &infrav1.GroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = clientNegotiator()
	rc, err := rest.RESTClientFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	raw, err := rc.Get().Namespace("default").Resource(resource).Name(name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	table := &metav1.Table{}
	Expect(json.Unmarshal(raw, table)).To(Succeed())
	Expect(table.Rows).To(HaveLen(1))
	return table
}
