package jobs

import (
	"context"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// DefaultAudienceProbeAccountName names the ServiceAccount AudienceProbe mints its tokens for
// when nothing else is configured. It has no role binding: a token of it grants nothing.
const DefaultAudienceProbeAccountName = "captf-audience-probe"

// probeTokenSeconds is the lifetime of a probe token: the shortest the TokenRequest API
// issues. The token is used for one TokenReview and then dropped.
const probeTokenSeconds int64 = 600

// WellKnownAPIAudiences are audiences that Kubernetes distributions give their API servers
// (the in-cluster service names, which kubeadm and most distributions use as the issuer and
// so as the default --api-audiences). They are a fast first filter only: an audience in this
// list is refused without asking the API server, and every other audience is judged by what
// the API server answers (AudienceProber), since its audiences are its own configuration.
var WellKnownAPIAudiences = []string{
	"kubernetes.default.svc",
	"kubernetes.default.svc.cluster.local",
	"https://kubernetes.default.svc",
	"https://kubernetes.default.svc.cluster.local",
	"https://kubernetes.default.svc:443",
	"https://kubernetes.default.svc.cluster.local:443",
}

// AudienceProber asks the API server whether it authenticates a ServiceAccount token issued
// for an audience.
type AudienceProber interface {
	AcceptsAudience(ctx context.Context, audience string) (bool, error)
}

// AudienceProbe is the AudienceProber that decides by evidence: it requests a short-lived token
// of the audience for Account (TokenRequest) and asks the API server to review it with its own
// default audiences (a TokenReview with no spec.audiences). Authenticated means the API server
// accepts that audience, whichever ServiceAccount the token names: the ServiceAccount token
// authenticator checks the audience against the server's --api-audiences, not per account, so a
// probe account with no permissions answers for the runner's account too.
type AudienceProbe struct {
	// Client creates the TokenRequest (serviceaccounts/token) and the TokenReview; it reads
	// and, with CreateAccount, creates the probe account.
	Client client.Client
	// Account is the ServiceAccount the probe tokens are minted for.
	Account types.NamespacedName
	// CreateAccount creates Account (without token automount, labelled as CAPTF's) when the
	// token request finds it missing. The admission webhook leaves it off: it declares no side
	// effects; the manager creates the account when it starts and the engine when it needs it.
	CreateAccount bool
}

// AcceptsAudience implements AudienceProber.
func (p AudienceProbe) AcceptsAudience(ctx context.Context, audience string) (bool, error) {
	token, err := p.token(ctx, audience)
	if apierrors.IsNotFound(err) && p.CreateAccount {
		if err = createAudienceProbeAccount(ctx, p.Client, p.Account); err != nil {
			return false, err
		}
		token, err = p.token(ctx, audience)
	}
	if err != nil {
		return false, fmt.Errorf("request a token of audience %q for %s: %w", audience, p.Account, err)
	}
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	if err := p.Client.Create(ctx, review); err != nil {
		return false, fmt.Errorf("review a token of audience %q: %w", audience, err)
	}
	// A token the server does not accept comes back unauthenticated, with the reason in
	// status.error; that is the answer, not a failure of the probe.
	return review.Status.Authenticated, nil
}

func (p AudienceProbe) token(ctx context.Context, audience string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: p.Account.Namespace, Name: p.Account.Name}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{audience}, ExpirationSeconds: ptr.To(probeTokenSeconds)}}
	if err := p.Client.SubResource("token").Create(ctx, sa, req); err != nil {
		return "", err
	}
	return req.Status.Token, nil
}

// EnsureAudienceProbeAccount reads the probe ServiceAccount through reader (the API server:
// ServiceAccounts are not cached) and creates it through writer only when it is missing, so a
// manager that restarts over an installed fleet writes nothing.
func EnsureAudienceProbeAccount(ctx context.Context, reader client.Reader, writer client.Writer, account types.NamespacedName) error {
	err := reader.Get(ctx, account, &corev1.ServiceAccount{})
	switch {
	case err == nil:
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("read audience probe account %s: %w", account, err)
	}
	return createAudienceProbeAccount(ctx, writer, account)
}

// createAudienceProbeAccount creates the probe ServiceAccount: no token automount, the label
// app.kubernetes.io/managed-by=captf, and no binding anywhere. AlreadyExists is success.
func createAudienceProbeAccount(ctx context.Context, c client.Writer, account types.NamespacedName) error {
	sa := &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Namespace: account.Namespace, Name: account.Name,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "captf"}},
		AutomountServiceAccountToken: ptr.To(false),
	}
	if err := c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create audience probe account %s: %w", account, err)
	}
	return nil
}

// UnsafeNoAudienceCheckTag is the build tag that turns the audience check off
// (identity_check_unsafe.go): only the end-to-end suite builds a manager with it, to show the
// exploit the check prevents. No release is built with it.
const UnsafeNoAudienceCheckTag = "captf_unsafe_no_audience_check"

// IdentityAudienceRefusal is the fast first filter of CheckIdentityAudience, pure: an empty
// audience or one of WellKnownAPIAudiences is refused with IdentityAudienceRefusedReason.
func IdentityAudienceRefusal(audience string) (reason, message string) {
	if audienceCheckDisabled {
		// Only in a test build (captf_unsafe_no_audience_check, identity_check_unsafe.go).
		return "", ""
	}
	a := strings.TrimSpace(audience)
	for _, known := range WellKnownAPIAudiences {
		if strings.EqualFold(a, known) || strings.EqualFold(strings.TrimSuffix(a, "/"), known) {
			return infrav1.IdentityAudienceRefusedReason, audienceMessage(audience, "it is a well-known audience of the Kubernetes API server")
		}
	}
	return "", ""
}

// CheckIdentityAudience judges spec.job.identityToken: "" when the object sets none, or when
// its audience is neither a well-known API server audience nor accepted by the API server
// (prober); else IdentityAudienceRefusedReason and a message that names the audience and says
// why. A token the API server accepts would hand module code a working credential of the
// Job's ServiceAccount, whose Role reads and writes the object's state Secret past the state
// channel. The admission webhook and the engine (before every Job) both call it. Both it and
// IdentityAudienceRefusal refuse nothing in a binary built with the test-only build tag
// captf_unsafe_no_audience_check (identity_check_unsafe.go), which no release uses.
func CheckIdentityAudience(ctx context.Context, prober AudienceProber, spec *infrav1.TerraformSpec) (reason, message string, err error) {
	id := spec.Job.IdentityToken
	if id == nil || audienceCheckDisabled {
		// audienceCheckDisabled is true only in a test build (captf_unsafe_no_audience_check,
		// identity_check_unsafe.go): no released binary skips the check.
		return "", "", nil
	}
	if reason, message = IdentityAudienceRefusal(id.Audience); reason != "" {
		return reason, message, nil
	}
	accepted, err := prober.AcceptsAudience(ctx, id.Audience)
	if err != nil {
		return "", "", fmt.Errorf("check identity token audience: %w", err)
	}
	if accepted {
		return infrav1.IdentityAudienceRefusedReason, audienceMessage(id.Audience,
			"the Kubernetes API server authenticates ServiceAccount tokens of that audience (a TokenReview of a probe token succeeded)"), nil
	}
	return "", "", nil
}

func audienceMessage(audience, why string) string {
	return fmt.Sprintf("spec.job.identityToken.audience %q is refused: %s, so the token would be a Kubernetes credential in the hands of module code "+
		"(it could read and write this object's state Secret past the state channel). "+
		"Set the audience your cloud provider expects (for example sts.amazonaws.com), or remove spec.job.identityToken", audience, why)
}
