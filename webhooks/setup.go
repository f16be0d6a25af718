package webhooks

import (
	"context"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
)

// The webhook configurations are generated from these markers (make manifests); the kustomize
// patches in config/webhook add what markers cannot express: matchConditions, namespaceSelector
// and objectSelector.
//
// The guard, the Lease guard and the Job guard:
// +kubebuilder:webhook:path=/guard-captf,mutating=false,failurePolicy=fail,sideEffects=None,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=terraformclusters;terraformclusters/status;terraformmachines;terraformmachines/status;terraformmachinepools;terraformmachinepools/status,verbs=create;update,versions=v1alpha1,name=guard.captf.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/guard-captf-lease,mutating=false,failurePolicy=fail,sideEffects=None,matchPolicy=Equivalent,groups=coordination.k8s.io,resources=leases,verbs=update;delete,versions=v1,name=lease-guard.captf.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/guard-captf-job,mutating=false,failurePolicy=fail,sideEffects=None,matchPolicy=Equivalent,groups=batch,resources=jobs,verbs=update,versions=v1,name=job-guard.captf.io,admissionReviewVersions=v1,timeoutSeconds=5
//
// Defaulting on CREATE:
// +kubebuilder:webhook:path=/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformcluster,mutating=true,failurePolicy=fail,sideEffects=None,reinvocationPolicy=IfNeeded,groups=infrastructure.cluster.x-k8s.io,resources=terraformclusters,verbs=create,versions=v1alpha1,name=default.terraformcluster.captf.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachine,mutating=true,failurePolicy=fail,sideEffects=None,reinvocationPolicy=IfNeeded,groups=infrastructure.cluster.x-k8s.io,resources=terraformmachines,verbs=create,versions=v1alpha1,name=default.terraformmachine.captf.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachinepool,mutating=true,failurePolicy=fail,sideEffects=None,reinvocationPolicy=IfNeeded,groups=infrastructure.cluster.x-k8s.io,resources=terraformmachinepools,verbs=create,versions=v1alpha1,name=default.terraformmachinepool.captf.io,admissionReviewVersions=v1,timeoutSeconds=5
//
// Spec validation. CREATE fails closed (failurePolicy Fail). UPDATE fails open (Ignore), and
// the patches route only spec changes of live objects to it: a webhook outage blocks no edit
// but the guarded removals, and the controller checks the same rules again when it runs.
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformcluster,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformclusters,verbs=create,versions=v1alpha1,name=validate.terraformcluster.captf.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformcluster,mutating=false,failurePolicy=ignore,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformclusters,verbs=update,versions=v1alpha1,name=validate-update.terraformcluster.captf.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachine,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformmachines,verbs=create,versions=v1alpha1,name=validate.terraformmachine.captf.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachine,mutating=false,failurePolicy=ignore,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformmachines,verbs=update,versions=v1alpha1,name=validate-update.terraformmachine.captf.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachinepool,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformmachinepools,verbs=create,versions=v1alpha1,name=validate.terraformmachinepool.captf.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachinepool,mutating=false,failurePolicy=ignore,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformmachinepools,verbs=update,versions=v1alpha1,name=validate-update.terraformmachinepool.captf.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformclustertemplate,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformclustertemplates,verbs=create,versions=v1alpha1,name=validate.terraformclustertemplate.captf.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformclustertemplate,mutating=false,failurePolicy=ignore,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformclustertemplates,verbs=update,versions=v1alpha1,name=validate-update.terraformclustertemplate.captf.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachinetemplate,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformmachinetemplates,verbs=create,versions=v1alpha1,name=validate.terraformmachinetemplate.captf.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachinetemplate,mutating=false,failurePolicy=ignore,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformmachinetemplates,verbs=update,versions=v1alpha1,name=validate-update.terraformmachinetemplate.captf.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachinepooltemplate,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformmachinepooltemplates,verbs=create,versions=v1alpha1,name=validate.terraformmachinepooltemplate.captf.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachinepooltemplate,mutating=false,failurePolicy=ignore,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformmachinepooltemplates,verbs=update,versions=v1alpha1,name=validate-update.terraformmachinepooltemplate.captf.io,admissionReviewVersions=v1,timeoutSeconds=5

// Paths the guards are served on.
const (
	GuardPath      = "/guard-captf"
	LeaseGuardPath = "/guard-captf-lease"
	JobGuardPath   = "/guard-captf-job"
)

// Options configure the webhooks.
type Options struct {
	// OverrideGroups are the groups whose members may force a guarded removal with
	// captf.io/guard-override-reason (manager flag --guard-override-groups). Empty by default:
	// no one may.
	OverrideGroups []string
	// PlanApproverGroups are the groups whose members may approve a saved plan by setting
	// captf.io/approve-plan to its ID (manager flag --plan-approver-groups, read with
	// ParseGroups). Empty by default: no one may approve, so a plan that waits for approval
	// waits until the flag names a group. The ValidatingAdmissionPolicy of config/policy holds
	// the same rule from the ConfigMap PlanApproversConfigMap, which cmd/manager/setup keeps
	// equal to this list.
	PlanApproverGroups []string
	// Leases is the manager's lease manager, built over mgr.GetAPIReader(). When nil, Setup
	// builds one with runlease.DefaultOptions over mgr.GetAPIReader().
	Leases *runlease.Manager
	// ManagerServiceAccount is the manager's own identity (manager flag
	// --manager-service-account): "<namespace>/<name>" or the full username
	// "system:serviceaccount:<namespace>:<name>". The Lease and Job guards let its writes through
	// before reading anything. Empty by default: Setup takes the Pod's namespace and
	// ServiceAccount from the environment config/manager sets from the downward API
	// (ServiceAccountFromEnv), and without them asks the API server which user the manager's
	// credentials authenticate as (WhoAmI).
	ManagerServiceAccount string
	// Audiences asks the API server whether it accepts the audience of an object's
	// spec.job.identityToken (jobs.CheckIdentityAudience). When nil, Setup uses a
	// jobs.AudienceProbe through mgr.GetClient() of the ServiceAccount
	// default/captf-audience-probe, which it does not create (admission has no side effects).
	Audiences jobs.AudienceProber
}

// Setup registers every CAPTF webhook with the manager's webhook server. The guards read
// through mgr.GetAPIReader(), never through the manager's cache.
func Setup(mgr ctrl.Manager, o Options) error {
	reader := mgr.GetAPIReader()
	leases := o.Leases
	if leases == nil {
		leases = runlease.New(mgr.GetClient(), reader, runlease.DefaultOptions())
	}
	sa := o.ManagerServiceAccount
	if sa == "" {
		sa = ServiceAccountFromEnv(os.Getenv)
	}
	user, err := ManagerUsername(sa)
	if err != nil {
		return err
	}
	if user == "" {
		if user, err = WhoAmI(context.Background(), mgr.GetConfig()); err != nil {
			return fmt.Errorf("find the manager's own identity (or set --manager-service-account): %w", err)
		}
	}
	mgr.GetLogger().Info("the Lease and Job guards let the manager's own writes through", "manager", user)
	ids := Identities{Manager: user}
	override := &Override{Groups: append([]string(nil), o.OverrideGroups...), Recorder: mgr.GetEventRecorder("captf-guard")}
	srv := mgr.GetWebhookServer()
	approvals := &PlanApprovals{Approvers: Approvers{Groups: append([]string(nil), o.PlanApproverGroups...)}, Recorder: mgr.GetEventRecorder("captf-guard")}
	mgr.GetLogger().Info("plan approvals", "approverGroups", approvals.Approvers.Groups)
	srv.Register(GuardPath, &admission.Webhook{Handler: Measured(GuardObject, &Guard{Reader: reader, Leases: leases, Override: override, Identities: ids, Approvals: approvals})})
	srv.Register(LeaseGuardPath, &admission.Webhook{Handler: Measured(GuardLease, &LeaseGuard{Leases: leases, Identities: ids, Override: override})})
	srv.Register(JobGuardPath, &admission.Webhook{Handler: Measured(GuardJob, &JobGuard{Identities: ids, Override: override})})

	audiences := o.Audiences
	if audiences == nil {
		audiences = jobs.AudienceProbe{Client: mgr.GetClient(),
			Account: types.NamespacedName{Namespace: metav1.NamespaceDefault, Name: jobs.DefaultAudienceProbeAccountName}}
	}
	if err := register(mgr, &infrav1.TerraformCluster{}, infrav1.TerraformClusterKind, reader, audiences); err != nil {
		return err
	}
	if err := register(mgr, &infrav1.TerraformMachine{}, infrav1.TerraformMachineKind, reader, audiences); err != nil {
		return err
	}
	if err := register(mgr, &infrav1.TerraformMachinePool{}, infrav1.TerraformMachinePoolKind, reader, audiences); err != nil {
		return err
	}
	if err := registerTemplate(mgr, &infrav1.TerraformClusterTemplate{}, TemplateValidator[*infrav1.TerraformClusterTemplate]{Kind: "TerraformClusterTemplate", Spec: clusterTemplateSpec,
		Annotations: func(t *infrav1.TerraformClusterTemplate) map[string]string {
			return t.Spec.Template.ObjectMeta.Annotations
		},
		Audiences: audiences, Secrets: reader, Identities: reader}); err != nil {
		return err
	}
	if err := registerTemplate(mgr, &infrav1.TerraformMachineTemplate{}, TemplateValidator[*infrav1.TerraformMachineTemplate]{Kind: "TerraformMachineTemplate", Spec: machineTemplateSpec,
		Annotations: func(t *infrav1.TerraformMachineTemplate) map[string]string {
			return t.Spec.Template.ObjectMeta.Annotations
		},
		Contract: func(t *infrav1.TerraformMachineTemplate) (string, []string) {
			return t.Spec.Template.Spec.ProviderID, nil
		},
		Audiences: audiences, Secrets: reader, Identities: reader}); err != nil {
		return err
	}
	if err := registerTemplate(mgr, &infrav1.TerraformMachinePoolTemplate{}, TemplateValidator[*infrav1.TerraformMachinePoolTemplate]{Kind: "TerraformMachinePoolTemplate", Spec: poolTemplateSpec,
		Annotations: func(t *infrav1.TerraformMachinePoolTemplate) map[string]string {
			return t.Spec.Template.ObjectMeta.Annotations
		},
		Contract: func(t *infrav1.TerraformMachinePoolTemplate) (string, []string) {
			return "", t.Spec.Template.Spec.ProviderIDList
		},
		Audiences: audiences, Secrets: reader, Identities: reader}); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &infrav1.TerraformPlanPolicy{}).WithValidator(PlanPolicyValidator{}).Complete(); err != nil {
		return fmt.Errorf("register %s webhook: %w", TerraformPlanPolicyKind, err)
	}
	return nil
}

func register[T Reconciled](mgr ctrl.Manager, obj T, kind string, reader client.Reader, audiences jobs.AudienceProber) error {
	if err := ctrl.NewWebhookManagedBy(mgr, obj).
		WithDefaulter(Defaulter[T]{}).
		WithValidator(Validator[T]{Kind: kind, Accounts: reader, Audiences: audiences, Secrets: reader}).
		Complete(); err != nil {
		return fmt.Errorf("register %s webhooks: %w", kind, err)
	}
	return nil
}

func registerTemplate[T client.Object](mgr ctrl.Manager, obj T, v TemplateValidator[T]) error {
	if err := ctrl.NewWebhookManagedBy(mgr, obj).WithValidator(v).Complete(); err != nil {
		return fmt.Errorf("register %s webhook: %w", v.Kind, err)
	}
	return nil
}

func clusterTemplateSpec(t *infrav1.TerraformClusterTemplate) *infrav1.TerraformSpec {
	return &t.Spec.Template.Spec.TerraformSpec
}

func machineTemplateSpec(t *infrav1.TerraformMachineTemplate) *infrav1.TerraformSpec {
	return &t.Spec.Template.Spec.TerraformSpec
}

func poolTemplateSpec(t *infrav1.TerraformMachinePoolTemplate) *infrav1.TerraformSpec {
	return &t.Spec.Template.Spec.TerraformSpec
}
