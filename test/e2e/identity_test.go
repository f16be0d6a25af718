package e2e_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
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

// identityAudiences lists the audiences of the identity token volume of a Job.
func identityAudiences(job *batchv1.Job) []string {
	var audiences []string
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Name == jobs.VolumeIdentity && v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ServiceAccountToken != nil {
					audiences = append(audiences, s.ServiceAccountToken.Audience)
				}
			}
		}
	}
	return audiences
}

// apiServerOf reads a sandbox's API server URL from its kubeconfig and writes the API server's
// CA into a file of the spec's, as an attacker in a Pod would find both (the in-cluster
// address and the CA every Pod may read).
func apiServerOf(sb target) (server, caFile string) {
	GinkgoHelper()
	cfg, err := clientcmd.LoadFromFile(sb.Kubeconfig())
	Expect(err).NotTo(HaveOccurred())
	kctx := cfg.Contexts[cfg.CurrentContext]
	Expect(kctx).NotTo(BeNil(), "the kubeconfig's current context")
	cluster := cfg.Clusters[kctx.Cluster]
	Expect(cluster).NotTo(BeNil(), "the kubeconfig's cluster %q", kctx.Cluster)
	ca := cluster.CertificateAuthorityData
	if len(ca) == 0 {
		Expect(cluster.CertificateAuthority).NotTo(BeEmpty(), "the kubeconfig names no CA")
		ca, err = os.ReadFile(cluster.CertificateAuthority)
		Expect(err).NotTo(HaveOccurred())
	}
	caFile = filepath.Join(GinkgoT().TempDir(), "ca.crt")
	Expect(os.WriteFile(caFile, ca, 0o600)).To(Succeed())
	return strings.TrimRight(cluster.Server, "/"), caFile
}

// applyHostile applies testdata/identity-exploit.yaml into ns with kubectl: a TerraformCluster
// named name whose identity token has audience aud and whose module GETs the state Secret
// stateSecret with that token, reporting into reportDir. It returns kubectl's output and error.
func applyHostile(sb target, ns, name, aud, stateSecret, reportDir string) (string, error) {
	GinkgoHelper()
	server, caFile := apiServerOf(sb)
	raw, err := os.ReadFile(filepath.Join("testdata", "identity-exploit.yaml"))
	Expect(err).NotTo(HaveOccurred())
	doc := strings.NewReplacer("CLUSTER", name, "AUDIENCE", aud, "API_SERVER", server, "CA_FILE", caFile,
		"STATE_SECRET", stateSecret, "REPORT_DIR", reportDir).Replace(string(raw))
	f := filepath.Join(GinkgoT().TempDir(), "identity-exploit.yaml")
	Expect(os.WriteFile(f, []byte(doc), 0o600)).To(Succeed())
	return run(sb.Kubeconfig(), "kubectl", "apply", "-n", ns, "-f", f)
}

// The exploit runs once with each binary (binaries_test.go), each in an unsafe sandbox of its
// own: what a module can do with the token must not depend on which one runs it.
var _ = Describe("The identity token audience check, end to end", Ordered, func() {
	// manager is built once, with the check off, for every binary's unsafe sandbox.
	var manager string
	BeforeAll(func() {
		manager = buildManagerWithTags(unsafeAudienceTag)
	})

	for _, b := range binaries {
		It("is what stops a hostile module run by "+b.product+": with the check off its identity token reads the object's state Secret; with it on the object is refused and no Job starts", func() {
			hostileModuleSpec(manager, b)
		})
	}
})

// hostileModuleSpec is the end-to-end identity spec with binary b: the exploit in an unsafe
// sandbox that runs b, then the refusal in the shared sandbox.
func hostileModuleSpec(manager string, b binary) {
	GinkgoHelper()
	path, version, _ := binaryVersion(b)
	lower := strings.ToLower(b.product)
	ns, name := "identity-exploit-"+lower, "hostile"
	kind := infrav1.TerraformClusterKind
	stateSecret := naming.StateSecretName(naming.StateSuffix(ns, kind, name))

	By("a manager built with -tags " + unsafeAudienceTag + " (the check off), in a sandbox of its own whose Jobs run " + version)
	began := time.Now()
	unsafe := startSandboxWithManager("unsafe-audience-"+lower, path, manager)
	DeferCleanup(func() { Expect(unsafe.Stop()).To(Succeed()) })
	AddReportEntry("unsafe-audience sandbox start ("+b.product+")", since(began))
	createNamespace(unsafe, ns)
	aud := sandboxAudience(unsafe, ns)
	report := GinkgoT().TempDir()

	By("the hostile object, with the API server's own audience " + aud + ", is admitted and its first apply makes it Ready")
	out, err := applyHostile(unsafe, ns, name, aud, stateSecret, report)
	Expect(err).NotTo(HaveOccurred(), "the unsafe manager admits the audience: %s", out)
	eventuallyReady(unsafe, tc(ns, name))
	first := stateOf(unsafe, kind, ns, name)
	Expect(first).NotTo(BeNil(), "the first apply wrote the state")

	By("the second apply: the module GETs its state Secret from the API server with the identity token")
	before := jobsOf(unsafe, kind, ns, name, infrav1.OperationApply)
	kubectl(unsafe, "patch", "-n", ns, "terraformcluster", name, "--type=merge", "-p", `{"spec":{"variables":{"generation":2}}}`)
	job := eventuallyNew(unsafe, kind, ns, name, infrav1.OperationApply, before)
	Expect(identityAudiences(job)).To(ConsistOf(aud), "the main container gets a token of the API server's own audience")
	eventuallyFinished(unsafe, job)
	eventuallyReady(unsafe, tc(ns, name))

	By("the exploit is real: HTTP 200, and the body is the state Secret, holding this object's state")
	status, err := os.ReadFile(filepath.Join(report, "generation-2.status"))
	Expect(err).NotTo(HaveOccurred(), "the module's report of the second apply")
	Expect(strings.TrimSpace(string(status))).To(Equal("200"), "the module's GET of secret %s/%s with its identity token", ns, stateSecret)
	body, err := os.ReadFile(filepath.Join(report, "generation-2.body"))
	Expect(err).NotTo(HaveOccurred())
	var stolen corev1.Secret
	Expect(json.Unmarshal(body, &stolen)).To(Succeed(), "the body is a Secret: %s", body)
	Expect(stolen.Namespace + "/" + stolen.Name).To(Equal(ns + "/" + stateSecret))
	Expect(stolen.Data).To(HaveKey("tfstate"))
	zr, err := gzip.NewReader(bytes.NewReader(stolen.Data["tfstate"]))
	Expect(err).NotTo(HaveOccurred())
	raw, err := io.ReadAll(zr)
	Expect(err).NotTo(HaveOccurred())
	var st tfState
	Expect(json.Unmarshal(raw, &st)).To(Succeed())
	Expect(st.Lineage).To(Equal(first.Lineage), "the module read this object's own Terraform state")
	Expect(st.Lineage).NotTo(BeEmpty())

	By("with the check on (the shared sandbox, the released build), kubectl is refused, naming the audience and the TokenReview")
	createNamespace(shared, ns)
	sharedAud := sandboxAudience(shared, ns)
	out, err = applyHostile(shared, ns, name, sharedAud, stateSecret, GinkgoT().TempDir())
	Expect(err).To(HaveOccurred(), "kubectl created an object whose identity token the API server accepts: %s", out)
	Expect(out).To(And(ContainSubstring("spec.job.identityToken.audience: Forbidden"), ContainSubstring(sharedAud), ContainSubstring("TokenReview")))

	By("no such TerraformCluster exists, though its Cluster and module do, and no Job of it starts")
	Expect(shared.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-cluster-module"}, &corev1.ConfigMap{})).To(Succeed())
	Expect(shared.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &clusterv1.Cluster{})).To(Succeed())
	Consistently(func(g Gomega) {
		err := shared.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &infrav1.TerraformCluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the TerraformCluster: %v", err)
		g.Expect(jobsOf(shared, kind, ns, name, "")).To(BeEmpty())
	}, 5*time.Second, 250*time.Millisecond).Should(Succeed())
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
		Expect(identityAudiences(job)).To(ConsistOf("sts.amazonaws.com"))
		eventuallyFinished(shared, job)
		eventuallyReady(shared, tc(ns, name))
		o := tc(ns, name)
		Expect(shared.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		Expect(o.Spec.Job.IdentityToken.Audience).To(Equal("sts.amazonaws.com"))
	})
})
