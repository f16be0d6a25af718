package e2e_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// The tenant of docs/threat-model.md: a user bound to the built-in ClusterRole edit in one
// namespace, reached through impersonation (asTenant), and the user with only CAPTF's editor
// role (asCAPTFEditor). The first specs prove the roles themselves (docs/permissions.md,
// "Tenants"); each attack row of the threat model adds one It here, acting as the row's actor.
// Specs that need no Job stay on the shared sandbox and take seconds.
var _ = Describe("A tenant with the namespace's edit role", func() {
	// The resources of the tenants' roles, as kubectl auth can-i names them.
	const (
		clusters      = "terraformclusters.infrastructure.cluster.x-k8s.io"
		machines      = "terraformmachines.infrastructure.cluster.x-k8s.io"
		pools         = "terraformmachinepools.infrastructure.cluster.x-k8s.io"
		identities    = "terraformidentities.infrastructure.cluster.x-k8s.io"
		planPolicies  = "terraformplanpolicies.infrastructure.cluster.x-k8s.io"
		status        = "--subresource=status"
		allNamespaces = "--all-namespaces"
	)
	namespaced := []string{clusters, machines, pools,
		"terraformclustertemplates.infrastructure.cluster.x-k8s.io",
		"terraformmachinetemplates.infrastructure.cluster.x-k8s.io",
		"terraformmachinepooltemplates.infrastructure.cluster.x-k8s.io"}

	It("holds CAPTF's namespaced kinds through the aggregated edit role, and the namespace's Secrets, but no status and no cluster-scoped kind", func() {
		t := asTenant(shared, "tenant-roles")

		By("edit carries captf-tenant-edit: every verb of the role, and create on every namespaced kind")
		// The deploy test checks the whole matrix of the rendered role; this proves it arrives.
		for _, verb := range []string{"create", "get", "list", "watch", "update", "patch", "delete"} {
			Expect(t.CanI(verb, clusters)).To(BeTrue(), "%s may %s %s", t.User, verb, clusters)
		}
		for _, res := range namespaced[1:] {
			Expect(t.CanI("create", res)).To(BeTrue(), "%s may create %s", t.User, res)
		}
		Expect(t.CanI("deletecollection", clusters)).To(BeFalse(), "deletecollection is not granted")

		By("no status subresource: status is the manager's")
		for _, res := range []string{clusters, machines, pools} {
			for _, verb := range []string{"update", "patch"} {
				Expect(t.CanI(verb, res, status)).To(BeFalse(), "%s may not %s %s/status", t.User, verb, res)
			}
		}

		By("no cluster-scoped kind: identities and plan policies are the platform's")
		for _, res := range []string{identities, planPolicies} {
			for _, verb := range []string{"create", "update", "delete"} {
				Expect(t.CanI(verb, res)).To(BeFalse(), "%s may not %s %s", t.User, verb, res)
			}
		}

		By("the rest of edit: the namespace's Secrets, and nothing outside the namespace")
		Expect(t.CanI("get", "secrets")).To(BeTrue(), "edit reads Secrets: the aggregation ran and edit is the real one")
		Expect(t.CanI("list", clusters, allNamespaces)).To(BeFalse(), "the binding reaches one namespace")

		By("view carries captf-tenant-view: read, no write, no Secret")
		v := bindUser(shared, t.Namespace, "viewer-"+t.Namespace, "view")
		Expect(v.CanI("get", clusters)).To(BeTrue())
		Expect(v.CanI("watch", machines)).To(BeTrue())
		Expect(v.CanI("create", clusters)).To(BeFalse())
		Expect(v.CanI("get", "secrets")).To(BeFalse())
	})

	It("leaves a user with only CAPTF's editor role CAPTF's kinds, and no Secret to read", func() {
		e := asCAPTFEditor(shared, "tenant-captf-editor")
		for _, res := range namespaced {
			Expect(e.CanI("create", res)).To(BeTrue(), "%s may create %s", e.User, res)
		}
		Expect(e.CanI("patch", machines, status)).To(BeFalse())
		Expect(e.CanI("create", identities)).To(BeFalse())
		for _, verb := range []string{"get", "list", "watch"} {
			Expect(e.CanI(verb, "secrets")).To(BeFalse(), "%s may not %s secrets", e.User, verb)
		}
		Expect(e.CanI("get", "configmaps")).To(BeFalse())

		By("as the API server answers real requests: a template is created, a Secret is refused")
		tmpl := &infrav1.TerraformMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: "editor-template"},
			Spec: infrav1.TerraformMachineTemplateSpec{Template: infrav1.TerraformMachineTemplateResource{Spec: infrav1.TerraformMachineSpec{
				TerraformSpec: infrav1.TerraformSpec{Module: infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "editor-module"}}}}}}}
		Expect(e.Client().Create(ctx, tmpl)).To(Succeed())
		Expect(shared.Client().Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: "db-password"},
			StringData: map[string]string{"password": "not-for-editors"}})).To(Succeed())
		err := e.Client().Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: "db-password"}, &corev1.Secret{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "reading a Secret as %s: %v", e.User, err)
	})

	It("cannot write a CAPTF object's status, and cannot approve its plan", func() {
		t := asTenant(shared, "tenant-status")
		// Paused, so the manager starts no Job: the spec needs an object, not a run.
		o := objects.Cluster(t.Namespace, "tenant-owned").NoCluster().Paused().Spec(configMapModule("tenant-owned-module")).Obj()
		Expect(t.Client().Create(ctx, o)).To(Succeed(), "the tenant creates its own TerraformCluster")
		DeferCleanup(func() {
			// Deleted first, then unpaused: a paused deletion waits, and no state means no destroy.
			Expect(client.IgnoreNotFound(shared.Client().Delete(ctx, tc(t.Namespace, o.Name)))).To(Succeed())
			kubectl(shared, "annotate", "-n", t.Namespace, "terraformcluster", o.Name, infrav1.PausedAnnotation+"-")
		})
		forged := &infrav1.ActiveJob{Name: "forged", Operation: infrav1.OperationApply}

		By("the status subresource: RBAC refuses it, through the client and through kubectl")
		Expect(t.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		before := o.DeepCopy()
		o.Status.ActiveJob = forged
		err := t.Client().Status().Patch(ctx, o, client.MergeFrom(before))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a status patch as %s: %v", t.User, err)
		out, err := t.Kubectl("patch", "terraformcluster", o.Name, "--subresource=status", "--type=merge",
			"-p", `{"status":{"activeJob":{"name":"forged","operation":"Apply"}}}`)
		Expect(err).To(HaveOccurred())
		// kubectl reads the status before it patches it; RBAC refuses the read already.
		Expect(out).To(MatchRegexp(`Forbidden.*User "%s" cannot (get|patch) resource "terraformclusters/status"`, regexp.QuoteMeta(t.User)))

		By("an update of the object itself: admitted, but the API server drops its status")
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := t.Client().Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
				return err
			}
			o.Status.ActiveJob = forged
			return t.Client().Update(ctx, o)
		})).To(Succeed())
		Expect(shared.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		Expect(o.Status.ActiveJob).To(Or(BeNil(), HaveField("Name", Not(Equal(forged.Name)))), "status.activeJob as the tenant wrote it")

		By("the plan approval: RBAC lets the write through, the approvers policy refuses it (the sandbox's approvers are system:masters)")
		out, err = t.Kubectl("annotate", "terraformcluster", o.Name, infrav1.ApprovePlanAnnotation+"=forged-plan")
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("ValidatingAdmissionPolicy"))
		Expect(out).To(ContainSubstring(t.User + " may not set captf.io/approve-plan: only members of the groups system:masters may"))
		AddReportEntry("a tenant's approval", strings.TrimSpace(out))
		Expect(shared.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		Expect(o.Annotations).NotTo(HaveKey(infrav1.ApprovePlanAnnotation))
	})
	// T19 and T22 of docs/threat-model.md: a create is an update from nothing.
	It("cannot create an object carrying the manager's records or an approval, nor mark a paused one for a move to skip its destroy", func() {
		t := asTenant(shared, "tenant-records")
		paused := func(name string, ann map[string]string) *infrav1.TerraformCluster {
			return objects.Cluster(t.Namespace, name).NoCluster().Paused().Annotations(ann).Spec(configMapModule("tenant-records-module")).Obj()
		}
		for _, forged := range []map[string]string{
			{infrav1.AppliedHashAnnotation: "forged"},
			{infrav1.StateLineageAnnotation: "0c4f9a2e-1111-4222-8333-000000000042"},
			{infrav1.DestroyedAnnotation: "true"},
			{infrav1.PendingPlanAnnotation: `{"id":"forged","inputsHash":"h","serial":1}`, infrav1.ApprovePlanAnnotation: "forged"},
			{infrav1.AdoptStateAnnotation: "0c4f9a2e-1111-4222-8333-000000000042"},
			{infrav1.DeleteForMoveAnnotation: ""},
		} {
			err := t.Client().Create(ctx, paused("forged", forged))
			Expect(err).To(HaveOccurred(), "a tenant created an object with %v", forged)
			Expect(err.Error()).To(ContainSubstring(`admission webhook "guard.captf.io" denied the request`), "created with %v", forged)
			for k := range forged {
				Expect(err.Error()).To(ContainSubstring(k))
			}
		}

		By("its own paused object: the tenant may not mark it for a move, so a delete still destroys")
		o := paused("tenant-move-mark", nil)
		Expect(t.Client().Create(ctx, o)).To(Succeed())
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(shared.Client().Delete(ctx, tc(t.Namespace, o.Name)))).To(Succeed())
			kubectl(shared, "annotate", "-n", t.Namespace, "terraformcluster", o.Name, infrav1.PausedAnnotation+"-")
		})
		out, err := t.Kubectl("annotate", "terraformcluster", o.Name, infrav1.DeleteForMoveAnnotation+"=")
		Expect(err).To(HaveOccurred())
		Expect(out).To(And(ContainSubstring("without a destroy"), ContainSubstring("deletionPolicy Retain")))
		AddReportEntry("a tenant's move mark", strings.TrimSpace(out))
	})

	// T26 of docs/threat-model.md: the user with only CAPTF's editor role cannot read Secrets,
	// so it must not be able to hand one to module code (whose output it reads) either.
	It("cannot hand module code a Secret that did not opt in, or a ServiceAccount token", func() {
		e := asCAPTFEditor(shared, "tenant-secrets")
		secret := func(name string, labelled bool) {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: name},
				StringData: map[string]string{"token": "value-" + name}}
			if labelled {
				s.Labels = map[string]string{infrav1.VariablesLabel: "true"}
			}
			Expect(shared.Client().Create(ctx, s)).To(Succeed())
		}
		secret("db-password", false)
		secret("cloud-creds", true)
		Expect(shared.Client().Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: "runner"}})).To(Succeed())
		createTokenSecret(shared, shared.Client(), e.Namespace, "runner-token", "runner", map[string]string{infrav1.VariablesLabel: "true"},
			map[string]string{"token": "value-runner-token"})
		machine := func(name, from string) *infrav1.TerraformMachine {
			return objects.Machine(e.Namespace, name).NoCluster().Paused().Spec(configMapModule("tenant-secrets-module")).
				Spec(func(s *infrav1.TerraformSpec) {
					s.Job.Env = []corev1.EnvVar{{Name: "CLOUD_TOKEN", ValueFrom: &corev1.EnvVarSource{
						SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: from}, Key: "token"}}}}
				}).Obj()
		}
		err := e.Client().Create(ctx, machine("unlabelled", "db-password"))
		Expect(err).To(HaveOccurred(), "a Secret without the opt-in label")
		Expect(err.Error()).To(And(ContainSubstring("db-password"), ContainSubstring(infrav1.VariablesLabel), Not(ContainSubstring("value-db-password"))))
		err = e.Client().Create(ctx, machine("token", "runner-token"))
		Expect(err).To(HaveOccurred(), "a ServiceAccount token Secret, labelled")
		Expect(err.Error()).To(ContainSubstring("ServiceAccount token"))
		Expect(e.Client().Create(ctx, machine("labelled", "cloud-creds"))).To(Succeed(), "a labelled Secret of another type")
		DeferCleanup(func() {
			// Deleted first, then unpaused: a paused deletion waits, and no state means no destroy.
			Expect(client.IgnoreNotFound(shared.Client().Delete(ctx, tm(e.Namespace, "labelled")))).To(Succeed())
			kubectl(shared, "annotate", "-n", e.Namespace, "terraformmachine", "labelled", infrav1.PausedAnnotation+"-")
		})
	})
	// T23 of docs/threat-model.md: what an approver reads and what applies, against a tenant's
	// rewrite of the plan Secret (edit writes Secrets), with real terraform.
	It("rewrites a held plan's text and JSON plan: the approver's view refuses them, and the approval applies nothing", func() {
		t := asTenant(shared, "tenant-plan")
		sb, ns, name := shared, t.Namespace, "tp"
		planFixture(sb, ns, name, "applyPolicy: Manual")
		o := tc(ns, name)
		eventuallyReady(sb, o)
		applies := countRuns(sb, ns, name, infrav1.OperationApply)
		setVariables(sb, ns, name, `{"generation":2,"extra":1}`)
		p1 := eventuallyWaiting(sb, o, "")

		By("the tenant rewrites plan.txt and plan.json to a plan that changes nothing")
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			sec := &corev1.Secret{}
			if err := t.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: p1.Secret}, sec); err != nil {
				return err
			}
			sec.Data[runnerapi.PlanTextKey] = []byte("No changes. Your infrastructure matches the configuration.\n")
			sec.Data[runnerapi.PlanJSONKey] = []byte(`{"format_version":"1.2","resource_changes":[]}`)
			return t.Client().Update(ctx, sec)
		})).To(Succeed())

		By("the approver's view: kubectl captf plan show refuses the rewritten plan")
		show := captf(sb, ns, "", "plan", "show", "terraformcluster/"+name)
		Expect(show.code).NotTo(BeZero())
		Expect(show.stdout + show.stderr).To(And(ContainSubstring("is corrupt and is not shown"), ContainSubstring(runnerapi.PlanTextKey)))
		Expect(show.stdout).NotTo(ContainSubstring("No changes."))

		By("an approver approves the plan ID anyway: the engine checks every artifact first, and nothing applies")
		kubectl(sb, "annotate", "-n", ns, "terraformcluster", name, "--overwrite", infrav1.ApprovePlanAnnotation+"="+p1.ID)
		Eventually(func() string {
			return kubectl(sb, "get", "-n", ns, "events", "--field-selector", "reason="+infrav1.PlanCorruptReason+",involvedObject.name="+name)
		}).Should(ContainSubstring(p1.ID))
		Consistently(func() int { return countRuns(sb, ns, name, infrav1.OperationApply) }, 5*time.Second).Should(Equal(applies), "a corrupt plan is never applied")
		Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		rec := infrav1.ParsePlanRecord(o.Annotations[infrav1.PendingPlanAnnotation])
		Expect(rec).NotTo(BeNil())
		Expect(rec.Reason).To(Equal(infrav1.PlanWaitCorrupt))
		AddReportEntry("a tenant's rewritten plan", show.stdout+show.stderr)
	})
	// T28 of docs/threat-model.md: a Job whose pod can never start (here the Job controller
	// cannot create it: the PriorityClass does not exist) is reported, and a deletion does not
	// wait out the Job's deadline.
	It("a Job whose pod the Job controller cannot create is reported within a minute, and deleting the Cluster does not wait out its deadline", func() {
		sb, name := shared, "np"
		t := asTenant(sb, "tenant-no-pod")
		ns := t.Namespace
		// The platform's part (the module and the Cluster) by the administrator; the tenant's
		// TerraformCluster, naming a PriorityClass that does not exist, by the tenant.
		raw, err := os.ReadFile(filepath.Join("testdata", "plans.yaml"))
		Expect(err).NotTo(HaveOccurred())
		doc := strings.ReplaceAll(string(raw), "CLUSTER", name)
		doc = strings.ReplaceAll(doc, "  POLICY", "  job:\n    podTemplate:\n      priorityClassName: captf-e2e-missing")
		parts := strings.Split(doc, "\n---\n")
		Expect(parts).To(HaveLen(3))
		platform, tenantPart := filepath.Join(GinkgoT().TempDir(), "platform.yaml"), filepath.Join(GinkgoT().TempDir(), "tenant.yaml")
		Expect(os.WriteFile(platform, []byte(parts[0]+"\n---\n"+parts[1]), 0o600)).To(Succeed())
		Expect(os.WriteFile(tenantPart, []byte(parts[2]), 0o600)).To(Succeed())
		kubectl(sb, "apply", "-n", ns, "-f", platform)
		t.MustKubectl("apply", "-f", tenantPart)
		o := tc(ns, name)

		By("JobCannotStart on the apply's condition, naming what the Job controller needs, and a Warning event")
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			c := meta.FindStatusCondition(o.Status.Conditions, infrav1.ApplyJobSucceededCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(infrav1.JobCannotStartReason))
			g.Expect(c.Message).To(And(ContainSubstring("created no pod"), ContainSubstring("PriorityClass")))
		}, 90*time.Second, time.Second).Should(Succeed())
		Expect(kubectl(sb, "get", "-n", ns, "events", "--field-selector", "reason="+infrav1.JobCannotStartReason+",involvedObject.name="+name)).To(ContainSubstring("cannot start"))

		By("the Cluster is deleted: the Job that never ran terraform is deleted, and the object goes")
		kubectl(sb, "delete", "-n", ns, "cluster", name, "--wait=false")
		Eventually(func() bool {
			return apierrors.IsNotFound(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), &infrav1.TerraformCluster{}))
		}, 3*time.Minute, time.Second).Should(BeTrue(), "the deletion waits for no deadline")
		Expect(kubectl(sb, "get", "-n", ns, "events", "--field-selector", "reason=NeverStartedJobDeleted,involvedObject.name="+name)).To(ContainSubstring("never ran terraform"))
		Expect(countRuns(sb, ns, name, infrav1.OperationApply)).To(BeZero(), "no runner ever ran")
	})
})
