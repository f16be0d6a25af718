package e2e_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox"
)

// identityFixture writes testdata/terraformidentity-cluster.yaml with its cluster named name
// into a file of the spec's and returns its path.
func identityFixture(name string) string {
	GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join("testdata", "terraformidentity-cluster.yaml"))
	Expect(err).NotTo(HaveOccurred())
	f := filepath.Join(GinkgoT().TempDir(), name+".yaml")
	Expect(os.WriteFile(f, []byte(strings.ReplaceAll(string(raw), "CLUSTER", name)), 0o600)).To(Succeed())
	return f
}

// lockedBuffer collects output written from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// docs/production.md, "Scoped identities", shows the commands and the refusal of this spec.
var _ = Describe("Scoped identities, with each binary", func() {
	for _, b := range binaries {
		It("a scoped identity reaches the module of an allowed namespace only, with "+b.product, func() {
			path, line, _ := binaryVersion(b)
			By(fmt.Sprintf("the Jobs run %s: %s", line, path))
			// Everything the Jobs and the manager print, to show the value is never in it.
			logs := &lockedBuffer{}
			sb := startSandboxWithManager("identity-"+strings.ToLower(b.product), path, filepath.Join(built, "manager"), func(o *sandbox.Options) {
				o.JobOutput, o.ManagerOutput = io.MultiWriter(o.JobOutput, logs), io.MultiWriter(o.ManagerOutput, logs)
			})
			DeferCleanup(func() { Expect(sb.Stop()).To(Succeed()) })
			const name = "tenant"

			By("the platform: namespaces team-a (labelled as the identity selects) and team-b, the Secret in the manager's namespace, the identity")
			createNamespace(sb, "team-a")
			createNamespace(sb, "team-b")
			kubectl(sb, "label", "namespace", "team-a", "platform.example.com/tenant=team-a")
			raw := make([]byte, 24)
			_, err := rand.Read(raw)
			Expect(err).NotTo(HaveOccurred())
			value := hex.EncodeToString(raw) // never printed: the spec compares digests only
			digest := sha256.Sum256([]byte(value))
			tokenFile := filepath.Join(GinkgoT().TempDir(), "token.txt")
			Expect(os.WriteFile(tokenFile, []byte(value), 0o600)).To(Succeed())
			kubectl(sb, "create", "secret", "generic", "cloud-team-a", "-n", sandbox.ManagerNamespace, "--from-file=token="+tokenFile)
			kubectl(sb, "apply", "-f", filepath.Join("testdata", "terraformidentity.yaml"))

			By("team-a applies, and its module sees CLOUD_TOKEN: the digest in its output is the value's")
			kubectl(sb, "apply", "-n", "team-a", "-f", identityFixture(name))
			o := tc("team-a", name)
			eventuallyReady(sb, o)
			st := stateOf(sb, infrav1.TerraformClusterKind, "team-a", name)
			Expect(st).NotTo(BeNil())
			Expect(st.Outputs).To(HaveKeyWithValue("cloud_token_sha256", HaveField("Value", hex.EncodeToString(digest[:]))))

			By("the value reached the terraform container only, through the per-run identity Secret, which is gone once the Job was counted")
			applies := jobsOf(sb, infrav1.TerraformClusterKind, "team-a", name, infrav1.OperationApply)
			Expect(applies).To(HaveLen(1))
			job := applies[0]
			pod := job.Spec.Template.Spec
			for _, c := range append(append([]corev1.Container(nil), pod.InitContainers...), pod.Containers...) {
				var names []string
				for _, e := range c.Env {
					if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == naming.RunIdentitySecretName(job.Name) {
						names = append(names, e.Name)
					}
				}
				if c.Name == jobs.MainContainer {
					Expect(names).To(ConsistOf("CLOUD_TOKEN"), c.Name)
				} else {
					Expect(names).To(BeEmpty(), c.Name)
				}
			}
			Eventually(func() bool {
				err := sb.Client().Get(ctx, types.NamespacedName{Namespace: "team-a", Name: naming.RunIdentitySecretName(job.Name)}, &corev1.Secret{})
				return apierrors.IsNotFound(err)
			}).Should(BeTrue(), "the per-run identity Secret outlived its counted Job")
			secrets := &corev1.SecretList{}
			Expect(sb.Client().List(ctx, secrets, client.InNamespace("team-a"))).To(Succeed())
			for _, s := range secrets.Items {
				for k, v := range s.Data {
					Expect(strings.Contains(string(v), value)).To(BeFalse(), "Secret team-a/%s key %s holds the identity's value", s.Name, k)
				}
			}

			By("team-b is refused at admission, with the identity, the namespace and what to change")
			out, err := run(sb.Kubeconfig(), "kubectl", "apply", "-n", "team-b", "-f", identityFixture(name))
			Expect(err).To(HaveOccurred(), "team-b's TerraformCluster was admitted:\n%s", out)
			Expect(out).To(And(ContainSubstring(`The TerraformCluster "tenant" is invalid: spec.job.identityRef.name: Forbidden`),
				ContainSubstring("TerraformIdentity cloud-team-a does not allow namespace team-b: its spec.allowedNamespaces.selector does not match the namespace's labels"),
				ContainSubstring("spec.allowedNamespaces.list, or a label its selector matches")))
			AddReportEntry("refused identity reference", strings.TrimSpace(out))
			Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(tc("team-b", name)), tc("team-b", name))).To(Satisfy(apierrors.IsNotFound))

			By("team-a loses the label: the engine refuses the next run with InputsValid=False, IdentityNotAllowed, an event, and no Job")
			kubectl(sb, "label", "namespace", "team-a", "platform.example.com/tenant-")
			kubectl(sb, "patch", "-n", "team-a", "terraformcluster", name, "--type=merge", "-p", `{"spec":{"variables":{"generation":2}}}`)
			Eventually(func(g Gomega) {
				g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
				c := meta.FindStatusCondition(o.Status.Conditions, infrav1.InputsValidCondition)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(c.Reason).To(Equal(infrav1.IdentityNotAllowedReason), c.Message)
				g.Expect(c.Message).To(ContainSubstring("TerraformIdentity cloud-team-a does not allow namespace team-a"))
			}).Should(Succeed())
			Expect(kubectl(sb, "get", "-n", "team-a", "events", "--field-selector", "reason="+infrav1.IdentityNotAllowedReason)).To(ContainSubstring("cloud-team-a"))
			Consistently(func() int {
				return len(jobsOf(sb, infrav1.TerraformClusterKind, "team-a", name, infrav1.OperationApply))
			}, 3*time.Second).Should(Equal(1))

			By("the value was never printed: not by the Jobs (whose output shows the digest), not by the manager")
			Expect(logs.String()).To(ContainSubstring(hex.EncodeToString(digest[:])), "the Jobs' output was not captured")
			Expect(strings.Contains(logs.String(), value)).To(BeFalse(), "the identity's value was printed")
			fmt.Printf("binary check: e2e scoped identity passed with %s (%s)\n", line, path)
		})
	}
})
