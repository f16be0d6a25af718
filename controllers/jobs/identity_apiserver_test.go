package jobs

import (
	"context"
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

var _ = Describe("The identity token audience check", func() {
	withAudience := func(aud string) *infrav1.TerraformSpec {
		return &infrav1.TerraformSpec{Job: infrav1.JobPolicy{IdentityToken: &infrav1.IdentityToken{Audience: aud}}}
	}

	It("refuses an audience the API server accepts, found by a TokenReview and not by the list", func() {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "audience-"}}
		Expect(k8s.Create(ctx, ns)).To(Succeed())
		probe := AudienceProbe{Client: k8s, Account: types.NamespacedName{Namespace: ns.Name, Name: DefaultAudienceProbeAccountName}, CreateAccount: true}

		By("the probe account is created on first use, without token automount")
		reason, _, err := CheckIdentityAudience(ctx, probe, withAudience("sts.amazonaws.com"))
		Expect(err).NotTo(HaveOccurred())
		Expect(reason).To(BeEmpty(), "a cloud audience the API server does not accept is allowed")
		sa := &corev1.ServiceAccount{}
		Expect(k8s.Get(ctx, probe.Account, sa)).To(Succeed())
		Expect(sa.AutomountServiceAccountToken).To(Equal(ptr.To(false)))

		By("the API server's own audience (envtest's issuer URL, in no list) is refused by the TokenReview")
		auds, err := envtest.APIServerAudiences(ctx, k8s, probe.Account)
		Expect(err).NotTo(HaveOccurred())
		for _, aud := range auds {
			r, _ := IdentityAudienceRefusal(aud)
			Expect(r).To(BeEmpty(), "the test needs an accepted audience the fast filter does not know: %s", aud)
			reason, msg, err := CheckIdentityAudience(ctx, probe, withAudience(aud))
			Expect(err).NotTo(HaveOccurred())
			Expect(reason).To(Equal(infrav1.IdentityAudienceRefusedReason), "audience %s", aud)
			Expect(msg).To(And(ContainSubstring(`"`+aud+`"`), ContainSubstring("TokenReview"), ContainSubstring("state Secret")))
		}

		By("a well-known in-cluster audience is refused by the fast filter, without asking")
		reason, msg, err := CheckIdentityAudience(ctx, failingProber{}, withAudience("https://kubernetes.default.svc"))
		Expect(err).NotTo(HaveOccurred())
		Expect(reason).To(Equal(infrav1.IdentityAudienceRefusedReason))
		Expect(msg).To(ContainSubstring("well-known"))

		By("no identity token: nothing to ask")
		reason, _, err = CheckIdentityAudience(ctx, failingProber{}, &infrav1.TerraformSpec{})
		Expect(err).NotTo(HaveOccurred())
		Expect(reason).To(BeEmpty())

		By("a probe that cannot ask is an error, never an allowance")
		_, _, err = CheckIdentityAudience(ctx, failingProber{}, withAudience("sts.amazonaws.com"))
		Expect(err).To(MatchError(ContainSubstring("check identity token audience")))
	})
})

// failingProber fails every question, so a test shows what is decided without asking.
type failingProber struct{}

func (failingProber) AcceptsAudience(ctx context.Context, _ string) (bool, error) {
	return false, errors.New("the API server cannot be asked")
}
