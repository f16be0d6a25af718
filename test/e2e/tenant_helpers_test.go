package e2e_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/test/sandbox"
)

// The tenants' ClusterRoles the install manifests ship (config/rbac, docs/permissions.md,
// "Tenants"), with the names config/default gives them.
const (
	tenantEditRole = "captf-tenant-edit"
	tenantViewRole = "captf-tenant-view"
)

// tenant is a user who reaches the sandbox only through impersonation and holds only what one
// RoleBinding in one namespace grants: the actors of docs/threat-model.md's attack table. The
// sandbox's administrator impersonates it, as `kubectl --as` does; the API server authenticates
// it as that user in the group system:authenticated and authorizes every request as its own.
type tenant struct {
	sb target
	// User is the impersonated user name; Namespace the one namespace its binding is in; Role
	// the ClusterRole that binding grants.
	User, Namespace, Role string
	client                client.Client
}

// asTenant creates namespace ns (unless it exists) and returns the user tenant-<ns>, bound to
// Kubernetes' built-in ClusterRole edit in it: the threat model's "tenant". On the sandbox,
// edit carries captf-tenant-edit through the clusterrole-aggregation controller.
func asTenant(sb target, ns string) *tenant {
	GinkgoHelper()
	return bindUser(sb, ns, "tenant-"+ns, "edit")
}

// asCAPTFEditor creates namespace ns (unless it exists) and returns the user
// captf-editor-<ns>, bound to captf-tenant-edit alone in it: the threat model's "user with
// only CAPTF's editor role", who reads no Secret.
func asCAPTFEditor(sb target, ns string) *tenant {
	GinkgoHelper()
	return bindUser(sb, ns, "captf-editor-"+ns, tenantEditRole)
}

// bindUser creates namespace ns unless it exists, installs the tenants' ClusterRoles unless
// they exist and waits until the built-in roles carry them, binds user to clusterRole in ns
// (RoleBinding <user>), and returns the user.
func bindUser(sb target, ns, user, clusterRole string) *tenant {
	GinkgoHelper()
	ensureTenantRoles(sb)
	c := sb.Client()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	Expect(c.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	})).To(Succeed())

	cfg, err := clientcmd.BuildConfigFromFlags("", sb.Kubeconfig())
	Expect(err).NotTo(HaveOccurred())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	scheme, err := sandbox.NewScheme()
	Expect(err).NotTo(HaveOccurred())
	tc, err := client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return &tenant{sb: sb, User: user, Namespace: ns, Role: clusterRole, client: tc}
}

// Client is a controller-runtime client that impersonates the user.
func (t *tenant) Client() client.Client { return t.client }

// Kubectl runs kubectl as the user (--as) in its namespace and returns its combined output and
// error, for a spec that expects a refusal.
func (t *tenant) Kubectl(args ...string) (string, error) {
	return run(t.sb.Kubeconfig(), "kubectl", append([]string{"--as=" + t.User, "--namespace=" + t.Namespace}, args...)...)
}

// MustKubectl is Kubectl that fails the spec when kubectl fails.
func (t *tenant) MustKubectl(args ...string) string {
	GinkgoHelper()
	out, err := t.Kubectl(args...)
	Expect(err).NotTo(HaveOccurred(), "kubectl --as=%s %s: %s", t.User, strings.Join(args, " "), out)
	return out
}

// CanI asks the API server, through `kubectl auth can-i` as the user in its namespace, whether
// the user may do verb on resource (more: flags such as --subresource=status).
func (t *tenant) CanI(verb, resource string, more ...string) bool {
	GinkgoHelper()
	out, _ := t.Kubectl(append([]string{"auth", "can-i", verb, resource}, more...)...)
	// kubectl prints yes or no (exit status 0 or 1), after any warning.
	lines := strings.Fields(out)
	Expect(lines).NotTo(BeEmpty(), "kubectl auth can-i %s %s printed nothing", verb, resource)
	answer := lines[len(lines)-1]
	Expect(answer).To(BeElementOf("yes", "no"), "kubectl auth can-i %s %s: %s", verb, resource, out)
	return answer == "yes"
}

var (
	tenantRolesOnce sync.Once
	tenantRoles     []*rbacv1.ClusterRole
	tenantRolesErr  error
)

// renderedTenantRoles renders config/default with bin/kustomize, once per process, and returns
// the ClusterRoles that carry an aggregation label: the tenants' roles as the release ships
// them.
func renderedTenantRoles() []*rbacv1.ClusterRole {
	GinkgoHelper()
	tenantRolesOnce.Do(func() {
		cmd := exec.Command(filepath.Join(binDir, "kustomize"), "build", filepath.Join(repo, "config", "default"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			tenantRolesErr = fmt.Errorf("kustomize build config/default: %w: %s", err, stderr.String())
			return
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
		for {
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				break
			}
			if m["kind"] != "ClusterRole" {
				continue
			}
			var cr rbacv1.ClusterRole
			if tenantRolesErr = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &cr); tenantRolesErr != nil {
				return
			}
			for k := range cr.Labels {
				if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") {
					tenantRoles = append(tenantRoles, &cr)
					break
				}
			}
		}
	})
	Expect(tenantRolesErr).NotTo(HaveOccurred(), "render config/default")
	names := []string{}
	for _, cr := range tenantRoles {
		names = append(names, cr.Name)
	}
	Expect(names).To(ConsistOf(tenantEditRole, tenantViewRole), "the tenants' ClusterRoles of config/default")
	return tenantRoles
}

// ensureTenantRoles installs the tenants' ClusterRoles as config/default renders them (unless
// they exist, as `clusterctl init` would have left them), and waits until the
// clusterrole-aggregation controller copied each one's rules into every built-in role its
// labels name.
func ensureTenantRoles(sb target) {
	GinkgoHelper()
	c := sb.Client()
	for _, cr := range renderedTenantRoles() {
		if err := c.Create(ctx, cr.DeepCopy()); !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		for k := range cr.Labels {
			into, ok := strings.CutPrefix(k, "rbac.authorization.k8s.io/aggregate-to-")
			if !ok {
				continue
			}
			Eventually(func(g Gomega) {
				var builtIn rbacv1.ClusterRole
				g.Expect(c.Get(ctx, types.NamespacedName{Name: into}, &builtIn)).To(Succeed())
				for _, r := range cr.Rules {
					g.Expect(slices.ContainsFunc(builtIn.Rules, func(b rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(b, r) })).
						To(BeTrue(), "ClusterRole %s does not carry %s's rule %v: does kube-controller-manager run the clusterrole-aggregation controller?", into, cr.Name, r)
				}
			}).WithTimeout(30 * time.Second).Should(Succeed())
		}
	}
}

// createTokenSecret creates, through c, the ServiceAccount token Secret ns/name of
// ServiceAccount sa, labelled and holding data, and returns once kube-controller-manager's
// token controller has adopted it (it writes the ServiceAccount's UID into the Secret). That
// controller deletes a token Secret whose ServiceAccount its cache does not hold yet: in a new
// namespace, the one the namespace's "default" ServiceAccount is created for. So the wait is
// for the ServiceAccount first, and a Secret deleted in that race is created again.
func createTokenSecret(sb target, c client.Client, ns, name, sa string, labels, data map[string]string) {
	GinkgoHelper()
	account := &corev1.ServiceAccount{}
	Eventually(func() error {
		return sb.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: sa}, account)
	}).Should(Succeed(), "ServiceAccount %s/%s", ns, sa)
	Eventually(func(g Gomega) {
		key, s := client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{}
		err := sb.Client().Get(ctx, key, s)
		if apierrors.IsNotFound(err) {
			g.Expect(client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
				Labels: labels, Annotations: map[string]string{corev1.ServiceAccountNameKey: sa}},
				Type: corev1.SecretTypeServiceAccountToken, StringData: data}))).To(Succeed())
			err = sb.Client().Get(ctx, key, s)
		}
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Annotations).To(HaveKeyWithValue(corev1.ServiceAccountUIDKey, string(account.UID)),
			"the token controller has not adopted Secret %s/%s", ns, name)
	}).Should(Succeed())
}
