package webhooks

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// serviceAccountPrefix starts the username of every ServiceAccount.
const serviceAccountPrefix = "system:serviceaccount:"

// GarbageCollectorUsers are the identities Kubernetes' garbage collector writes as: its own
// ServiceAccount when kube-controller-manager runs with --use-service-account-credentials
// (the kubeadm default), else the controller manager's user. The Job guard lets them drop a
// managed Job's owner references (what the collector does when an owner is deleted with the
// orphan propagation policy), and nothing else.
var GarbageCollectorUsers = []string{
	"system:serviceaccount:kube-system:generic-garbage-collector",
	"system:kube-controller-manager",
}

// ManagerUsername turns the manager flag --manager-service-account into the username the API
// server gives the manager's requests. It accepts "<namespace>/<name>" (a ServiceAccount) or
// the full username "system:serviceaccount:<namespace>:<name>". An empty value stays empty:
// Setup then looks at the Pod's environment (ServiceAccountFromEnv), and failing that asks the
// API server who the manager is (WhoAmI).
func ManagerUsername(flag string) (string, error) {
	v := strings.TrimSpace(flag)
	if v == "" {
		return "", nil
	}
	var ns, name string
	if rest, ok := strings.CutPrefix(v, serviceAccountPrefix); ok {
		ns, name, ok = strings.Cut(rest, ":")
		if !ok {
			return "", fmt.Errorf("manager service account %q: want system:serviceaccount:<namespace>:<name>", flag)
		}
	} else {
		var ok bool
		ns, name, ok = strings.Cut(v, "/")
		if !ok {
			return "", fmt.Errorf("manager service account %q: want <namespace>/<name> or system:serviceaccount:<namespace>:<name>", flag)
		}
	}
	for _, part := range []string{ns, name} {
		if errs := validation.IsDNS1123Subdomain(part); len(errs) > 0 {
			return "", fmt.Errorf("manager service account %q: %q: %s", flag, part, strings.Join(errs, "; "))
		}
	}
	return serviceAccountPrefix + ns + ":" + name, nil
}

// ServiceAccountNamespace is the namespace of the ServiceAccount the manager flag
// --manager-service-account names, or "" when it names none (or cannot be read).
func ServiceAccountNamespace(flag string) string {
	user, err := ManagerUsername(flag)
	if err != nil || user == "" {
		return ""
	}
	ns, _, _ := strings.Cut(strings.TrimPrefix(user, serviceAccountPrefix), ":")
	return ns
}

// WhoAmI asks the API server which user cfg authenticates as (a SelfSubjectReview, which every
// authenticated user may create). In a Pod that is its ServiceAccount's username, whatever
// credential the manager was given; it is exactly what admission requests carry as
// userInfo.username.
func WhoAmI(ctx context.Context, cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("who am i: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("who am i: self subject review: %w", err)
	}
	if r.Status.UserInfo.Username == "" {
		return "", fmt.Errorf("who am i: the API server returned no username")
	}
	return r.Status.UserInfo.Username, nil
}

// The environment variables config/manager sets from the downward API: the Pod's namespace and
// ServiceAccount. Setup takes the manager's identity from them when no flag names it.
const (
	EnvPodNamespace      = "POD_NAMESPACE"
	EnvPodServiceAccount = "POD_SERVICE_ACCOUNT"
)

// ServiceAccountFromEnv returns "<namespace>/<name>" from EnvPodNamespace and
// EnvPodServiceAccount, or "" unless both are set. getenv is os.Getenv in the manager.
func ServiceAccountFromEnv(getenv func(string) string) string {
	ns, name := strings.TrimSpace(getenv(EnvPodNamespace)), strings.TrimSpace(getenv(EnvPodServiceAccount))
	if ns == "" || name == "" {
		return ""
	}
	return ns + "/" + name
}

// Identities decides who the Lease and Job guards let through without looking at evidence.
type Identities struct {
	// Manager is the manager's own username (Options.ManagerUsername, or WhoAmI).
	Manager string
}

// IsManager reports whether user is the manager itself. It is one string comparison, so the
// manager's own writes never wait for an evidence read.
func (i Identities) IsManager(user authenticationv1.UserInfo) bool {
	return i.Manager != "" && user.Username == i.Manager
}

// IsGarbageCollector reports whether user is one of GarbageCollectorUsers.
func IsGarbageCollector(user authenticationv1.UserInfo) bool {
	return slices.Contains(GarbageCollectorUsers, user.Username)
}
