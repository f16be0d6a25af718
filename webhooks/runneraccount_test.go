package webhooks_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// warningRecorder keeps the admission warnings a client receives.
type warningRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen
	w.seen = nil
	return out
}

var _ = Describe("A ServiceAccount named by spec.job.serviceAccountName", func() {
	It("is refused at admission unless it opted in with captf.io/runner=true; a missing one is a warning", func() {
		warnings := &warningRecorder{}
		cfg := rest.CopyConfig(env.Config)
		cfg.WarningHandler = warnings
		c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
		ns := newNamespace()
		Expect(admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workload"}})).To(Succeed())
		Expect(admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "runner",
			Labels: map[string]string{infrav1.RunnerAccountLabel: "true"}}})).To(Succeed())
		withAccount := func(kind, name, account string) client.Object {
			o := newObject(kind, ns, name)
			o.(interface{ GetTerraformSpec() *infrav1.TerraformSpec }).GetTerraformSpec().Job.ServiceAccountName = account
			return o
		}

		for _, kind := range []string{infrav1.TerraformClusterKind, infrav1.TerraformMachineKind, infrav1.TerraformMachinePoolKind} {
			short := strings.ToLower(kind)
			By(kind + ": an account that exists without the label is refused, with the command that fixes it")
			err := c.Create(ctx, withAccount(kind, short+"-a", "workload"))
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring("spec.job.serviceAccountName: Forbidden"))
			Expect(err.Error()).To(ContainSubstring("kubectl label serviceaccount workload -n " + ns + " captf.io/runner=true"))

			By(kind + ": an opted-in account is admitted without a warning")
			warnings.take()
			Expect(c.Create(ctx, withAccount(kind, short+"-b", "runner"))).To(Succeed())
			Expect(warnings.take()).To(BeEmpty())

			By(kind + ": a missing account is admitted with a warning (it may be applied next)")
			Expect(c.Create(ctx, withAccount(kind, short+"-c", "later"))).To(Succeed())
			Expect(warnings.take()).To(ContainElement(And(ContainSubstring("ServiceAccount "+ns+"/later, which does not exist"),
				ContainSubstring(infrav1.RunnerAccountMissingReason))))

			By(kind + ": switching an object to an account without the label is refused; other updates are not checked again")
			o := withAccount(kind, short+"-b", "workload")
			Expect(c.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			o.(interface{ GetTerraformSpec() *infrav1.TerraformSpec }).GetTerraformSpec().Job.ServiceAccountName = "workload"
			err = c.Update(ctx, o)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring("does not carry the label captf.io/runner=true"))
		}

		By("the label added: the same account is admitted")
		sa := &corev1.ServiceAccount{}
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "workload"}, sa)).To(Succeed())
		sa.Labels = map[string]string{infrav1.RunnerAccountLabel: "true"}
		Expect(admin.Update(ctx, sa)).To(Succeed())
		Expect(c.Create(ctx, withAccount(infrav1.TerraformMachineKind, "m-after", "workload"))).To(Succeed())
	})
})

// unreadable fails every read, as an API server outage would.
type unreadable struct{ client.Reader }

func (unreadable) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("connection refused")
}

func TestAnUnreadableRunnerAccountIsAWarningNotARefusal(t *testing.T) {
	v := webhooks.Validator[*infrav1.TerraformMachine]{Kind: infrav1.TerraformMachineKind, Accounts: unreadable{}}
	m := objects.Machine("prod", "m").Module("example.com/module:1").
		Spec(func(s *infrav1.TerraformSpec) { s.Job.ServiceAccountName = "team-runner" }).Obj()
	warnings, err := v.ValidateCreate(context.Background(), m)
	if err != nil {
		t.Fatalf("refused although the account could not be read: %v", err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "could not check the ServiceAccount team-runner") ||
		!strings.Contains(warnings[0], "connection refused") {
		t.Fatalf("warnings %q, want one saying the account could not be checked and why", warnings)
	}
}
