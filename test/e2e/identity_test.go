package e2e_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
)

// sandboxAudience is the sandbox API server's own audience, read as a person would: the "aud"
// claim of a token that asked for none (kubectl create token).
func sandboxAudience(sb target, ns string) string {
	GinkgoHelper()
	kubectl(sb, "create", "serviceaccount", "audience-reader", "-n", ns)
	token := strings.TrimSpace(kubectl(sb, "create", "token", "audience-reader", "-n", ns))
	parts := strings.Split(token, ".")
	Expect(parts).To(HaveLen(3), "a JWT")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	Expect(err).NotTo(HaveOccurred())
	var claims struct {
		Aud []string `json:"aud"`
	}
	Expect(json.Unmarshal(payload, &claims)).To(Succeed())
	Expect(claims.Aud).NotTo(BeEmpty())
	return claims.Aud[0]
}

var _ = Describe("An identity token on the sandbox", func() {
	It("is refused by kubectl when the API server accepts its audience, and runs the apply with a cloud audience's token", func() {
		const ns, name = "identity", "cloudy"
		createNamespace(shared, ns)
		aud := sandboxAudience(shared, ns)
		applyFixture(shared, ns, "cluster.yaml", name, 0)

		By("kubectl patch to the API server's own audience (the sandbox's issuer, in no list) is refused, naming it")
		out, err := run(shared.Kubeconfig(), "kubectl", "patch", "-n", ns, "terraformcluster", name, "--type=merge",
			"-p", `{"spec":{"job":{"identityToken":{"audience":"`+aud+`"}}}}`)
		Expect(err).To(HaveOccurred(), "kubectl set an audience the API server accepts: %s", out)
		Expect(out).To(And(ContainSubstring("spec.job.identityToken.audience: Forbidden"), ContainSubstring(aud), ContainSubstring("TokenReview")))

		By("a well-known in-cluster audience is refused too")
		out, err = run(shared.Kubeconfig(), "kubectl", "patch", "-n", ns, "terraformcluster", name, "--type=merge",
			"-p", `{"spec":{"job":{"identityToken":{"audience":"https://kubernetes.default.svc"}}}}`)
		Expect(err).To(HaveOccurred(), "%s", out)
		Expect(out).To(ContainSubstring("well-known audience of the Kubernetes API server"))

		By("a cloud audience is admitted, and the next apply's main container gets a token of that audience only")
		eventuallyReady(shared, tc(ns, name))
		before := jobsOf(shared, infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)
		kubectl(shared, "patch", "-n", ns, "terraformcluster", name, "--type=merge",
			"-p", `{"spec":{"job":{"identityToken":{"audience":"sts.amazonaws.com"}},"variables":{"generation":2}}}`)
		job := eventuallyNew(shared, infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply, before)
		var audiences []string
		for _, v := range job.Spec.Template.Spec.Volumes {
			if v.Name == jobs.VolumeIdentity {
				for _, s := range v.Projected.Sources {
					if s.ServiceAccountToken != nil {
						audiences = append(audiences, s.ServiceAccountToken.Audience)
					}
				}
			}
		}
		Expect(audiences).To(ConsistOf("sts.amazonaws.com"))
		eventuallyFinished(shared, job)
		eventuallyReady(shared, tc(ns, name))
		o := tc(ns, name)
		Expect(shared.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		Expect(o.Spec.Job.IdentityToken.Audience).To(Equal("sts.amazonaws.com"))
	})
})
