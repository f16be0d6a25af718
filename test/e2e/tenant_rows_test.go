package e2e_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox"
)

// The attack rows of docs/threat-model.md that tenant_test.go does not run, each acted on the
// shared sandbox by the row's actor: the tenant (a user bound to edit, asTenant), the user with
// only CAPTF's editor role (asCAPTFEditor), the manager's own identity playing a stale manager
// (impersonated), module code (a module written to attack), or the platform admin. Each spec
// checks that the attempt is refused with a message that says what to do instead, and that what
// it aimed at is as it was; or, where the row's rule makes the write harmless rather than
// refused, that its effect never shows.
var _ = Describe("The threat model's attack rows, acted by their actors", func() {
	// T1, T2, T3 and T9: the marks, Leases and Job labels that hold a running Job's evidence.
	It("while its Job runs, a tenant is refused removing block-move or the finalizer, writing the run or cluster Lease and relabelling the Job, with or without a break-glass reason, and a stale manager is refused clearing status.activeJob", func() {
		const ns, name = "tenant-running", "busy"
		sb := shared
		invariants := watchInvariants(sb, ns)
		t := asTenant(sb, ns)
		// Long enough for every attempt below to meet the running Job; the spec does not wait for it.
		applyFixture(sb, ns, "cluster.yaml", name, 40)
		job := eventuallyRunning(sb, infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)
		o := tc(ns, name)
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			g.Expect(o.Annotations).To(HaveKey(infrav1.BlockMoveAnnotation))
			g.Expect(o.Finalizers).To(ContainElement(infrav1.Finalizer))
			g.Expect(o.Status.ActiveJob).NotTo(BeNil())
			g.Expect(o.Status.ActiveJob.Name).To(Equal(job.Name))
		}).Should(Succeed())
		// What every refusal of a live mark or lease tells its user to do instead.
		stop := fmt.Sprintf("kubectl -n %s delete job %s --cascade=foreground", ns, job.Name)
		ignored := fmt.Sprintf("the override reason was ignored: user %q is in none of the override groups %s", t.User, sandbox.OverrideGroups)

		By("T1: the tenant removes block-move with kubectl, and the finalizer with a JSON patch")
		out := refusedKeeping(sb, o, objectFields, func() (string, error) {
			return t.Kubectl("annotate", "terraformcluster", name, infrav1.BlockMoveAnnotation+"-")
		})
		Expect(out).To(And(ContainSubstring("CAPTF guard"), ContainSubstring("removes "), ContainSubstring(job.Name), ContainSubstring(stop)))
		AddReportEntry("T1: the tenant removes block-move", strings.TrimSpace(out))
		out = refusedKeeping(sb, o, objectFields, func() (string, error) {
			return viaClient(rawPatch(t.Client(), o, types.JSONPatchType, `[{"op":"remove","path":"/metadata/finalizers"}]`))
		})
		Expect(out).To(And(ContainSubstring("CAPTF guard"), ContainSubstring(infrav1.Finalizer), ContainSubstring(stop)))

		By("T9: the same removal with a break-glass reason: the tenant is in no override group")
		out = refusedKeeping(sb, o, objectFields, func() (string, error) {
			return t.Kubectl("annotate", "terraformcluster", name, infrav1.BlockMoveAnnotation+"-",
				infrav1.GuardOverrideReasonAnnotation+"=the apply looks stuck")
		})
		Expect(out).To(And(ContainSubstring(stop), ContainSubstring(ignored)))
		AddReportEntry("T9: the tenant's break-glass reason", strings.TrimSpace(out))

		By("T1: a stale manager (the manager's own identity, impersonated) clears status.activeJob, and removes block-move")
		mgr := impersonating(sb, "system:serviceaccount:"+sandbox.ManagerNamespace+":"+sandbox.ManagerServiceAccount,
			"system:serviceaccounts", "system:serviceaccounts:"+sandbox.ManagerNamespace)
		out = refusedKeeping(sb, o, objectFields, func() (string, error) {
			return viaClient(mgr.Status().Patch(ctx, o.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"status":{"activeJob":null}}`))))
		})
		Expect(out).To(And(ContainSubstring("status.activeJob"), ContainSubstring(job.Name), ContainSubstring(stop)))
		AddReportEntry("T1: a stale manager clears status.activeJob", out)
		out = refusedKeeping(sb, o, objectFields, func() (string, error) {
			return viaClient(rawPatch(mgr, o, types.MergePatchType, `{"metadata":{"annotations":{"`+infrav1.BlockMoveAnnotation+`":null}}}`))
		})
		Expect(out).To(And(ContainSubstring(infrav1.BlockMoveAnnotation), ContainSubstring(stop)))

		By("T2: the run lease and the cluster lease: a new holder, the CAPTF label dropped, a delete; and a new holder with a reason")
		suffix := naming.StateSuffix(ns, infrav1.TerraformClusterKind, name)
		for _, l := range []*coordinationv1.Lease{
			{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: naming.RunLeaseName(suffix)}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: naming.ClusterLeaseName(ns, name)}},
		} {
			// edit reads and writes Leases: RBAC lets each attempt through to the Lease guard.
			Expect(t.Client().Get(ctx, client.ObjectKeyFromObject(l), l)).To(Succeed())
			Expect(l.Spec.HolderIdentity).To(HaveValue(Equal(job.Name)), "lease %s", l.Name)
			out = refusedKeeping(sb, l, leaseFields, func() (string, error) {
				return viaClient(rawPatch(t.Client(), l, types.MergePatchType, `{"spec":{"holderIdentity":"tenant-job"}}`))
			})
			Expect(out).To(And(ContainSubstring("changes the holder of"), ContainSubstring("a second Job could start"), ContainSubstring(stop)))
			out = refusedKeeping(sb, l, leaseFields, func() (string, error) {
				return viaClient(rawPatch(t.Client(), l, types.MergePatchType, `{"metadata":{"labels":{"`+infrav1.LeaseLabel+`":null}}}`))
			})
			Expect(out).To(And(ContainSubstring("changes the labels of"), ContainSubstring(stop)))
			out = refusedKeeping(sb, l, leaseFields, func() (string, error) {
				return viaClient(t.Client().Delete(ctx, l.DeepCopy()))
			})
			Expect(out).To(And(ContainSubstring("this request deletes"), ContainSubstring(stop)))
			AddReportEntry("T2: the tenant deletes "+l.Name, out)
			out = refusedKeeping(sb, l, leaseFields, func() (string, error) {
				return viaClient(rawPatch(t.Client(), l, types.MergePatchType,
					`{"metadata":{"annotations":{"`+infrav1.GuardOverrideReasonAnnotation+`":"the apply looks stuck"}},"spec":{"holderIdentity":"tenant-job"}}`))
			})
			Expect(out).To(And(ContainSubstring(stop), ContainSubstring(ignored)))
		}

		By("T3: the Job's operation label, its controller owner reference, and the label with a reason")
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: job.Name}}
		const jobAdvice = "Only the manager changes them. To stop the Job, delete it"
		out = refusedKeeping(sb, j, jobFields, func() (string, error) {
			return viaClient(rawPatch(t.Client(), j, types.MergePatchType, `{"metadata":{"labels":{"`+infrav1.OperationLabel+`":"Plan"}}}`))
		})
		Expect(out).To(And(ContainSubstring(infrav1.OperationLabel), ContainSubstring(jobAdvice), ContainSubstring(stop)))
		AddReportEntry("T3: the tenant relabels the Job", out)
		out = refusedKeeping(sb, j, jobFields, func() (string, error) {
			return viaClient(rawPatch(t.Client(), j, types.JSONPatchType, `[{"op":"remove","path":"/metadata/ownerReferences"}]`))
		})
		Expect(out).To(And(ContainSubstring("the controller owner reference"), ContainSubstring(jobAdvice)))
		out = refusedKeeping(sb, j, jobFields, func() (string, error) {
			return viaClient(rawPatch(t.Client(), j, types.MergePatchType,
				`{"metadata":{"annotations":{"`+infrav1.GuardOverrideReasonAnnotation+`":"the apply looks stuck"},"labels":{"`+infrav1.ManagedLabel+`":null}}}`))
		})
		Expect(out).To(And(ContainSubstring(infrav1.ManagedLabel), ContainSubstring(ignored)))

		By("the Job ran through every attempt, and the monitor finds no broken invariant (I1-I5, I7)")
		Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(j), j)).To(Succeed())
		Expect(j.Status.CompletionTime).To(BeNil(), "the Job ended before the last attempt: the refusals were not all made while it ran")
		invariants()
	})

	// T4-T8: the manager's records and the guarded requests on an update, by both tenant roles.
	It("is refused, on an update, the manager's plan and lineage records, an adoption, an approval of the waiting plan and an abandon of its deleting object, as the edit user and as the CAPTF editor", func() {
		const ns = "tenant-records-update"
		sb := shared
		t := asTenant(sb, ns)
		e := asCAPTFEditor(sb, ns)
		const lineage = "0c4f9a2e-1111-4222-8333-00000000b001"
		waiting := infrav1.PlanRecord{ID: "p-2", InputsHash: "h2", Serial: 7, Lineage: lineage, Create: 1, Replace: 1}

		By("an object with the manager's records, created as clusterctl move creates it (by an override group member): a waiting plan, the last applied plan, its state's lineage")
		o := pausedCluster(ns, "recorded", map[string]string{
			infrav1.PendingPlanAnnotation:  waiting.Annotation(),
			infrav1.AppliedPlanAnnotation:  "p-1",
			infrav1.StateLineageAnnotation: lineage,
		})
		Expect(sb.Client().Create(ctx, o)).To(Succeed())
		DeferCleanup(func() {
			// The records go first (the administrator may write them), so the deletion finds an
			// object that never ran: no state, nothing to destroy.
			Expect(rawPatch(sb.Client(), o, types.MergePatchType, fmt.Sprintf(`{"metadata":{"annotations":{%q:null,%q:null,%q:null}}}`,
				infrav1.PendingPlanAnnotation, infrav1.AppliedPlanAnnotation, infrav1.StateLineageAnnotation))).To(Succeed())
			deletePaused(sb, o)
		})

		By("an object of the tenant's, deleted while paused: it waits with its finalizer, the moment an abandon would let it go without a destroy")
		leaving := pausedCluster(ns, "leaving", nil)
		Expect(t.Client().Create(ctx, leaving)).To(Succeed())
		Expect(t.Client().Delete(ctx, leaving.DeepCopy())).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(leaving), leaving)).To(Succeed())
			g.Expect(leaving.DeletionTimestamp).NotTo(BeNil())
			g.Expect(leaving.Finalizers).To(ContainElement(infrav1.Finalizer))
		}).Should(Succeed())
		DeferCleanup(func() { deletePaused(sb, leaving) })

		forged := infrav1.PlanRecord{ID: "p-forged", InputsHash: "h2", Serial: 7, Lineage: lineage}
		const recordsAdvice = "only the CAPTF manager may write them"
		const planAdvice = "To approve a plan set " + infrav1.ApprovePlanAnnotation + "=<status.pendingPlan.id>"
		const lineageAdvice = "restore a backup with " + infrav1.RestoreStateAnnotation
		for _, u := range []*tenant{t, e} {
			for _, a := range []struct {
				row, what string
				set       map[string]*string
				want      []string
			}{
				{"T5", "rewrites the waiting plan's record", map[string]*string{infrav1.PendingPlanAnnotation: ptrTo(forged.Annotation())},
					[]string{infrav1.PendingPlanAnnotation, recordsAdvice, planAdvice}},
				{"T5", "drops the waiting plan's record", map[string]*string{infrav1.PendingPlanAnnotation: nil},
					[]string{infrav1.PendingPlanAnnotation, recordsAdvice, planAdvice}},
				{"T5", "marks the waiting plan applied", map[string]*string{infrav1.AppliedPlanAnnotation: ptrTo(waiting.ID)},
					[]string{infrav1.AppliedPlanAnnotation, recordsAdvice, planAdvice}},
				{"T7", "points the object at another state lineage", map[string]*string{infrav1.StateLineageAnnotation: ptrTo("0c4f9a2e-1111-4222-8333-00000000b002")},
					[]string{infrav1.StateLineageAnnotation, recordsAdvice, lineageAdvice}},
				{"T7", "records a lineage seen by a Job", map[string]*string{infrav1.StateLineageSeenAnnotation: ptrTo("0c4f9a2e-1111-4222-8333-00000000b002")},
					[]string{infrav1.StateLineageSeenAnnotation, recordsAdvice, lineageAdvice}},
				{"T6", "opts in to adopt another state", map[string]*string{infrav1.AdoptStateAnnotation: ptrTo("0c4f9a2e-1111-4222-8333-00000000b002")},
					[]string{infrav1.AdoptStateAnnotation, "only members of the override groups may adopt a state", "Ask one of them"}},
				{"T4", "approves the waiting plan", map[string]*string{infrav1.ApprovePlanAnnotation: ptrTo(waiting.ID)},
					[]string{u.User + " may not set " + infrav1.ApprovePlanAnnotation, "only members of the groups " + sandbox.PlanApproverGroups + " may", "docs/plans.md"}},
			} {
				By(a.row + ": " + u.User + " (" + u.Role + ") " + a.what)
				out := refusedKeeping(sb, o, objectFields, func() (string, error) {
					return viaClient(rawPatch(u.Client(), o, types.MergePatchType, annotationsPatch(a.set)))
				})
				for _, w := range a.want {
					Expect(out).To(ContainSubstring(w), "%s: %s", a.row, a.what)
				}
			}

			By("T8: " + u.User + " abandons its deleting object's infrastructure, with the object's UID")
			out := refusedKeeping(sb, leaving, objectFields, func() (string, error) {
				return viaClient(rawPatch(u.Client(), leaving, types.MergePatchType,
					annotationsPatch(map[string]*string{infrav1.AbandonInfrastructureAnnotation: ptrTo(string(leaving.UID))})))
			})
			Expect(out).To(And(ContainSubstring("only members of the override groups may abandon infrastructure"), ContainSubstring("Ask one of them")))
			AddReportEntry("T8: "+u.Role+" abandons", out)
		}
	})

	// T12-T14: what a Job runs as and what it is handed, named in the spec.
	It("is refused a Job account that did not opt in, an identity token audience the API server accepts and an identity that does not allow its namespace, as the edit user and as the CAPTF editor", func() {
		const ns = "tenant-job-inputs"
		sb := shared
		t := asTenant(sb, ns)
		e := asCAPTFEditor(sb, ns)
		aud := sandboxAudience(sb, ns)

		By("another workload's ServiceAccount, and a platform identity for another namespace only")
		Expect(sb.Client().Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payroll-app"}})).To(Succeed())
		const identity = "tenant-rows-platform"
		Expect(sb.Client().Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sandbox.ManagerNamespace, Name: identity},
			StringData: map[string]string{"token": "a-platform-credential"}})).To(Succeed())
		id := &infrav1.TerraformIdentity{ObjectMeta: metav1.ObjectMeta{Name: identity}, Spec: infrav1.TerraformIdentitySpec{
			Env:               []infrav1.IdentityEnvVar{{Name: "CLOUD_TOKEN", SecretKeyRef: infrav1.IdentitySecretKeyRef{Name: identity, Key: "token"}}},
			AllowedNamespaces: &infrav1.AllowedNamespaces{List: []string{"platform-infra"}}}}
		Expect(sb.Client().Create(ctx, id)).To(Succeed())
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(sb.Client().Delete(ctx, id))).To(Succeed())
			Expect(client.IgnoreNotFound(sb.Client().Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sandbox.ManagerNamespace, Name: identity}}))).To(Succeed())
		})

		o := pausedCluster(ns, "plain", nil)
		Expect(t.Client().Create(ctx, o)).To(Succeed())
		DeferCleanup(func() { deletePaused(sb, o) })

		for _, u := range []*tenant{t, e} {
			for _, a := range []struct {
				row, what, patch string
				want             []string
			}{
				{"T12", "runs its Jobs as another workload's account", `{"spec":{"job":{"serviceAccountName":"payroll-app"}}}`,
					[]string{"does not carry the label " + infrav1.RunnerAccountLabel + "=true", "kubectl label serviceaccount payroll-app -n " + ns + " " + infrav1.RunnerAccountLabel + "=true"}},
				{"T13", "asks for an identity token of the API server's own audience", `{"spec":{"job":{"identityToken":{"audience":"` + aud + `"}}}}`,
					[]string{"spec.job.identityToken.audience: Forbidden", aud, "TokenReview", "Set the audience your cloud provider expects"}},
				{"T14", "names the platform's identity", `{"spec":{"job":{"identityRef":{"name":"` + identity + `"}}}}`,
					[]string{"spec.job.identityRef.name: Forbidden", "TerraformIdentity " + identity + " does not allow namespace " + ns, "the platform team must allow the namespace"}},
			} {
				By(a.row + ": " + u.User + " (" + u.Role + ") " + a.what)
				out := refusedKeeping(sb, o, objectFields, func() (string, error) {
					return viaClient(rawPatch(u.Client(), o, types.MergePatchType, a.patch))
				})
				for _, w := range a.want {
					Expect(out).To(ContainSubstring(w), "%s: %s", a.row, a.what)
				}
			}
		}
		By("T12 at create: the CAPTF editor's new object naming the account is refused too")
		withAccount := pausedCluster(ns, "payroll-runner", nil)
		withAccount.Spec.Job.ServiceAccountName = "payroll-app"
		err := e.Client().Create(ctx, withAccount)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("does not carry the label " + infrav1.RunnerAccountLabel + "=true"))
		Expect(apierrors.IsNotFound(sb.Client().Get(ctx, client.ObjectKeyFromObject(withAccount), &infrav1.TerraformCluster{}))).To(BeTrue())

		By("who can opt an account in: not the CAPTF editor; the edit user can, but it already runs pods as any account of the namespace")
		Expect(e.CanI("patch", "serviceaccounts")).To(BeFalse())
		Expect(t.CanI("patch", "serviceaccounts")).To(BeTrue())
		Expect(t.CanI("create", "pods")).To(BeTrue())
	})

	// T10 and T11: sources the admission check cannot judge (a ConfigMap, a Secret that does not
	// exist yet) are held by the engine before any Job; what it holds never shows.
	It("names another workload's ConfigMap or a Secret that appears later as variables or as the CLI configuration: the engine holds the object and the value reaches nothing", func() {
		const ns = "tenant-sources"
		sb := shared
		e := asCAPTFEditor(sb, ns)
		cmValue, secretValue := randomValue(), randomValue()

		By("another workload's ConfigMap and Secret (no opt-in label), and two Clusters for the editor's objects")
		Expect(sb.Client().Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payroll-settings"},
			Data: map[string]string{"db_host": cmValue}})).To(Succeed())
		Expect(sb.Client().Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payroll-db"},
			StringData: map[string]string{"password": secretValue}})).To(Succeed())
		applyFixtureDoc(sb, ns, sourcesFixture)
		DeferCleanup(func() { kubectl(sb, "delete", "-n", ns, "cluster", "vars", "cli", "--wait=false") })

		By("T10: variablesFrom names the ConfigMap: admitted (the admission check reads no ConfigMap), held before any Job")
		vars := sourcesCluster(ns, "vars")
		vars.Spec.VariablesFrom = []infrav1.VariablesSource{{ConfigMapRef: &infrav1.LocalObjectReference{Name: "payroll-settings"}}}
		Expect(e.Client().Create(ctx, vars)).To(Succeed())
		expectHeld(sb, vars, infrav1.VariablesSourceNotOptedInReason, "variablesFrom[0] (ConfigMap "+ns+"/payroll-settings) is not labelled "+infrav1.VariablesLabel+"=true",
			"kubectl label configmap payroll-settings -n "+ns+" "+infrav1.VariablesLabel+"=true")

		By("T10: variablesFrom names the existing Secret: refused at admission, naming it and not its value")
		out := refusedKeeping(sb, vars, objectFields, func() (string, error) {
			return viaClient(rawPatch(e.Client(), vars, types.MergePatchType, `{"spec":{"variablesFrom":[{"secretRef":{"name":"payroll-db"}}]}}`))
		})
		Expect(out).To(And(ContainSubstring("payroll-db"), ContainSubstring(infrav1.VariablesLabel)))

		By("T10: variablesFrom names a Secret that does not exist yet: admitted; another workload then creates it without the label; held")
		Expect(rawPatch(e.Client(), vars, types.MergePatchType, `{"spec":{"variablesFrom":[{"secretRef":{"name":"payroll-later"}}]}}`)).To(Succeed())
		Expect(sb.Client().Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payroll-later"},
			StringData: map[string]string{"password": secretValue}})).To(Succeed())
		// An unlabelled Secret wakes no CAPTF object: the editor nudges its own, as a retry would.
		Expect(rawPatch(e.Client(), vars, types.MergePatchType, `{"metadata":{"annotations":{"example.com/nudge":"payroll-later"}}}`)).To(Succeed())
		expectHeld(sb, vars, infrav1.VariablesSourceNotOptedInReason, "payroll-later", infrav1.VariablesLabel)

		By("T11: the CLI configuration file from the ConfigMap: admitted, held before any Job")
		cli := sourcesCluster(ns, "cli")
		cli.Spec.Job.CLIConfig = &infrav1.CLIConfig{ConfigMapRef: &infrav1.CLIConfigKeyRef{Name: "payroll-settings", Key: "db_host"}}
		Expect(e.Client().Create(ctx, cli)).To(Succeed())
		expectHeld(sb, cli, infrav1.VariablesSourceNotOptedInReason, "payroll-settings", "kubectl label configmap payroll-settings -n "+ns+" "+infrav1.VariablesLabel+"=true")

		By("T11: the CLI configuration file, or a registry token, from the existing Secret: refused at admission")
		for _, patch := range []string{
			`{"spec":{"job":{"cliConfig":{"configMapRef":null,"secretRef":{"name":"payroll-db","key":"password"}}}}}`,
			`{"spec":{"job":{"cliConfig":{"credentials":[{"host":"registry.example.internal","secretKeyRef":{"name":"payroll-db","key":"password"}}]}}}}`,
		} {
			out := refusedKeeping(sb, cli, objectFields, func() (string, error) {
				return viaClient(rawPatch(e.Client(), cli, types.MergePatchType, patch))
			})
			Expect(out).To(And(ContainSubstring("payroll-db"), ContainSubstring(infrav1.VariablesLabel)))
		}

		By("no Job ran, and neither value is in an object, an event or a Secret of CAPTF's")
		Expect(jobsOf(sb, infrav1.TerraformClusterKind, ns, "vars", "")).To(BeEmpty())
		Expect(jobsOf(sb, infrav1.TerraformClusterKind, ns, "cli", "")).To(BeEmpty())
		seen := kubectl(sb, "get", "-n", ns, "terraformclusters,events", "-o", "json")
		Expect(seen).To(ContainSubstring(infrav1.VariablesSourceNotOptedInReason), "the objects and events were read")
		var secrets corev1.SecretList
		Expect(sb.Client().List(ctx, &secrets, client.InNamespace(ns))).To(Succeed())
		for _, s := range secrets.Items {
			if strings.HasPrefix(s.Name, "payroll-") {
				continue
			}
			raw, err := json.Marshal(s)
			Expect(err).NotTo(HaveOccurred())
			seen += string(raw)
		}
		for _, v := range []string{cmValue, secretValue} {
			Expect(strings.Contains(seen, v)).To(BeFalse(), "a value of another workload's source reached CAPTF's objects, events or Secrets")
		}
	})

	// T25: a platform change takes away the policy that held a plan.
	It("keeps a held plan from applying when its plan policy stops selecting the namespace or is deleted, and the tenant can neither approve it nor drop its record", func() {
		const ns, name, label = "tenant-verdict", "tv", "tenant-verdict"
		sb := shared
		t := asTenant(sb, ns)
		kubectl(sb, "label", "namespace", ns, "captf-e2e-policy="+label)
		raw, err := os.ReadFile(filepath.Join("testdata", "planpolicy.yaml"))
		Expect(err).NotTo(HaveOccurred())
		f := filepath.Join(GinkgoT().TempDir(), "policy.yaml")
		Expect(os.WriteFile(f, []byte(strings.ReplaceAll(string(raw), "LABEL", label)), 0o600)).To(Succeed())
		kubectl(sb, "apply", "-f", f)
		DeferCleanup(func() { kubectl(sb, "delete", "terraformplanpolicy", "e2e-"+label, "--ignore-not-found") })

		By("a plan that replaces terraform_data.node is held by the policy")
		planFixture(sb, ns, name, "applyPolicy: Automatic")
		o := tc(ns, name)
		eventuallyReady(sb, o)
		setVariables(sb, ns, name, `{"generation":2}`)
		var held *infrav1.PendingPlan
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			held = o.Status.PendingPlan
			g.Expect(held).NotTo(BeNil())
			g.Expect(held.Reason).To(Equal(infrav1.PlanWaitPolicyViolated))
		}).Should(Succeed())
		applies := countRuns(sb, ns, name, infrav1.OperationApply)
		stillHeld := func(why string) {
			GinkgoHelper()
			// Any pass after the change would apply the plan if the verdict went with the
			// policy: the tenant nudges one with an annotation of its own.
			t.MustKubectl("annotate", "--overwrite", "terraformcluster", name, "example.com/nudge="+why)
			Consistently(func() int { return countRuns(sb, ns, name, infrav1.OperationApply) }, 5*time.Second).Should(Equal(applies), why)
			Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			Expect(o.Status.PendingPlan).To(And(HaveField("ID", held.ID), HaveField("Reason", infrav1.PlanWaitPolicyViolated),
				HaveField("Violations", ContainElement(ContainSubstring("no-data-deletes")))), why)
			Expect(nodeGeneration(stateOf(sb, infrav1.TerraformClusterKind, ns, name))).To(Equal(float64(1)), why)
		}

		By("T25: the namespace loses the label the policy selects on: the verdict stays with the plan")
		kubectl(sb, "label", "namespace", ns, "captf-e2e-policy-")
		stillHeld("label-removed")
		By("T25: the policy is deleted: the verdict stays with the plan")
		kubectl(sb, "delete", "terraformplanpolicy", "e2e-"+label)
		stillHeld("policy-deleted")

		By("T4 and T5 on the held plan: the tenant approves its ID, or drops its record")
		out := refusedKeeping(sb, o, objectFields, func() (string, error) {
			return t.Kubectl("annotate", "terraformcluster", name, infrav1.ApprovePlanAnnotation+"="+held.ID)
		})
		Expect(out).To(And(ContainSubstring(t.User+" may not set "+infrav1.ApprovePlanAnnotation), ContainSubstring("docs/plans.md")))
		out = refusedKeeping(sb, o, objectFields, func() (string, error) {
			return t.Kubectl("annotate", "terraformcluster", name, infrav1.PendingPlanAnnotation+"-")
		})
		Expect(out).To(And(ContainSubstring(infrav1.PendingPlanAnnotation), ContainSubstring("only the CAPTF manager may write them")))
		stillHeld("tenant-refused")

		By("an approver's approval applies exactly the held plan")
		kubectl(sb, "annotate", "-n", ns, "terraformcluster", name, infrav1.ApprovePlanAnnotation+"="+held.ID)
		Expect(eventuallyFinished(sb, applyJobOf(sb, ns, name, held.ID)).Status.Succeeded).To(Equal(int32(1)))
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			g.Expect(o.Annotations).To(HaveKeyWithValue(infrav1.AppliedPlanAnnotation, held.ID))
		}).Should(Succeed())
		Expect(countRuns(sb, ns, name, infrav1.OperationApply)).To(Equal(applies + 1))
	})

	// T27: module code prints what it was handed.
	It("runs a module that prints the registry token and the Secret values it is handed, and fails: no value shows in status, events or the pod log", func() {
		const ns, name = "module-leak", "leak"
		sb := shared
		createNamespace(sb, ns)
		token, cloud, password := randomValue(), randomValue(), randomValue()
		applyFixtureDoc(sb, ns, strings.NewReplacer("@TOKEN@", token, "@CLOUD@", cloud, "@PASSWORD@", password).Replace(leakFixture))
		o := tc(ns, name)
		DeferCleanup(func() {
			// The apply fails on purpose and would be retried: pause it.
			kubectl(sb, "annotate", "-n", ns, "terraformcluster", name, "--overwrite", infrav1.PausedAnnotation+"=")
		})

		By("the apply runs the module, which prints every value on both streams and fails")
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			g.Expect(o.Status.LastRun).NotTo(BeNil())
			g.Expect(o.Status.LastRun.Outcome).To(Equal(infrav1.RunFailed))
		}, 3*time.Minute).Should(Succeed())
		c := meta.FindStatusCondition(o.Status.Conditions, infrav1.ApplyJobSucceededCondition)
		Expect(c).NotTo(BeNil())
		Expect(c.Status).To(Equal(metav1.ConditionFalse))

		By("the pod log: the module had each value (its SHA-256 is printed) and printed it, masked")
		runs := runsOf(readHistory(sb.HistoryFile()), infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)
		Expect(runs).NotTo(BeEmpty())
		var podOutput strings.Builder
		for _, r := range runs {
			for _, f := range []string{"containers.log", "termination-log"} {
				b, err := os.ReadFile(filepath.Join(sb.WorkDir(), "pods", r.Namespace, r.Pod, f))
				if f == "containers.log" {
					Expect(err).NotTo(HaveOccurred(), "the log of pod %s", r.Pod)
				}
				podOutput.Write(b)
			}
		}
		for _, v := range []string{token, cloud, password} {
			sum := sha256.Sum256([]byte(v))
			Expect(podOutput.String()).To(ContainSubstring("sha256 "+hex.EncodeToString(sum[:])), "the module was handed the value")
		}
		Expect(podOutput.String()).To(ContainSubstring("handed [REDACTED]"))

		By("the failure's message carries the module's output, masked")
		Expect(o.Status.LastRun.Message).To(ContainSubstring("[REDACTED]"))
		AddReportEntry("T27: the failed run's message", o.Status.LastRun.Message)

		By("no value in the pod log, the object (status included) or the namespace's events")
		seen := podOutput.String() + kubectl(sb, "get", "-n", ns, "terraformcluster", name, "-o", "json") +
			kubectl(sb, "get", "-n", ns, "events", "-o", "json")
		Expect(seen).To(ContainSubstring("[REDACTED]"))
		for what, v := range map[string]string{"the registry token": token, "the env Secret's value": cloud, "the variablesFrom Secret's value": password} {
			Expect(strings.Contains(seen, v)).To(BeFalse(), "%s was shown", what)
		}
	})
})

// Module code against the state channel: what it can do with the credential terraform passes it
// (T15, T17, T18). Each spec runs channelProbeModule, whose attack.sh acts when the variable
// attack names an attack and reports what the channel answered into a folder the spec reads.
var _ = Describe("A module attacking its own state channel", func() {
	It("cannot write another lineage even with the lock it learns from the channel, nor reach another object's state, and its run fails", func() {
		const ns, name = "module-lineage", "lineage"
		sb := shared
		createNamespace(sb, ns)
		stash := applyChannelProbe(sb, ns, name, "")
		o := tc(ns, name)
		eventuallyReady(sb, o)
		before := stateOf(sb, infrav1.TerraformClusterKind, ns, name)
		Expect(before).NotTo(BeNil())

		By("T15: the next apply's module learns terraform's lock ID from the channel and writes a state of another lineage with it")
		setVariables(sb, ns, name, `{"generation":2,"attack":"lineage"}`)
		report := eventuallyReport(stash, "lineage")
		Expect(report).To(ContainSubstring("other-state=403\n"), "another object's state")
		Expect(report).To(ContainSubstring("guess=409\n"), "a write without the lock")
		Expect(report).To(ContainSubstring("lock-id=learned\n"), "the module learned the lock ID, so the lineage rule is what refuses the forged write")
		Expect(report).To(ContainSubstring("forged=409\n"))
		Expect(readStash(stash, "lineage.forged.body")).To(ContainSubstring("state write refused: this run's state is lineage " + before.Lineage))

		By("the run fails, saying something besides terraform wrote, and the state keeps its lineage")
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			g.Expect(o.Status.LastRun).NotTo(BeNil())
			g.Expect(o.Status.LastRun.Outcome).To(Equal(infrav1.RunFailed))
			g.Expect(o.Status.LastRun.Message).To(ContainSubstring("something besides terraform wrote with the run's credential"))
		}).Should(Succeed())
		AddReportEntry("T15: the run's message", o.Status.LastRun.Message)
		after := stateOf(sb, infrav1.TerraformClusterKind, ns, name)
		Expect(after.Lineage).To(Equal(before.Lineage))
		Expect(after.Serial).NotTo(BeEquivalentTo(forgedSerial))
	})

	It("cannot lock or write the state once its Job's run lease moved on, and terraform's own write is fenced too", func() {
		const ns, name = "module-fenced", "fenced"
		sb := shared
		createNamespace(sb, ns)
		stash := applyChannelProbe(sb, ns, name, "")
		o := tc(ns, name)
		eventuallyReady(sb, o)

		By("the next apply's module waits; meanwhile the run lease is moved to another Job (by an override group member, as a newer manager's would be)")
		setVariables(sb, ns, name, `{"generation":2,"attack":"fenced"}`)
		Eventually(func() error { _, err := os.Stat(filepath.Join(stash, "fenced.waiting")); return err }).Should(Succeed())
		job := eventuallyRunning(sb, infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)
		serial := stateOf(sb, infrav1.TerraformClusterKind, ns, name).Serial
		const newHolder = "captf-e2e-newer-run"
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: naming.RunLeaseName(naming.StateSuffix(ns, infrav1.TerraformClusterKind, name))}}
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := sb.Client().Get(ctx, client.ObjectKeyFromObject(lease), lease); err != nil {
				return err
			}
			Expect(lease.Spec.HolderIdentity).To(HaveValue(Equal(job.Name)))
			lease.Spec.HolderIdentity = ptrTo(newHolder)
			if lease.Annotations == nil {
				lease.Annotations = map[string]string{}
			}
			lease.Annotations[infrav1.GuardOverrideReasonAnnotation] = "e2e: a newer run took the lease while " + job.Name + " runs"
			return sb.Client().Update(ctx, lease)
		})).To(Succeed())
		Expect(os.WriteFile(filepath.Join(stash, "fenced.go"), nil, 0o600)).To(Succeed())

		By("T17: the module's write and lock are refused as fenced")
		report := eventuallyReport(stash, "fenced")
		Expect(report).To(ContainSubstring("write=403\n"))
		Expect(report).To(ContainSubstring("lock=403\n"))
		fenced := fmt.Sprintf("names %q, not Job %s", newHolder, job.Name)
		Expect(readStash(stash, "fenced.write.body")).To(ContainSubstring(fenced))
		Expect(readStash(stash, "fenced.lock.body")).To(ContainSubstring(fenced))

		By("terraform's own state write is fenced: the run ends Fenced, and the state is as it was when the lease moved")
		eventuallyFinished(sb, job)
		Expect(stateOf(sb, infrav1.TerraformClusterKind, ns, name).Serial).To(Equal(serial))
		// The runner's result, as the Job's pod reports it. (The manager records it on the
		// object once the lease frees: the guard refuses clearing status.activeJob while the
		// lease names a Job that may still be created, and this one never will.)
		res := resultOf(sb, runOf(sb, job.Name))
		Expect(res.Outcome).To(Equal(runnerapi.OutcomeFenced))
		Expect(res.Error).To(ContainSubstring("fenced: the object's run lease names " + newHolder + ", not this Job"))
		AddReportEntry("T17: the run's result", res.Error)
	})

	It("in the Apply Job of an approved plan, cannot store another plan or fetch another object's, and the one plan it can fetch is the approved one", func() {
		const ns, name = "module-plan", "planned"
		sb := shared
		createNamespace(sb, ns)
		stash := applyChannelProbe(sb, ns, name, "applyPolicy: Manual")
		o := tc(ns, name)
		eventuallyReady(sb, o)

		By("a change plans and waits; an approver approves it; its Apply Job runs the module")
		setVariables(sb, ns, name, `{"generation":2,"attack":"plan"}`)
		p := eventuallyWaiting(sb, o, "")
		kubectl(sb, "annotate", "-n", ns, "terraformcluster", name, infrav1.ApprovePlanAnnotation+"="+p.ID)

		By("T18: the module stores a plan of its own, fetches another object's, and fetches its Job's")
		report := eventuallyReport(stash, "plan")
		Expect(report).To(ContainSubstring("put=403\n"))
		Expect(readStash(stash, "plan.put.body")).To(ContainSubstring("only a Plan Job stores a plan"))
		Expect(report).To(ContainSubstring("other=403\n"))
		Expect(report).To(ContainSubstring("get=200\n"))
		Expect(readStash(stash, "plan.get.body")).To(ContainSubstring(`"id":"` + p.ID + `"`))

		By("the approved plan applied, once")
		Expect(eventuallyFinished(sb, applyJobOf(sb, ns, name, p.ID)).Status.Succeeded).To(Equal(int32(1)))
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			g.Expect(o.Annotations).To(HaveKeyWithValue(infrav1.AppliedPlanAnnotation, p.ID))
		}).Should(Succeed())
	})
})

// Fields of an object a refused request must leave as they were.
var (
	objectFields = [][]string{{"metadata", "labels"}, {"metadata", "annotations"}, {"metadata", "finalizers"},
		{"metadata", "ownerReferences"}, {"metadata", "deletionTimestamp"}, {"spec"}, {"status", "activeJob"}}
	leaseFields = [][]string{{"metadata", "labels"}, {"metadata", "annotations"}, {"spec", "holderIdentity"},
		{"spec", "leaseDurationSeconds"}, {"spec", "acquireTime"}}
	jobFields = [][]string{{"metadata", "labels"}, {"metadata", "annotations"}, {"metadata", "ownerReferences"}}
)

// fieldsOf reads obj through the administrator's client and returns the named fields.
func fieldsOf(sb target, obj client.Object, fields [][]string) map[string]any {
	GinkgoHelper()
	gvk, err := apiutil.GVKForObject(obj, sb.Client().Scheme())
	Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(obj), u)).To(Succeed())
	out := map[string]any{}
	for _, f := range fields {
		v, _, err := unstructured.NestedFieldCopy(u.Object, f...)
		Expect(err).NotTo(HaveOccurred())
		out[strings.Join(f, ".")] = v
	}
	return out
}

// refusedKeeping makes an attempt that must be refused and returns what its user saw; fields
// of obj must be the same before and after.
func refusedKeeping(sb target, obj client.Object, fields [][]string, attempt func() (string, error)) string {
	GinkgoHelper()
	before := fieldsOf(sb, obj, fields)
	out, err := attempt()
	Expect(err).To(HaveOccurred(), "the attempt on %s %s was admitted: %s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), out)
	Expect(fieldsOf(sb, obj, fields)).To(Equal(before), "a refused attempt changed %s", obj.GetName())
	return out
}

// viaClient is a client call's outcome as its user sees it: the API error's text.
func viaClient(err error) (string, error) {
	if err != nil {
		return err.Error(), err
	}
	return "", nil
}

// rawPatch patches obj (only its name and namespace are read) with c.
func rawPatch(c client.Client, obj client.Object, pt types.PatchType, patch string) error {
	return c.Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch(pt, []byte(patch)))
}

// annotationsPatch is a merge patch that sets (or, for nil, removes) annotations.
func annotationsPatch(set map[string]*string) string {
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": set}})
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}

func ptrTo(s string) *string { return &s }

// impersonating is a client of the sandbox that acts as user in groups, as kubectl --as and
// --as-group do (the sandbox's administrator may impersonate anyone).
func impersonating(sb target, user string, groups ...string) client.Client {
	GinkgoHelper()
	cfg, err := clientcmd.BuildConfigFromFlags("", sb.Kubeconfig())
	Expect(err).NotTo(HaveOccurred())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append([]string{"system:authenticated"}, groups...)}
	scheme, err := sandbox.NewScheme()
	Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// pausedCluster is a paused TerraformCluster (so no Job starts) with annotations.
func pausedCluster(ns, name string, ann map[string]string) *infrav1.TerraformCluster {
	return objects.Cluster(ns, name).NoCluster().Paused().Annotations(ann).Spec(configMapModule(name + "-module")).Obj()
}

// configMapModule sets the module to the ConfigMap name.
func configMapModule(name string) func(*infrav1.TerraformSpec) {
	return func(s *infrav1.TerraformSpec) {
		s.Module = infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: name}}
	}
}

// deletePaused deletes a paused object that never ran and waits until it is gone: deleted
// first, then unpaused (a paused deletion waits; without a state there is nothing to destroy).
func deletePaused(sb target, o *infrav1.TerraformCluster) {
	GinkgoHelper()
	Expect(client.IgnoreNotFound(sb.Client().Delete(ctx, tc(o.Namespace, o.Name)))).To(Succeed())
	Expect(client.IgnoreNotFound(rawPatch(sb.Client(), o, types.MergePatchType,
		`{"metadata":{"annotations":{"`+infrav1.PausedAnnotation+`":null}}}`))).To(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), &infrav1.TerraformCluster{}))
	}).Should(BeTrue(), "%s/%s is gone", o.Namespace, o.Name)
}

// randomValue is a value only this run knows: the specs never print it, and look for it.
func randomValue() string {
	GinkgoHelper()
	b := make([]byte, 24)
	_, err := rand.Read(b)
	Expect(err).NotTo(HaveOccurred())
	return hex.EncodeToString(b)
}

// sourcesFixture is the module and the two Clusters of the T10/T11 spec; the CAPTF editor
// creates their TerraformClusters (sourcesCluster).
const sourcesFixture = `apiVersion: v1
kind: ConfigMap
metadata:
  name: sources-module
data:
  main.tf: |
    variable "captf" {
      type = any
    }
    output "control_plane_endpoint" {
      value = { host = "sources.example.internal", port = 6443 }
    }
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: vars
spec:
  infrastructureRef:
    apiGroup: infrastructure.cluster.x-k8s.io
    kind: TerraformCluster
    name: vars
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: cli
spec:
  infrastructureRef:
    apiGroup: infrastructure.cluster.x-k8s.io
    kind: TerraformCluster
    name: cli
`

// sourcesCluster is the TerraformCluster of sourcesFixture's Cluster name.
func sourcesCluster(ns, name string) *infrav1.TerraformCluster {
	return objects.Cluster(ns, name).Spec(configMapModule("sources-module")).Obj()
}

// expectHeld waits until the engine holds o (InputsValid=False with reason, and a message
// with each of want), and checks that no Job of it exists.
func expectHeld(sb target, o *infrav1.TerraformCluster, reason string, want ...string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		c := meta.FindStatusCondition(o.Status.Conditions, infrav1.InputsValidCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(reason), c.Message)
		for _, w := range want {
			g.Expect(c.Message).To(ContainSubstring(w))
		}
	}).Should(Succeed())
	AddReportEntry("held "+o.Name, meta.FindStatusCondition(o.Status.Conditions, infrav1.InputsValidCondition).Message)
	Expect(jobsOf(sb, infrav1.TerraformClusterKind, o.Namespace, o.Name, "")).To(BeEmpty())
}

// leakFixture is the T27 spec's module and object: the module is handed a registry token
// (spec.job.cliConfig.credentials), a Secret value in its environment (spec.job.env) and one
// as a variable (spec.variablesFrom), prints each, and fails. @TOKEN@, @CLOUD@ and @PASSWORD@
// are replaced by the spec.
const leakFixture = `apiVersion: v1
kind: ConfigMap
metadata:
  name: leak-module
data:
  main.tf: |
    variable "captf" {
      type = any
    }
    variable "db_password" {
      type = string
    }
    resource "terraform_data" "leak" {
      provisioner "local-exec" {
        command = "sh ./leak.sh"
        environment = {
          DB_PASSWORD = var.db_password
        }
      }
    }
    output "control_plane_endpoint" {
      value = { host = "leak.example.internal", port = 6443 }
    }
  leak.sh: |
    # Every value, on both streams, with its digest (which proves the module had it), then a
    # failure, so the values would reach the failure's message as well as the log.
    for v in "${TF_TOKEN_registry_example_internal:-}" "${CLOUD_SECRET:-}" "${DB_PASSWORD:-}"; do
      printf 'handed %s\n' "$v"
      printf 'handed %s\n' "$v" >&2
      printf 'sha256 %s\n' "$(printf '%s' "$v" | sha256sum | cut -d' ' -f1)"
    done
    exit 1
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: leak-cli
  labels:
    captf.io/variables: "true"
data:
  config.tfrc: |
    disable_checkpoint = true
---
apiVersion: v1
kind: Secret
metadata:
  name: leak-registry
  labels:
    captf.io/variables: "true"
stringData:
  token: "@TOKEN@"
---
apiVersion: v1
kind: Secret
metadata:
  name: leak-cloud
  labels:
    captf.io/variables: "true"
stringData:
  secret: "@CLOUD@"
---
apiVersion: v1
kind: Secret
metadata:
  name: leak-vars
  labels:
    captf.io/variables: "true"
stringData:
  db_password: "@PASSWORD@"
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: leak
spec:
  infrastructureRef:
    apiGroup: infrastructure.cluster.x-k8s.io
    kind: TerraformCluster
    name: leak
---
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: TerraformCluster
metadata:
  name: leak
  labels:
    cluster.x-k8s.io/cluster-name: leak
spec:
  module:
    configMap:
      name: leak-module
  variablesFrom:
  - secretRef:
      name: leak-vars
  job:
    env:
    - name: CLOUD_SECRET
      valueFrom:
        secretKeyRef:
          name: leak-cloud
          key: secret
    cliConfig:
      configMapRef:
        name: leak-cli
        key: config.tfrc
      credentials:
      - host: registry.example.internal
        secretKeyRef:
          name: leak-registry
          key: token
`

// forgedSerial is the serial of the state the channel probe forges.
const forgedSerial = 9999

// channelProbeModule is a module that attacks its own state channel with the credential
// terraform passes it (TF_HTTP_ADDRESS, TF_HTTP_PASSWORD), once per attack: "lineage" (T15),
// "fenced" (T17, after the spec writes <stash>/fenced.go) or "plan" (T18). It writes
// <attack>.report ("<request>=<HTTP code>" lines, then "done") and each answer's body as
// <attack>.<request>.body into the stash (the sandbox's containers share the host's
// filesystem). NAME, POLICY, @STASH@ and @OTHER_PATH@ (another object's namespace/suffix) are
// replaced by applyChannelProbe.
const channelProbeModule = `apiVersion: v1
kind: ConfigMap
metadata:
  name: NAME-module
data:
  main.tf: |
    variable "captf" {
      type = any
    }
    variable "generation" {
      type = number
    }
    variable "attack" {
      type    = string
      default = ""
    }
    resource "terraform_data" "probe" {
      triggers_replace = [var.generation, var.attack]
      provisioner "local-exec" {
        command = "sh ./attack.sh"
        environment = {
          ATTACK     = var.attack
          STASH      = "@STASH@"
          OTHER_PATH = "@OTHER_PATH@"
        }
      }
    }
    output "control_plane_endpoint" {
      value = { host = "NAME.example.internal", port = 6443 }
    }
  attack.sh: |
    set -u
    [ -n "$ATTACK" ] || exit 0
    # One attempt per attack: a retried run of the same inputs does not attack again.
    [ -e "$STASH/$ATTACK.done" ] && exit 0
    r="$STASH/$ATTACK.report"
    cred="captf:$TF_HTTP_PASSWORD"
    state="$TF_HTTP_ADDRESS"
    base="${state%/state/*}"
    own="${state#*/state/}"
    forged='{"version":4,"terraform_version":"1.10.0","serial":9999,"lineage":"0c4f9a2e-dead-4bad-8bad-00000000f00d","outputs":{},"resources":[]}'
    call() {
      n=$1
      shift
      c=$(curl -s -o "$STASH/$ATTACK.$n.body" -w '%{http_code}' -u "$cred" "$@")
      echo "$n=$c" >> "$r"
    }
    case "$ATTACK" in
    lineage)
      call other-state "$base/state/$OTHER_PATH"
      # The ID of the lock terraform holds for this apply is in the answer to a write without it.
      call guess -X POST --data-binary "$forged" "$state?ID=guessed"
      id=$(sed -n 's/.*"ID" *: *"\([^"]*\)".*/\1/p' "$STASH/lineage.guess.body")
      [ -n "$id" ] && echo "lock-id=learned" >> "$r"
      call forged -X POST --data-binary "$forged" "$state?ID=$id"
      ;;
    fenced)
      touch "$STASH/fenced.waiting"
      i=0
      while [ ! -e "$STASH/fenced.go" ] && [ "$i" -lt 1200 ]; do sleep 0.1; i=$((i+1)); done
      call write -X POST --data-binary "$forged" "$state?ID=guessed"
      call lock -X LOCK --data-binary '{"ID":"module-lock","Operation":"OperationTypeApply","Who":"module"}' "$state"
      ;;
    plan)
      call put -X PUT --data-binary '{}' "$base/plan/$own"
      call other "$base/plan/$OTHER_PATH"
      call get "$base/plan/$own"
      ;;
    esac
    echo done >> "$r"
    touch "$STASH/$ATTACK.done"
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: NAME
spec:
  infrastructureRef:
    apiGroup: infrastructure.cluster.x-k8s.io
    kind: TerraformCluster
    name: NAME
---
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: TerraformCluster
metadata:
  name: NAME
  labels:
    cluster.x-k8s.io/cluster-name: NAME
spec:
  module:
    configMap:
      name: NAME-module
  POLICY
  variables:
    generation: 1
    attack: ""
`

// applyChannelProbe applies channelProbeModule into ns as name, with the spec line policy
// (or none), and returns the stash folder its attacks report into.
func applyChannelProbe(sb target, ns, name, policy string) string {
	GinkgoHelper()
	stash := GinkgoT().TempDir()
	Expect(os.Chmod(stash, 0o777)).To(Succeed())
	other := ns + "/" + naming.StateSuffix(ns, infrav1.TerraformClusterKind, "another")
	doc := strings.NewReplacer("NAME", name, "@STASH@", stash, "@OTHER_PATH@", other, "  POLICY\n", policyLine(policy)).Replace(channelProbeModule)
	applyFixtureDoc(sb, ns, doc)
	return stash
}

func policyLine(policy string) string {
	if policy == "" {
		return ""
	}
	return "  " + policy + "\n"
}

// eventuallyReport waits until the probe's attack finished and returns its report.
func eventuallyReport(stash, attack string) string {
	GinkgoHelper()
	var report string
	Eventually(func() string { report = readStash(stash, attack+".report"); return report }, 3*time.Minute).Should(HaveSuffix("done\n"))
	fmt.Fprintf(GinkgoWriter, "probe %s report:\n%s", attack, report)
	return report
}

// readStash reads a file the probe wrote ("" when it has not yet).
func readStash(stash, file string) string {
	b, _ := os.ReadFile(filepath.Join(stash, file))
	return string(b)
}
