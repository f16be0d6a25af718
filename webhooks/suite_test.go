package webhooks_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

// breakGlassGroup is the override group the suite's webhook manager is configured with;
// approverGroup its plan approver group (and the group the policy's ConfigMap names).
const (
	breakGlassGroup = "captf:breakglass"
	approverGroup   = "captf:approvers"
)

// suiteHooks are the suite webhook manager's flags.
var suiteHooks = hookOptions{overrideGroups: []string{breakGlassGroup}, approverGroups: []string{approverGroup}}

var (
	ctx   context.Context
	env   *envtest.Env
	admin client.Client
	// mgrClient is the manager's own identity (managerServiceAccount): the suite plays the
	// controller's lease and Job writes with it.
	mgrClient client.Client
	mgrConfig *rest.Config
	config    *rendered
	// policy is config/policy as config/default renders it.
	policy  *renderedPolicy
	kubectl string
	hooks   *hookServer
	nsSeq   int
)

func TestWebhooks(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Webhooks (envtest: the real API server calls the webhooks)")
}

var _ = envtest.RegisterSuite(envtest.SuiteOptions{
	Log: true, EventuallyTimeout: 20 * time.Second, PollingInterval: 50 * time.Millisecond,
	// The control plane calls the webhooks as config/webhook configures them.
	Configure: func(o *envtest.Options) {
		var err error
		kubectl, err = kubectlPath()
		Expect(err).NotTo(HaveOccurred(), "the webhook suite renders config/webhook with kubectl and runs it against envtest")
		config, err = renderConfig(kubectl)
		Expect(err).NotTo(HaveOccurred())
		*o, err = controlPlaneOptions(config)
		Expect(err).NotTo(HaveOccurred())
	},
}, func(s *envtest.Suite) {
	env, admin, ctx = s.Env, s.Client, s.Ctx
	var err error
	mgrClient, mgrConfig, err = managerClient(env)
	Expect(err).NotTo(HaveOccurred())
	hooks, err = startHookServer(env.Config, env, suiteHooks)
	Expect(err).NotTo(HaveOccurred())
	// Stopped before the control plane: a spec may have replaced it (restartHooks).
	s.Defer(func() {
		if hooks != nil {
			Expect(hooks.stop()).To(Succeed())
		}
	})
	// The plan-approval policy as config/default installs it, with its ConfigMap written by
	// the manager's own code.
	policy, err = renderPolicy(kubectl)
	Expect(err).NotTo(HaveOccurred())
	Expect(installPolicy(policy, []string{approverGroup})).To(Succeed())
})

// restartHooks replaces the suite's webhook server (after a spec stopped it).
func restartHooks() {
	GinkgoHelper()
	restartHooksWith(suiteHooks)
}

// restartHooksWith replaces the suite's webhook server by one with other flags.
func restartHooksWith(o hookOptions) {
	GinkgoHelper()
	if hooks != nil {
		Expect(hooks.stop()).To(Succeed())
	}
	var err error
	hooks, err = startHookServer(env.Config, env, o)
	Expect(err).NotTo(HaveOccurred())
}

// newNamespace gives each spec its own namespace.
func newNamespace() string {
	GinkgoHelper()
	nsSeq++
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("webhooks-%d", nsSeq)}}
	Expect(admin.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// create creates an object of kind through the webhooks and returns it.
func create(kind, ns, name string) client.Object {
	GinkgoHelper()
	o := newObject(kind, ns, name)
	Expect(admin.Create(ctx, o)).To(Succeed())
	return o
}

// userClient returns a client authenticated as name in groups, allowed to edit the CAPTF
// objects, Leases and Jobs (through a ClusterRole bound to the groups).
func userClient(name string, groups ...string) (client.Client, *rest.Config) {
	GinkgoHelper()
	ensureEditorRole(groups)
	user, err := env.AddUser(ctrlenvtest.User{Name: name, Groups: groups}, nil)
	Expect(err).NotTo(HaveOccurred())
	cfg := user.Config()
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return c, cfg
}

func ensureEditorRole(groups []string) {
	GinkgoHelper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "captf-test-editor"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"infrastructure.cluster.x-k8s.io"}, Resources: []string{
			"terraformclusters", "terraformclusters/status", "terraformmachines", "terraformmachines/status",
			"terraformmachinepools", "terraformmachinepools/status"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "update", "patch", "delete"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "update", "patch", "delete"}},
	}}
	if err := admin.Create(ctx, role); err != nil {
		Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
	}
	for _, g := range groups {
		b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "captf-test-editor-" + sanitize(g)},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: g}}}
		if err := admin.Create(ctx, b); err != nil {
			Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
		}
	}
}

func sanitize(s string) string {
	out := []rune(s)
	for i, r := range out {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			out[i] = '-'
		}
	}
	return string(out)
}
