package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
	"github.com/captf/cluster-api-provider-terraform/test/sim/apiserver"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// DefaultManager is the manager's username when Options.Manager is empty (config/manager's
// ServiceAccount).
const DefaultManager = "system:serviceaccount:captf-system:captf-controller-manager"

// DefaultUser is the user of a request whose context names none.
var DefaultUser = authenticationv1.UserInfo{Username: "sim:user", Groups: []string{"system:authenticated"}}

// Options configure the chain as the manager's flags configure webhooks.Setup.
type Options struct {
	// Manager is the manager's own username (--manager-service-account). Default DefaultManager.
	Manager string
	// OverrideGroups may break glass (--guard-override-groups).
	OverrideGroups []string
	// PlanApproverGroups may approve plans (--plan-approver-groups).
	PlanApproverGroups []string
	// Leases judges run leases. Nil: runlease.New over the store's client with
	// runlease.DefaultOptions (the bubble's clock).
	Leases *runlease.Manager
	// Audiences judges spec.job.identityToken audiences. Nil accepts every audience (the
	// simulated API server has no token authenticator).
	Audiences jobs.AudienceProber
	// WithoutGuard leaves guard.captf.io out of the chain (the Lease and Job guards stay), so
	// a simulation judges what the engine alone writes: the guard is defence in depth.
	WithoutGuard bool
}

// Chain is the admission chain. Create it with New, give its Mutate and Validate to the store's
// options, then Bind it to the store's client before the first write.
type Chain struct {
	opts   Options
	scheme *runtime.Scheme

	mu       sync.Mutex
	mutating []hook
	checking []hook
	uids     uint64
}

// hook is one webhook of config/webhook: its name, which requests reach it, its handler.
type hook struct {
	name    string
	matches func(a apiserver.Admission) bool
	handler cradmission.Handler
}

// New returns an unbound chain for the kinds of scheme.
func New(scheme *runtime.Scheme, o Options) *Chain {
	if o.Manager == "" {
		o.Manager = DefaultManager
	}
	if o.Audiences == nil {
		o.Audiences = acceptAll{}
	}
	return &Chain{opts: o, scheme: scheme}
}

// acceptAll accepts every audience.
type acceptAll struct{}

func (acceptAll) AcceptsAudience(context.Context, string) (bool, error) { return true, nil }

// Bind builds the webhooks over api, the store's client (their live reader), as webhooks.Setup
// builds them over the manager's API reader.
func (c *Chain) Bind(api client.Client) {
	leases := c.opts.Leases
	if leases == nil {
		leases = runlease.New(api, api, runlease.DefaultOptions())
	}
	ids := webhooks.Identities{Manager: c.opts.Manager}
	override := &webhooks.Override{Groups: append([]string(nil), c.opts.OverrideGroups...)}
	approvals := &webhooks.PlanApprovals{Approvers: webhooks.Approvers{Groups: append([]string(nil), c.opts.PlanApproverGroups...)}}
	aud := c.opts.Audiences
	s := c.scheme

	var mutating, checking []hook
	for _, k := range []struct {
		kind      string
		defaulter *cradmission.Webhook
		validator *cradmission.Webhook
		managedBy bool
	}{
		{infrav1.TerraformClusterKind, cradmission.WithDefaulter(s, webhooks.Defaulter[*infrav1.TerraformCluster]{}),
			cradmission.WithValidator(s, webhooks.Validator[*infrav1.TerraformCluster]{Kind: infrav1.TerraformClusterKind, Accounts: api, Audiences: aud, Secrets: api}), true},
		{infrav1.TerraformMachineKind, cradmission.WithDefaulter(s, webhooks.Defaulter[*infrav1.TerraformMachine]{}),
			cradmission.WithValidator(s, webhooks.Validator[*infrav1.TerraformMachine]{Kind: infrav1.TerraformMachineKind, Accounts: api, Audiences: aud, Secrets: api}), false},
		{infrav1.TerraformMachinePoolKind, cradmission.WithDefaulter(s, webhooks.Defaulter[*infrav1.TerraformMachinePool]{}),
			cradmission.WithValidator(s, webhooks.Validator[*infrav1.TerraformMachinePool]{Kind: infrav1.TerraformMachinePoolKind, Accounts: api, Audiences: aud, Secrets: api}), false},
	} {
		mutating = append(mutating, hook{name: "default." + strings.ToLower(k.kind) + ".captf.io", matches: on(k.kind, false, apiserver.VerbCreate), handler: k.defaulter})
		checking = append(checking,
			hook{name: "validate." + strings.ToLower(k.kind) + ".captf.io", matches: on(k.kind, false, apiserver.VerbCreate), handler: k.validator},
			hook{name: "validate-update." + strings.ToLower(k.kind) + ".captf.io", matches: both(on(k.kind, false, apiserver.VerbUpdate, apiserver.VerbPatch), specChangeOfLiveObject(k.managedBy)), handler: k.validator})
	}
	guard := &webhooks.Guard{Reader: api, Leases: leases, Override: override, Identities: ids, Approvals: approvals}
	guards := []hook{
		{name: "guard.captf.io", matches: anyOf(
			on(infrav1.TerraformClusterKind, true, apiserver.VerbCreate, apiserver.VerbUpdate, apiserver.VerbPatch),
			on(infrav1.TerraformMachineKind, true, apiserver.VerbCreate, apiserver.VerbUpdate, apiserver.VerbPatch),
			on(infrav1.TerraformMachinePoolKind, true, apiserver.VerbCreate, apiserver.VerbUpdate, apiserver.VerbPatch)), handler: guard},
		{name: "lease-guard.captf.io", matches: both(onBuiltin("coordination.k8s.io", "Lease", apiserver.VerbUpdate, apiserver.VerbPatch, apiserver.VerbDelete),
			labelIn(infrav1.LeaseLabel, "run", "cluster")), handler: &webhooks.LeaseGuard{Leases: leases, Identities: ids, Override: override}},
		{name: "job-guard.captf.io", matches: both(onBuiltin("batch", "Job", apiserver.VerbUpdate, apiserver.VerbPatch),
			labelIn(infrav1.ManagedLabel, "true")), handler: &webhooks.JobGuard{Identities: ids, Override: override}},
	}
	if c.opts.WithoutGuard {
		guards = guards[1:]
	}
	checking = append(guards, checking...)
	checking = append(checking, templateHooks(s, api, aud)...)
	c.mu.Lock()
	c.mutating, c.checking = mutating, checking
	c.mu.Unlock()
}

// templateHooks are the spec validation webhooks of the three template kinds and of
// TerraformPlanPolicy, as webhooks.Setup registers them.
func templateHooks(s *runtime.Scheme, api client.Client, aud jobs.AudienceProber) []hook {
	var checking []hook
	for _, t := range []struct {
		kind string
		v    *cradmission.Webhook
	}{
		{"TerraformClusterTemplate", cradmission.WithValidator(s, webhooks.TemplateValidator[*infrav1.TerraformClusterTemplate]{Kind: "TerraformClusterTemplate",
			Spec: func(t *infrav1.TerraformClusterTemplate) *infrav1.TerraformSpec {
				return &t.Spec.Template.Spec.TerraformSpec
			},
			Annotations: func(t *infrav1.TerraformClusterTemplate) map[string]string {
				return t.Spec.Template.ObjectMeta.Annotations
			},
			Audiences: aud, Secrets: api, Identities: api})},
		{"TerraformMachineTemplate", cradmission.WithValidator(s, webhooks.TemplateValidator[*infrav1.TerraformMachineTemplate]{Kind: "TerraformMachineTemplate",
			Spec: func(t *infrav1.TerraformMachineTemplate) *infrav1.TerraformSpec {
				return &t.Spec.Template.Spec.TerraformSpec
			},
			Annotations: func(t *infrav1.TerraformMachineTemplate) map[string]string {
				return t.Spec.Template.ObjectMeta.Annotations
			},
			Contract: func(t *infrav1.TerraformMachineTemplate) (string, []string) {
				return t.Spec.Template.Spec.ProviderID, nil
			},
			Audiences: aud, Secrets: api, Identities: api})},
		{"TerraformMachinePoolTemplate", cradmission.WithValidator(s, webhooks.TemplateValidator[*infrav1.TerraformMachinePoolTemplate]{Kind: "TerraformMachinePoolTemplate",
			Spec: func(t *infrav1.TerraformMachinePoolTemplate) *infrav1.TerraformSpec {
				return &t.Spec.Template.Spec.TerraformSpec
			},
			Annotations: func(t *infrav1.TerraformMachinePoolTemplate) map[string]string {
				return t.Spec.Template.ObjectMeta.Annotations
			},
			Contract: func(t *infrav1.TerraformMachinePoolTemplate) (string, []string) {
				return "", t.Spec.Template.Spec.ProviderIDList
			},
			Audiences: aud, Secrets: api, Identities: api})},
		{webhooks.TerraformPlanPolicyKind, cradmission.WithValidator(s, webhooks.PlanPolicyValidator{})},
	} {
		checking = append(checking,
			hook{name: "validate." + strings.ToLower(t.kind) + ".captf.io", matches: on(t.kind, false, apiserver.VerbCreate), handler: t.v},
			hook{name: "validate-update." + strings.ToLower(t.kind) + ".captf.io", matches: both(on(t.kind, false, apiserver.VerbUpdate, apiserver.VerbPatch), specChangeOfLiveObject(false)), handler: t.v})
	}
	return checking
}

// Mutate is the mutating chain (apiserver.Options.Mutate): each matching defaulter's patch is
// applied to a.Object in turn.
func (c *Chain) Mutate(ctx context.Context, a *apiserver.Admission) error {
	c.mu.Lock()
	hooks := c.mutating
	c.mu.Unlock()
	for _, h := range hooks {
		if !h.matches(*a) {
			continue
		}
		req, err := c.request(ctx, *a)
		if err != nil {
			return err
		}
		resp := h.handler.Handle(ctx, req)
		if !resp.Allowed {
			return denied(h.name, resp)
		}
		if len(resp.Patches) == 0 {
			continue
		}
		if err := applyPatches(a.Object, req.Object.Raw, resp); err != nil {
			return apierrors.NewInternalError(fmt.Errorf("admission webhook %q: %w", h.name, err))
		}
	}
	return nil
}

// Validate is the validating chain (apiserver.Options.Validate): the first matching webhook
// that denies refuses the write.
func (c *Chain) Validate(ctx context.Context, a apiserver.Admission) error {
	c.mu.Lock()
	hooks, bound := c.checking, c.mutating != nil
	c.mu.Unlock()
	if !bound {
		return apierrors.NewInternalError(errors.New("test/sim/admission: the chain is not bound to a client (Chain.Bind)"))
	}
	for _, h := range hooks {
		if !h.matches(a) {
			continue
		}
		req, err := c.request(ctx, a)
		if err != nil {
			return err
		}
		if resp := h.handler.Handle(ctx, req); !resp.Allowed {
			return denied(h.name, resp)
		}
	}
	return nil
}

// request builds the admission.Request a webhook receives for a.
func (c *Chain) request(ctx context.Context, a apiserver.Admission) (cradmission.Request, error) {
	c.mu.Lock()
	c.uids++
	uid := c.uids
	c.mu.Unlock()
	op := admissionv1.Update
	switch a.Verb {
	case apiserver.VerbCreate:
		op = admissionv1.Create
	case apiserver.VerbDelete, apiserver.VerbDeleteAllOf:
		op = admissionv1.Delete
	}
	plural, _ := meta.UnsafeGuessKindToResource(a.Kind)
	gvk := metav1.GroupVersionKind{Group: a.Kind.Group, Version: a.Kind.Version, Kind: a.Kind.Kind}
	gvr := metav1.GroupVersionResource{Group: plural.Group, Version: plural.Version, Resource: plural.Resource}
	dryRun := false
	req := cradmission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:  types.UID("sim-admission-" + strconv.FormatUint(uid, 10)),
		Kind: gvk, Resource: gvr, SubResource: a.Subresource,
		RequestKind: &gvk, RequestResource: &gvr, RequestSubResource: a.Subresource,
		Name: a.Name, Namespace: a.Namespace, Operation: op, UserInfo: UserFrom(ctx), DryRun: &dryRun,
	}}
	var err error
	if req.Object.Raw, err = c.raw(a.Object, a); err != nil {
		return req, err
	}
	if req.OldObject.Raw, err = c.raw(a.OldObject, a); err != nil {
		return req, err
	}
	return req, nil
}

// raw is an object's JSON with its apiVersion and kind, as a webhook receives it.
func (c *Chain) raw(obj client.Object, a apiserver.Admission) ([]byte, error) {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return nil, nil
	}
	cp, _ := obj.DeepCopyObject().(client.Object)
	cp.GetObjectKind().SetGroupVersionKind(a.Kind)
	data, err := json.Marshal(cp)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("encode %s for admission: %w", a.Kind.Kind, err))
	}
	return data, nil
}

// applyPatches applies a mutating webhook's JSON patch to obj (whose JSON was raw).
func applyPatches(obj client.Object, raw []byte, resp cradmission.Response) error {
	ops, err := json.Marshal(resp.Patches)
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	p, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		return fmt.Errorf("decode patch: %w", err)
	}
	out, err := p.Apply(raw)
	if err != nil {
		return fmt.Errorf("apply patch: %w", err)
	}
	fresh := reflect.New(reflect.TypeOf(obj).Elem())
	if err := json.Unmarshal(out, fresh.Interface()); err != nil {
		return fmt.Errorf("decode patched object: %w", err)
	}
	reflect.ValueOf(obj).Elem().Set(fresh.Elem())
	obj.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind().GroupVersion().WithKind(""))
	return nil
}

// denied is the error the real API server returns for a webhook's denial
// (k8s.io/apiserver's webhookerrors.ToStatusErr): the response's status, at least 400, its
// message prefixed with the webhook's name.
func denied(name string, resp cradmission.Response) error {
	st := resp.Result
	if st == nil {
		st = &metav1.Status{}
	}
	out := *st.DeepCopy()
	if out.Code < http.StatusBadRequest {
		out.Code = http.StatusBadRequest
	}
	if out.Status == "" || out.Status == metav1.StatusSuccess {
		out.Status = metav1.StatusFailure
	}
	prefix := fmt.Sprintf("admission webhook %q denied the request", name)
	switch {
	case out.Message != "":
		out.Message = prefix + ": " + out.Message
	case out.Reason != "":
		out.Message = prefix + ": " + string(out.Reason)
	default:
		out.Message = prefix + " without explanation"
	}
	return &apierrors.StatusError{ErrStatus: out}
}

// on matches the verbs of a CAPTF kind (of its /status subresource too when status is true).
func on(kind string, status bool, verbs ...apiserver.Verb) func(apiserver.Admission) bool {
	return func(a apiserver.Admission) bool {
		if a.Kind.Group != infrav1.GroupVersion.Group || a.Kind.Kind != kind {
			return false
		}
		if a.Subresource != "" && (a.Subresource != "status" || !status) {
			return false
		}
		return verbIn(a.Verb, verbs)
	}
}

// onBuiltin matches the verbs of a built-in kind's main resource.
func onBuiltin(group, kind string, verbs ...apiserver.Verb) func(apiserver.Admission) bool {
	return func(a apiserver.Admission) bool {
		return a.Kind.Group == group && a.Kind.Kind == kind && a.Subresource == "" && verbIn(a.Verb, verbs)
	}
}

func verbIn(v apiserver.Verb, verbs []apiserver.Verb) bool {
	for _, x := range verbs {
		if x == v {
			return true
		}
	}
	return false
}

// labelIn is an objectSelector "key In values": it matches when the new or the old object
// carries it (the API server's rule for updates).
func labelIn(key string, values ...string) func(apiserver.Admission) bool {
	return func(a apiserver.Admission) bool {
		for _, o := range []client.Object{a.Object, a.OldObject} {
			if o == nil || reflect.ValueOf(o).IsNil() {
				continue
			}
			v, ok := o.GetLabels()[key]
			if !ok {
				continue
			}
			for _, w := range values {
				if v == w {
					return true
				}
			}
		}
		return false
	}
}

// specChangeOfLiveObject is config/webhook/patches/validation.yaml's matchCondition: the new
// object is not deleting and its spec changed, or captf.io/target-operation was set or changed,
// or (TerraformCluster) cluster.x-k8s.io/managed-by was added.
func specChangeOfLiveObject(managedBy bool) func(apiserver.Admission) bool {
	return func(a apiserver.Admission) bool {
		if a.Object == nil || a.OldObject == nil || a.Object.GetDeletionTimestamp() != nil {
			return false
		}
		ns, os := reflect.ValueOf(a.Object).Elem().FieldByName("Spec"), reflect.ValueOf(a.OldObject).Elem().FieldByName("Spec")
		if !ns.IsValid() || !os.IsValid() || !apiequality.Semantic.DeepEqual(ns.Interface(), os.Interface()) {
			return true
		}
		newA, oldA := a.Object.GetAnnotations(), a.OldObject.GetAnnotations()
		if v, ok := newA[infrav1.TargetOperationAnnotation]; ok {
			if w, had := oldA[infrav1.TargetOperationAnnotation]; !had || w != v {
				return true
			}
		}
		if managedBy {
			_, now := newA["cluster.x-k8s.io/managed-by"]
			_, before := oldA["cluster.x-k8s.io/managed-by"]
			return now && !before
		}
		return false
	}
}

func both(f, g func(apiserver.Admission) bool) func(apiserver.Admission) bool {
	return func(a apiserver.Admission) bool { return f(a) && g(a) }
}

func anyOf(fs ...func(apiserver.Admission) bool) func(apiserver.Admission) bool {
	return func(a apiserver.Admission) bool {
		for _, f := range fs {
			if f(a) {
				return true
			}
		}
		return false
	}
}

// userKey carries the request's user in a context.
type userKey struct{}

// WithUser returns a context whose requests the chain attributes to user.
func WithUser(ctx context.Context, user authenticationv1.UserInfo) context.Context {
	return context.WithValue(ctx, userKey{}, user)
}

// UserFrom is the user WithUser put in ctx, else DefaultUser.
func UserFrom(ctx context.Context) authenticationv1.UserInfo {
	if u, ok := ctx.Value(userKey{}).(authenticationv1.UserInfo); ok {
		return u
	}
	return DefaultUser
}

// As returns a client whose every request carries user (the manager's client: As(c,
// ManagerUser(...))).
func As(c client.WithWatch, user authenticationv1.UserInfo) client.WithWatch {
	return &asUser{WithWatch: c, user: user}
}

// Manager is the UserInfo of the manager's username.
func Manager(username string) authenticationv1.UserInfo {
	return authenticationv1.UserInfo{Username: username, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
}

type asUser struct {
	client.WithWatch
	user authenticationv1.UserInfo
}

func (c *asUser) with(ctx context.Context) context.Context { return WithUser(ctx, c.user) }

func (c *asUser) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.WithWatch.Create(c.with(ctx), obj, opts...)
}

func (c *asUser) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.WithWatch.Update(c.with(ctx), obj, opts...)
}

func (c *asUser) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.WithWatch.Patch(c.with(ctx), obj, patch, opts...)
}

func (c *asUser) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return c.WithWatch.Delete(c.with(ctx), obj, opts...)
}

func (c *asUser) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	return c.WithWatch.DeleteAllOf(c.with(ctx), obj, opts...)
}

func (c *asUser) Status() client.SubResourceWriter { return c.SubResource("status") }

func (c *asUser) SubResource(name string) client.SubResourceClient {
	return &asUserSub{SubResourceClient: c.WithWatch.SubResource(name), user: c.user}
}

type asUserSub struct {
	client.SubResourceClient
	user authenticationv1.UserInfo
}

func (c *asUserSub) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	return c.SubResourceClient.Create(WithUser(ctx, c.user), obj, sub, opts...)
}

func (c *asUserSub) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return c.SubResourceClient.Update(WithUser(ctx, c.user), obj, opts...)
}

func (c *asUserSub) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return c.SubResourceClient.Patch(WithUser(ctx, c.user), obj, patch, opts...)
}
