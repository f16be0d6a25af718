package channel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

var (
	env       *envtest.Env
	k8s       client.Client
	clientset *kubernetes.Clientset
	ctx       context.Context
	namespace string
	caFile    string
	objectSeq atomic.Int64
)

func TestChannelAgainstAPIServer(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "state channel (envtest)")
}

var _ = envtest.RegisterSuite(envtest.SuiteOptions{}, func(s *envtest.Suite) {
	env, k8s, ctx = s.Env, s.Client, s.Ctx
	var err error
	clientset, err = kubernetes.NewForConfig(env.Config)
	Expect(err).NotTo(HaveOccurred())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "channel-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	namespace = ns.Name
	caFile = filepath.Join(GinkgoT().TempDir(), "ca.crt")
	Expect(os.WriteFile(caFile, env.Config.CAData, 0o600)).To(Succeed())
})

// tfObject is one TerraformCluster's state as the controller prepares it before its first
// Job: the empty state Secret and the unheld lock Lease, the run lease naming the Job, and the
// per-object ServiceAccount bound to exactly jobs.RunnerPolicyRules.
type tfObject struct {
	name, uid, suffix, job, pod string
	// tokenFile holds a token of the object's runner ServiceAccount.
	tokenFile string
}

func newObject() *tfObject {
	n := objectSeq.Add(1)
	o := &tfObject{name: fmt.Sprintf("demo-%d", n), uid: fmt.Sprintf("00000000-0000-0000-0000-%012d", n)}
	o.suffix = naming.StateSuffix(namespace, "TerraformCluster", o.name)
	o.job = naming.JobName(o.suffix, 7)
	o.pod = o.job + "-x7k2p"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: naming.StateSecretName(o.suffix),
		Labels: runnerapi.StateLabels(o.suffix), Finalizers: []string{"captf.io/state-protection"}}}
	Expect(k8s.Create(ctx, secret)).To(Succeed())
	DeferCleanup(func() {
		s := &corev1.Secret{}
		if k8s.Get(ctx, client.ObjectKeyFromObject(secret), s) == nil {
			s.Finalizers = nil
			_ = k8s.Update(ctx, s)
		}
	})
	// The plan Secret, empty, as the controller creates it before a Plan Job.
	Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: naming.PlanSecretName(o.suffix),
		Labels: map[string]string{"keep": "me"}}})).To(Succeed())
	Expect(k8s.Create(ctx, objects.Lease(namespace, naming.StateLockLeaseName(o.suffix)).Obj())).To(Succeed())
	Expect(k8s.Create(ctx, objects.Lease(namespace, naming.RunLeaseName(o.suffix)).Holder(o.job).Obj())).To(Succeed())

	sa := naming.RunnerServiceAccountName(o.suffix)
	Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: sa}})).To(Succeed())
	Expect(k8s.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: sa}, Rules: jobs.RunnerPolicyRules(o.suffix)})).To(Succeed())
	Expect(k8s.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: sa},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: sa}}})).To(Succeed())
	// The API server's authorizer learns of a new Role and RoleBinding through its own
	// informers: wait until it grants the account what the channel does first.
	Eventually(func() (bool, error) {
		r, err := clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: "system:serviceaccount:" + namespace + ":" + sa,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "get", Resource: "secrets",
					Name: naming.StateSecretName(o.suffix)}}}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return r.Status.Allowed, nil
	}).Should(BeTrue(), "the runner Role never took effect")
	o.tokenFile = filepath.Join(GinkgoT().TempDir(), "token")
	Expect(os.WriteFile(o.tokenFile, []byte(o.token()), 0o600)).To(Succeed())
	return o
}

// token requests a fresh token of the object's runner ServiceAccount (the API server's own
// audience, as the Job's projected volume asks for).
func (o *tfObject) token() string {
	tr, err := clientset.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, naming.RunnerServiceAccountName(o.suffix),
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

func (o *tfObject) config(dir string) Config {
	return Config{
		ChannelInvocation: runnerapi.ChannelInvocation{
			Dir: dir, Namespace: namespace, Suffix: o.suffix, Job: o.job, RunLease: naming.RunLeaseName(o.suffix),
			OwnerKind: "TerraformCluster", OwnerName: o.name, OwnerUID: o.uid, TokenFile: o.tokenFile, CAFile: caFile,
		},
		Pod: o.pod, APIServer: env.Config.Host,
	}
}

// running is a channel serving in this process.
type running struct {
	srv  *server
	dir  string
	addr string
	cred string
	stop func()
}

// start serves a channel for cfg until the spec ends.
func start(cfg Config) *running {
	cctx, cancel := context.WithCancel(logr.NewContext(ctx, GinkgoLogr))
	ready := make(chan *server, 1)
	done := make(chan error, 1)
	go func() {
		defer GinkgoRecover()
		_, err := serve(cctx, cfg, func(s *server) { ready <- s })
		done <- err
	}()
	var srv *server
	select {
	case srv = <-ready:
	case err := <-done:
		cancel()
		Fail(fmt.Sprintf("channel did not start: %v", err))
	}
	r := &running{srv: srv, dir: cfg.Dir}
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		Expect(<-done).To(Succeed())
	}
	DeferCleanup(r.stop)
	addr, err := os.ReadFile(filepath.Join(cfg.Dir, runnerapi.ChannelAddressFile))
	Expect(err).NotTo(HaveOccurred())
	cred, err := os.ReadFile(filepath.Join(cfg.Dir, runnerapi.ChannelCredentialFile))
	Expect(err).NotTo(HaveOccurred())
	r.addr, r.cred = string(addr), string(cred)
	return r
}

func (o *tfObject) start() *running { return start(o.config(GinkgoT().TempDir())) }

func (r *running) url() string {
	return r.addr + StatePathPrefix + r.srv.cfg.Namespace + "/" + r.srv.cfg.Suffix
}

// do sends one request as Terraform's http backend would; it returns the status and body.
func (r *running) do(method, url string, body []byte, password string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	if password != "" {
		req.SetBasicAuth(runnerapi.ChannelUsername, password)
	}
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, string(b)
}

func (r *running) call(method, query string, body []byte) (int, string) {
	return r.do(method, r.url()+query, body, r.cred)
}

// code is call's status alone.
func (r *running) code(method, query string, body []byte) int {
	c, _ := r.call(method, query, body)
	return c
}

// lockBody is a lock info document as Terraform sends it.
func lockBody(id, who string) []byte {
	b, _ := json.Marshal(map[string]string{"ID": id, "Operation": "OperationTypeApply", "Info": "", "Who": who,
		"Version": "1.11.4", "Created": "2026-01-01T00:00:00Z", "Path": ""})
	return b
}

func (o *tfObject) lockLease() *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: naming.StateLockLeaseName(o.suffix)}, l)).To(Succeed())
	return l
}

func (o *tfObject) stateSecret() *corev1.Secret {
	s := &corev1.Secret{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: naming.StateSecretName(o.suffix)}, s)).To(Succeed())
	return s
}

func holderOfLease(l *coordinationv1.Lease) string { return ptr.Deref(l.Spec.HolderIdentity, "") }

// setRunLease names holder in the object's run lease.
func (o *tfObject) setRunLease(holder string) {
	l := &coordinationv1.Lease{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: naming.RunLeaseName(o.suffix)}, l)).To(Succeed())
	l.Spec.HolderIdentity = ptr.To(holder)
	Expect(k8s.Update(ctx, l)).To(Succeed())
}

// holdLock makes the lock Lease held by lockID, with the given annotations besides the lock
// info (the pod and Job a channel records, or none for a lock taken by the kubernetes backend).
func (o *tfObject) holdLock(lockID, who string, extra map[string]string) {
	l := o.lockLease()
	l.Spec.HolderIdentity = ptr.To(lockID)
	l.Annotations = map[string]string{runnerapi.StateLockInfoAnnotation: string(lockBody(lockID, who))}
	for k, v := range extra {
		l.Annotations[k] = v
	}
	Expect(k8s.Update(ctx, l)).To(Succeed())
}

// oldRun creates a finished Job of an object (ownerUID) and its pod in the given phase ("" to
// leave no pod), as a runner killed without grace leaves them; it returns the names.
func oldRun(o *tfObject, ownerUID string, seq int64, phase corev1.PodPhase) (job, pod string) {
	job = naming.JobName(o.suffix, seq)
	owner := objects.Cluster(namespace, o.name).UID(types.UID(ownerUID)).Obj()
	j := objects.Job(namespace, job).Of(infrav1.TerraformClusterKind, o.name, "").Owner(owner).Obj()
	Expect(k8s.Create(ctx, j)).To(Succeed())
	pod = job + "-ab12c"
	if phase == "" {
		return job, pod
	}
	p := objects.PodOf(j, pod).ControlledBy(j).Obj()
	Expect(k8s.Create(ctx, p)).To(Succeed())
	p.Status.Phase = phase
	Expect(k8s.Status().Update(ctx, p)).To(Succeed())
	return job, pod
}

// channelAnnotations are what a channel records on a lock it takes.
func channelAnnotations(pod, job string) map[string]string {
	return map[string]string{runnerapi.LockPodAnnotation: pod, runnerapi.LockJobAnnotation: job}
}

func (r *running) records() Records {
	rec, err := ReadRecords(r.dir)
	Expect(err).NotTo(HaveOccurred())
	return rec
}
