package channel

import (
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

const stateV1 = `{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"3f2a","outputs":{},"resources":[]}`

func gunzip(b []byte) string {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	Expect(err).NotTo(HaveOccurred())
	out, err := io.ReadAll(zr)
	Expect(err).NotTo(HaveOccurred())
	return string(out)
}

var _ = Describe("the state channel", func() {
	It("serves Terraform's http backend in the kubernetes backend's layout, under exactly the runner Role", func() {
		o := newObject()
		r := o.start()

		By("no state yet: the controller's empty Secret reads as none")
		code, _ := r.call(http.MethodGet, "", nil)
		Expect(code).To(Equal(http.StatusNoContent))

		By("lock, write, read back, unlock")
		code, body := r.call(methodLock, "", lockBody("lock-1", "runner@pod"))
		Expect(code).To(Equal(http.StatusOK), body)
		l := o.lockLease()
		Expect(holderOfLease(l)).To(Equal("lock-1"))
		Expect(l.Annotations).To(HaveKeyWithValue(runnerapi.StateLockInfoAnnotation, string(lockBody("lock-1", "runner@pod"))))
		Expect(l.Annotations).To(HaveKeyWithValue(runnerapi.LockPodAnnotation, o.pod))
		Expect(l.Annotations).To(HaveKeyWithValue(runnerapi.LockJobAnnotation, o.job))
		Expect(l.Labels).To(Equal(runnerapi.StateLabels(o.suffix)))

		code, body = r.call(http.MethodPost, "?ID=lock-1", []byte(stateV1))
		Expect(code).To(Equal(http.StatusOK), body)
		sec := o.stateSecret()
		Expect(gunzip(sec.Data[runnerapi.StateKey])).To(Equal(stateV1))
		Expect(sec.Labels).To(Equal(runnerapi.StateLabels(o.suffix)))
		Expect(sec.Annotations).To(HaveKeyWithValue("encoding", "gzip"))
		Expect(sec.Finalizers).To(ConsistOf("captf.io/state-protection"), "fields the channel does not know are kept")

		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url(), nil)
		Expect(err).NotTo(HaveOccurred())
		req.SetBasicAuth(runnerapi.ChannelUsername, r.cred)
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		got, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.Body.Close()).To(Succeed())
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		Expect(string(got)).To(Equal(stateV1))
		sum := md5.Sum([]byte(stateV1))
		Expect(resp.Header.Get("Content-MD5")).To(Equal(base64.StdEncoding.EncodeToString(sum[:])))

		code, body = r.call(methodUnlock, "", lockBody("lock-1", "runner@pod"))
		Expect(code).To(Equal(http.StatusOK), body)
		l = o.lockLease()
		Expect(l.Spec.HolderIdentity).To(BeNil())
		Expect(l.Annotations).NotTo(HaveKey(runnerapi.StateLockInfoAnnotation))
		Expect(l.Annotations).NotTo(HaveKey(runnerapi.LockPodAnnotation))
		Expect(l.Annotations).NotTo(HaveKey(runnerapi.LockJobAnnotation))
		Expect(r.records()).To(Equal(Records{}), "nothing to report")
	})

	It("adds the backend's labels to a state Secret that lacks them, so Terraform's kubernetes backend finds the state", func() {
		o := newObject()
		sec := o.stateSecret()
		sec.Labels = map[string]string{"keep": "me"}
		Expect(k8s.Update(ctx, sec)).To(Succeed())
		r := o.start()
		Expect(r.code(methodLock, "", lockBody("l", "w"))).To(Equal(http.StatusOK))
		Expect(r.code(http.MethodPost, "?ID=l", []byte(stateV1))).To(Equal(http.StatusOK))
		want := runnerapi.StateLabels(o.suffix)
		want["keep"] = "me"
		Expect(o.stateSecret().Labels).To(Equal(want))
	})

	It("never creates the state Secret: a missing one reads as no state and refuses writes", func() {
		o := newObject()
		sec := o.stateSecret()
		sec.Finalizers = nil
		Expect(k8s.Update(ctx, sec)).To(Succeed())
		Expect(k8s.Delete(ctx, sec)).To(Succeed())
		r := o.start()
		Expect(r.code(http.MethodGet, "", nil)).To(Equal(http.StatusNoContent))
		Expect(r.code(methodLock, "", lockBody("l", "w"))).To(Equal(http.StatusOK))
		code, body := r.call(http.MethodPost, "?ID=l", []byte(stateV1))
		Expect(code).To(Equal(http.StatusPreconditionFailed), body)
		Expect(body).To(ContainSubstring("the controller creates it"))
		err := k8s.Get(ctx, client.ObjectKeyFromObject(sec), &corev1.Secret{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue())
	})

	It("refuses a request without the per-run credential", func() {
		o := newObject()
		r := o.start()
		for _, pass := range []string{"", "wrong", r.cred + "x"} {
			code, _ := r.do(http.MethodGet, r.url(), nil, pass)
			Expect(code).To(Equal(http.StatusUnauthorized), "password %q", pass)
			code, _ = r.do(methodLock, r.url(), lockBody("l", "w"), pass)
			Expect(code).To(Equal(http.StatusUnauthorized))
		}
		Expect(o.lockLease().Spec.HolderIdentity).To(BeNil())
		fi, err := os.Stat(filepath.Join(r.dir, runnerapi.ChannelCredentialFile))
		Expect(err).NotTo(HaveOccurred())
		Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o600)))
	})

	It("refuses a request for another object's state", func() {
		o, other := newObject(), newObject()
		r := o.start()
		for _, path := range []string{
			StatePathPrefix + namespace + "/" + other.suffix,
			StatePathPrefix + "kube-system/" + o.suffix,
		} {
			for _, m := range []string{http.MethodGet, http.MethodPost, methodLock, methodUnlock} {
				code, _ := r.do(m, r.addr+path, lockBody("l", "w"), r.cred)
				Expect(code).To(Equal(http.StatusForbidden), "%s %s", m, path)
			}
		}
		Expect(other.lockLease().Spec.HolderIdentity).To(BeNil())
		code, _ := r.do(http.MethodGet, r.addr+"/state/"+namespace+"/"+o.suffix+"/../x", nil, r.cred)
		Expect(code).To(Equal(http.StatusNotFound))
	})

	It("refuses a state write without the lock", func() {
		o := newObject()
		r := o.start()
		Expect(r.code(http.MethodPost, "", []byte(stateV1))).To(Equal(http.StatusConflict))
		Expect(r.code(http.MethodPost, "?ID=nobody", []byte(stateV1))).To(Equal(http.StatusConflict))
		Expect(r.code(methodLock, "", lockBody("mine", "w"))).To(Equal(http.StatusOK))
		Expect(r.code(http.MethodPost, "?ID=other", []byte(stateV1))).To(Equal(http.StatusConflict))
		// A lock with the same ID taken by another pod's channel does not count either.
		o.holdLock("theirs", "w", channelAnnotations("another-pod", o.job))
		Expect(r.code(http.MethodPost, "?ID=theirs", []byte(stateV1))).To(Equal(http.StatusConflict))
		Expect(o.stateSecret().Data).NotTo(HaveKey(runnerapi.StateKey))
	})

	It("serves only the state the controller read: a state emptied, replaced or deleted since is refused and recorded", func() {
		o := newObject()
		writer := o.start()
		put := func(state string) {
			Expect(writer.code(methodLock, "", lockBody("w", "writer"))).To(Equal(http.StatusOK))
			Expect(writer.code(http.MethodPost, "?ID=w", []byte(state))).To(Equal(http.StatusOK))
			Expect(writer.code(methodUnlock, "", lockBody("w", "writer"))).To(Equal(http.StatusOK))
		}
		put(stateV1)
		cfg := o.config(GinkgoT().TempDir())
		cfg.StateLineage = "3f2a"
		r := start(cfg)

		By("the lineage the controller read: served as it is")
		code, body := r.call(http.MethodGet, "", nil)
		Expect(code).To(Equal(http.StatusOK), body)
		Expect(body).To(Equal(stateV1))
		Expect(r.records()).To(Equal(Records{}))

		By("a new serial of the same lineage (the run's own write): still served")
		put(`{"version":4,"serial":2,"lineage":"3f2a","resources":[]}`)
		Expect(r.code(http.MethodGet, "", nil)).To(Equal(http.StatusOK))

		By("replaced by another lineage (a person with kubectl): refused")
		o.putState(`{"version":4,"serial":1,"lineage":"9e1b","resources":[]}`)
		code, body = r.call(http.MethodGet, "", nil)
		Expect(code).To(Equal(http.StatusConflict), body)
		Expect(body).To(ContainSubstring("lineage 3f2a"))
		Expect(body).To(ContainSubstring("holds lineage 9e1b"))
		Expect(r.records().StateRefused).To(Equal(&StateRefusal{StateRefused: runnerapi.StateRefused{Expected: "3f2a", Found: "9e1b"}}))

		By("emptied: refused")
		sec := o.stateSecret()
		delete(sec.Data, runnerapi.StateKey)
		Expect(k8s.Update(ctx, sec)).To(Succeed())
		code, body = r.call(http.MethodGet, "", nil)
		Expect(code).To(Equal(http.StatusConflict), body)
		Expect(body).To(ContainSubstring("holds no state"))
		Expect(r.records().StateRefused).To(Equal(&StateRefusal{StateRefused: runnerapi.StateRefused{Expected: "3f2a"}}))

		By("deleted: refused, where a channel without a lineage serves no state")
		sec = o.stateSecret()
		sec.Finalizers = nil
		Expect(k8s.Update(ctx, sec)).To(Succeed())
		Expect(k8s.Delete(ctx, sec)).To(Succeed())
		Expect(r.code(http.MethodGet, "", nil)).To(Equal(http.StatusConflict))
		Expect(writer.code(http.MethodGet, "", nil)).To(Equal(http.StatusNoContent))
	})

	It("takes a state lineage only for an operation that reads the state, and only a printable one", func() {
		o := newObject()
		for _, c := range []struct {
			op, lineage, want string
		}{
			{runnerapi.OperationRestore, "3f2a", "not for a Restore Job"},
			{runnerapi.OperationApply, "3f 2a", "printable"},
			{runnerapi.OperationApply, strings.Repeat("a", runnerapi.MaxLineageLength+1), "printable"},
		} {
			cfg := o.config(GinkgoT().TempDir())
			cfg.Operation, cfg.StateLineage = c.op, c.lineage
			err := cfg.validate()
			Expect(err).To(HaveOccurred(), "%s %q", c.op, c.lineage)
			Expect(err.Error()).To(ContainSubstring(c.want))
		}
		cfg := o.config(GinkgoT().TempDir())
		cfg.Operation, cfg.StateLineage = runnerapi.OperationDrift, "3f2a"
		Expect(cfg.validate()).To(Succeed())
	})

	Context("fencing", func() {
		It("refuses LOCK when the run lease names another Job, and records it", func() {
			o := newObject()
			o.setRunLease("captf-someone-else-1")
			r := o.start()
			code, body := r.call(methodLock, "", lockBody("l", "w"))
			Expect(code).To(Equal(http.StatusForbidden), body)
			Expect(body).To(ContainSubstring("fenced"))
			Expect(o.lockLease().Spec.HolderIdentity).To(BeNil())
			Expect(r.records().Fenced).To(Equal(&runnerapi.Fenced{Request: "LOCK", RunLeaseHolder: "captf-someone-else-1"}))
		})

		It("refuses a state write once the run lease moved on, and still lets the run release its lock", func() {
			o := newObject()
			r := o.start()
			Expect(r.code(methodLock, "", lockBody("l", "w"))).To(Equal(http.StatusOK))
			Expect(r.code(http.MethodPost, "?ID=l", []byte(stateV1))).To(Equal(http.StatusOK))
			o.setRunLease("captf-successor-8")
			code, body := r.call(http.MethodPost, "?ID=l", []byte(`{"version":4,"serial":2,"lineage":"3f2a"}`))
			Expect(code).To(Equal(http.StatusForbidden), body)
			Expect(gunzip(o.stateSecret().Data[runnerapi.StateKey])).To(Equal(stateV1), "the state was not written")
			Expect(r.records().Fenced).To(Equal(&runnerapi.Fenced{Request: "POST", RunLeaseHolder: "captf-successor-8"}))
			Expect(r.code(methodUnlock, "", lockBody("l", "w"))).To(Equal(http.StatusOK))
			Expect(o.lockLease().Spec.HolderIdentity).To(BeNil())
		})

		It("counts a missing run lease as another holder", func() {
			o := newObject()
			Expect(k8s.Delete(ctx, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: naming.RunLeaseName(o.suffix)}})).To(Succeed())
			r := o.start()
			Expect(r.code(methodLock, "", lockBody("l", "w"))).To(Equal(http.StatusForbidden))
		})
	})

	Context("stale locks (I8)", func() {
		It("breaks the lock of its own object's terminated pod exactly once, even when two channels race", func() {
			o := newObject()
			job, pod := oldRun(o, o.uid, 6, corev1.PodFailed)
			o.holdLock("stale-1", "runner@"+pod, channelAnnotations(pod, job))

			// Two channels of this Job (a restarted sidecar and its predecessor, say) read the
			// same evidence and write at the same time: only one write can carry the current
			// resourceVersion.
			a, b := o.start(), o.start()
			arrived := make(chan struct{}, 2)
			release := make(chan struct{})
			hook := func() { arrived <- struct{}{}; <-release }
			a.srv.beforeBreak, b.srv.beforeBreak = hook, hook
			codes := make([]int, 2)
			var wg sync.WaitGroup
			for i, r := range []*running{a, b} {
				wg.Add(1)
				go func() {
					defer GinkgoRecover()
					defer wg.Done()
					codes[i], _ = r.call(methodLock, "", lockBody("new-"+string(rune('a'+i)), "runner@"+o.pod))
				}()
			}
			<-arrived
			<-arrived
			close(release)
			wg.Wait()
			Expect(codes).To(ConsistOf(http.StatusOK, http.StatusLocked))

			var broken []*runnerapi.LockBroken
			for _, r := range []*running{a, b} {
				if rec := r.records(); rec.LockBroken != nil {
					broken = append(broken, rec.LockBroken)
				}
			}
			Expect(broken).To(HaveLen(1), "one break, one event")
			Expect(*broken[0]).To(Equal(runnerapi.LockBroken{LockID: "stale-1", Who: "runner@" + pod, Pod: pod, Job: job}))
			l := o.lockLease()
			Expect(holderOfLease(l)).To(BeElementOf("new-a", "new-b"))
			Expect(l.Annotations).To(HaveKeyWithValue(runnerapi.LockPodAnnotation, o.pod))
		})

		It("breaks the lock of its own object's pod that is gone", func() {
			o := newObject()
			job, pod := oldRun(o, o.uid, 5, "")
			o.holdLock("stale-2", "runner@"+pod, channelAnnotations(pod, job))
			r := o.start()
			Expect(r.code(methodLock, "", lockBody("new", "w"))).To(Equal(http.StatusOK))
			Expect(holderOfLease(o.lockLease())).To(Equal("new"))
			Expect(r.records().LockBroken).To(HaveField("LockID", "stale-2"))
		})

		It("(a) never breaks a lock whose holder's Job belongs to another object", func() {
			o := newObject()
			job, pod := oldRun(o, "11111111-2222-3333-4444-555555555555", 4, corev1.PodFailed)
			o.holdLock("stale-a", "runner@"+pod, channelAnnotations(pod, job))
			r := o.start()
			code, body := r.call(methodLock, "", lockBody("new", "w"))
			Expect(code).To(Equal(http.StatusLocked))
			Expect(body).To(ContainSubstring(`"ID":"stale-a"`))
			Expect(holderOfLease(o.lockLease())).To(Equal("stale-a"))
			Expect(r.records().LockBroken).To(BeNil())
			Expect(r.records().LockHolder).To(HaveField("ID", "stale-a"))
		})

		It("(a) never breaks a foreign lock taken with the plain kubernetes backend, and names its holder", func() {
			o := newObject()
			o.holdLock("ops-lock", "ops@laptop", nil)
			r := o.start()
			code, body := r.call(methodLock, "", lockBody("new", "w"))
			Expect(code).To(Equal(http.StatusLocked))
			Expect(body).To(ContainSubstring("ops@laptop"))
			Expect(holderOfLease(o.lockLease())).To(Equal("ops-lock"))
			Expect(r.records().LockHolder).To(Equal(&runnerapi.LockHolder{ID: "ops-lock", Who: "ops@laptop",
				Operation: "OperationTypeApply", Created: "2026-01-01T00:00:00Z"}))
		})

		It("(b) never breaks a lock whose holder pod still runs", func() {
			o := newObject()
			job, pod := oldRun(o, o.uid, 3, corev1.PodRunning)
			o.holdLock("stale-b", "runner@"+pod, channelAnnotations(pod, job))
			r := o.start()
			Expect(r.code(methodLock, "", lockBody("new", "w"))).To(Equal(http.StatusLocked))
			Expect(holderOfLease(o.lockLease())).To(Equal("stale-b"))
			Expect(r.records().LockBroken).To(BeNil())
		})

		It("(c) never breaks a lock when this Job does not hold the run lease", func() {
			o := newObject()
			job, pod := oldRun(o, o.uid, 2, corev1.PodFailed)
			o.holdLock("stale-c", "runner@"+pod, channelAnnotations(pod, job))
			o.setRunLease("captf-successor-9")
			r := o.start()
			code, _ := r.call(methodLock, "", lockBody("new", "w"))
			Expect(code).To(Equal(http.StatusForbidden))
			Expect(holderOfLease(o.lockLease())).To(Equal("stale-c"))
			Expect(r.records().LockBroken).To(BeNil())
		})

		It("(d) never breaks a lock that changed after it was read", func() {
			o := newObject()
			job, pod := oldRun(o, o.uid, 1, corev1.PodSucceeded)
			o.holdLock("stale-d", "runner@"+pod, channelAnnotations(pod, job))
			r := o.start()
			// Between the channel's read and its write, the old lock is released and someone
			// else takes the state lock.
			r.srv.beforeBreak = func() { o.holdLock("taken-meanwhile", "ops@laptop", nil) }
			code, body := r.call(methodLock, "", lockBody("new", "w"))
			Expect(code).To(Equal(http.StatusLocked))
			Expect(body).To(ContainSubstring("taken-meanwhile"))
			Expect(holderOfLease(o.lockLease())).To(Equal("taken-meanwhile"))
			Expect(r.records().LockBroken).To(BeNil())
			Expect(r.records().LockHolder).To(HaveField("Who", "ops@laptop"))
		})
	})

	It("reads the token file on every request, so a rotated token is used at once", func() {
		o := newObject()
		r := o.start()
		Expect(r.code(http.MethodGet, "", nil)).To(Equal(http.StatusNoContent))
		Expect(os.WriteFile(o.tokenFile, []byte("not-a-token"), 0o600)).To(Succeed())
		Expect(r.code(http.MethodGet, "", nil)).To(Equal(http.StatusServiceUnavailable))
		Expect(os.WriteFile(o.tokenFile, []byte(o.token()), 0o600)).To(Succeed())
		Expect(r.code(http.MethodGet, "", nil)).To(Equal(http.StatusNoContent))
	})

	It("keeps its address and credential when restarted, and listens on loopback only", MustPassRepeatedly(10), func() {
		o := newObject()
		cfg := o.config(GinkgoT().TempDir())
		first := start(cfg)
		Expect(first.addr).To(HavePrefix("http://127.0.0.1:"))
		first.stop()
		second := start(cfg)
		Expect(second.addr).To(Equal(first.addr))
		Expect(second.cred).To(Equal(first.cred))
		Expect(second.code(http.MethodGet, "", nil)).To(Equal(http.StatusNoContent))
	})

	It("holds a token that can do nothing but the channel's work", func() {
		o := newObject()
		other := newObject()
		tok, err := os.ReadFile(o.tokenFile)
		Expect(err).NotTo(HaveOccurred())
		cfg := rest.AnonymousClientConfig(env.Config)
		cfg.BearerToken = string(tok)
		c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
		forbidden := func(err error) { GinkgoHelper(); Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err) }

		own := &corev1.Secret{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: naming.StateSecretName(o.suffix)}, own)).To(Succeed())
		forbidden(c.Delete(ctx, own))
		forbidden(c.List(ctx, &corev1.SecretList{}, client.InNamespace(namespace)))
		forbidden(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: naming.StateSecretName(other.suffix)}, &corev1.Secret{}))
		forbidden(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "kubeconfig-of-another-cluster"}}))
		plan := &corev1.Secret{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: naming.PlanSecretName(o.suffix)}, plan)).To(Succeed())
		Expect(c.Update(ctx, plan)).To(Succeed())
		forbidden(c.Delete(ctx, plan))
		forbidden(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: naming.PlanSecretName(other.suffix)}, &corev1.Secret{}))
		lease := o.lockLease()
		forbidden(c.Delete(ctx, lease))
		run := lease.DeepCopy()
		run.Name, run.ResourceVersion = naming.RunLeaseName(o.suffix), ""
		Expect(c.Get(ctx, client.ObjectKeyFromObject(run), run)).To(Succeed())
		run.Spec.HolderIdentity = ptr.To("captf-forged-1")
		forbidden(c.Update(ctx, run))
	})
})
