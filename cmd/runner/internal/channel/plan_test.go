package channel

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

const inputsHash = "sha256:4e1f0c0d4b3a2f19"

// planZip is a plan file as Terraform and OpenTofu write one: a zip whose tfstate entry is the
// state the plan was made against. payload fills the tfplan entry (stored, not compressed, so
// a random payload keeps its size).
func planZip(serial uint64, lineage string, payload []byte) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "tfplan", Method: zip.Store})
	Expect(err).NotTo(HaveOccurred())
	_, err = w.Write(payload)
	Expect(err).NotTo(HaveOccurred())
	w, err = zw.Create("tfstate")
	Expect(err).NotTo(HaveOccurred())
	_, err = fmt.Fprintf(w, `{"version":4,"terraform_version":"1.11.4","serial":%d,"lineage":%q,"outputs":{},"resources":[]}`, serial, lineage)
	Expect(err).NotTo(HaveOccurred())
	Expect(zw.Close()).To(Succeed())
	return buf.Bytes()
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, err := rand.Read(b)
	Expect(err).NotTo(HaveOccurred())
	return b
}

// planChannel starts the channel of a Plan Job of o.
func (o *tfObject) planChannel() *running {
	cfg := o.config(GinkgoT().TempDir())
	cfg.Operation, cfg.InputsHash = runnerapi.OperationPlan, inputsHash
	return start(cfg)
}

// applyChannel starts the channel of an Apply Job (seq) of o that applies plan id, and names
// that Job in the run lease.
func (o *tfObject) applyChannel(seq int64, id string) *running {
	cfg := o.config(GinkgoT().TempDir())
	cfg.Job = naming.JobName(o.suffix, seq)
	cfg.Pod = cfg.Job + "-a1b2c"
	cfg.Operation, cfg.PlanID = runnerapi.OperationApply, id
	o.setRunLease(cfg.Job)
	return start(cfg)
}

// refreshPlanChannel starts the channel of a Plan Job of o that makes a refresh-only plan.
func (o *tfObject) refreshPlanChannel() *running {
	cfg := o.config(GinkgoT().TempDir())
	cfg.Operation, cfg.InputsHash, cfg.RefreshOnly = runnerapi.OperationPlan, inputsHash, true
	return start(cfg)
}

// targetPlanChannel starts the channel of a Plan Job of o whose plan carries out target.
func (o *tfObject) targetPlanChannel(target string) *running {
	cfg := o.config(GinkgoT().TempDir())
	cfg.Operation, cfg.InputsHash, cfg.Target = runnerapi.OperationPlan, inputsHash, target
	return start(cfg)
}

// refreshChannel starts the channel of a Refresh Job (seq) of o that applies plan id, and names
// that Job in the run lease.
func (o *tfObject) refreshChannel(seq int64, id string) *running {
	cfg := o.config(GinkgoT().TempDir())
	cfg.Job = naming.JobName(o.suffix, seq)
	cfg.Pod = cfg.Job + "-r1f2s"
	cfg.Operation, cfg.PlanID = runnerapi.OperationRefresh, id
	o.setRunLease(cfg.Job)
	return start(cfg)
}

// destroyPlanChannel starts the channel of a Plan Job of o that makes a destroy plan.
func (o *tfObject) destroyPlanChannel() *running {
	cfg := o.config(GinkgoT().TempDir())
	cfg.Operation, cfg.InputsHash, cfg.DestroyPlan = runnerapi.OperationPlan, inputsHash, true
	return start(cfg)
}

// destroyChannel starts the channel of a Destroy Job (seq) of o that applies plan id, and
// names that Job in the run lease.
func (o *tfObject) destroyChannel(seq int64, id string) *running {
	cfg := o.config(GinkgoT().TempDir())
	cfg.Job = naming.JobName(o.suffix, seq)
	cfg.Pod = cfg.Job + "-d1s2t"
	cfg.Operation, cfg.PlanID = runnerapi.OperationDestroy, id
	o.setRunLease(cfg.Job)
	return start(cfg)
}

func (r *running) planURL() string {
	return r.addr + runnerapi.PlanPathPrefix + r.srv.cfg.Namespace + "/" + r.srv.cfg.Suffix
}

// putPlan uploads a plan as the runner does; it returns the status and the body.
func (r *running) putPlan(up runnerapi.PlanUpload) (int, string) {
	b, err := json.Marshal(up)
	Expect(err).NotTo(HaveOccurred())
	return r.do(http.MethodPut, r.planURL(), b, r.cred)
}

// savePlan stores a plan and returns its record. Every stored plan's answer carries the
// digests of the artifacts exactly as the plan Secret holds them (the text cut and the JSON plan
// left out included): the runner reports them and the manager checks the Secret against them.
func (r *running) savePlan(up runnerapi.PlanUpload) runnerapi.PlanRecord {
	GinkgoHelper()
	code, body := r.putPlan(up)
	Expect(code).To(Equal(http.StatusOK), body)
	var stored runnerapi.PlanStored
	Expect(json.Unmarshal([]byte(body), &stored)).To(Succeed())
	Expect(stored.Digests.Complete()).To(BeTrue(), "the answer reports a digest of every artifact: %s", body)
	sec := &corev1.Secret{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: r.srv.cfg.Namespace, Name: naming.PlanSecretName(r.srv.cfg.Suffix)}, sec)).To(Succeed())
	Expect(stored.Digests.Verify(sec.Data)).To(Succeed(), "the reported digests are those of the artifacts as stored")
	return stored.PlanRecord
}

// getPlan fetches the plan as the runner does.
func (r *running) getPlan() (int, runnerapi.PlanDownload, runnerapi.PlanRefusal) {
	code, body := r.do(http.MethodGet, r.planURL(), nil, r.cred)
	var dl runnerapi.PlanDownload
	var refusal runnerapi.PlanRefusal
	switch code {
	case http.StatusOK:
		Expect(json.Unmarshal([]byte(body), &dl)).To(Succeed())
	case http.StatusConflict, http.StatusUnprocessableEntity:
		Expect(json.Unmarshal([]byte(body), &refusal)).To(Succeed(), body)
	}
	return code, dl, refusal
}

func (o *tfObject) planSecret() *corev1.Secret {
	s := &corev1.Secret{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: naming.PlanSecretName(o.suffix)}, s)).To(Succeed())
	return s
}

// storedRecord reads the plan Secret's record.
func (o *tfObject) storedRecord() runnerapi.PlanRecord {
	var rec runnerapi.PlanRecord
	Expect(json.Unmarshal(o.planSecret().Data[runnerapi.PlanRecordKey], &rec)).To(Succeed())
	return rec
}

func gunzipBytes(b []byte) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	Expect(err).NotTo(HaveOccurred())
	out, err := io.ReadAll(zr)
	Expect(err).NotTo(HaveOccurred())
	return out
}

func upload(file []byte) runnerapi.PlanUpload {
	return runnerapi.PlanUpload{File: file, Summary: runnerapi.PlanSummary{Update: 1, Replace: 1, Create: 1,
		Addresses: []string{"terraform_data.extra[0]", "terraform_data.greeting", "terraform_data.replaced"}},
		Text: "Terraform will perform the following actions:\n  ~ update in-place\n",
		JSON: []byte(`{"format_version":"1.2","resource_changes":[{"address":"terraform_data.greeting","change":{"actions":["update"]}}]}`)}
}

var _ = Describe("the saved plan", func() {
	It("stores a Plan Job's plan in the plan Secret, bound to its file, the inputs and the state it was made against", func() {
		o := newObject()
		r := o.planChannel()
		file := planZip(4, "lineage-a", []byte("the plan"))
		up := upload(file)
		rec := r.savePlan(up)

		sha := runnerapi.FileSHA256(file)
		Expect(rec.FileSHA256).To(Equal(sha))
		Expect(rec.StateSerial).To(BeEquivalentTo(4), "the serial the plan file records")
		Expect(rec.StateLineage).To(Equal("lineage-a"))
		Expect(rec.InputsHash).To(Equal(inputsHash), "the channel's own --inputs-hash")
		Expect(rec.ID).To(Equal(runnerapi.PlanID(sha, inputsHash, 4, "lineage-a")))
		Expect(runnerapi.ValidPlanID(rec.ID)).To(BeTrue())
		Expect(rec.Job).To(Equal(o.job))
		Expect(rec.CreatedAt).NotTo(BeEmpty())
		Expect(rec.Create + rec.Update + rec.Replace).To(Equal(3))
		Expect(rec.Addresses).To(Equal(up.Summary.Addresses))

		sec := o.planSecret()
		Expect(sec.Data).To(HaveLen(4))
		Expect(gunzipBytes(sec.Data[runnerapi.PlanFileKey])).To(Equal(file))
		Expect(string(sec.Data[runnerapi.PlanTextKey])).To(Equal(up.Text))
		Expect(sec.Data[runnerapi.PlanJSONKey]).To(Equal(up.JSON))
		Expect(rec.JSONLeftOut).To(BeFalse())
		Expect(o.storedRecord()).To(Equal(rec))
		Expect(sec.Annotations).To(HaveKeyWithValue(runnerapi.PlanIDAnnotation, rec.ID))
		Expect(sec.Annotations).NotTo(HaveKey(runnerapi.PlanConsumedByAnnotation))
		Expect(sec.Labels).To(HaveKeyWithValue("keep", "me"), "fields the channel does not know are kept")

		By("the same plan file of the same inputs against the same state has the same ID")
		Expect(r.savePlan(up).ID).To(Equal(rec.ID))
		By("a plan made against the next serial has another ID")
		next := r.savePlan(upload(planZip(5, "lineage-a", []byte("the plan"))))
		Expect(next.ID).NotTo(Equal(rec.ID))
		Expect(next.StateSerial).To(BeEquivalentTo(5))
		Expect(o.planSecret().Annotations).To(HaveKeyWithValue(runnerapi.PlanIDAnnotation, next.ID))
	})

	It("records a refresh-only plan from its own --refresh-only, never from the upload", func() {
		o := newObject()
		file := planZip(2, "lineage-r", []byte("a refresh-only plan"))
		rec := o.refreshPlanChannel().savePlan(upload(file))
		Expect(rec.RefreshOnly).To(BeTrue())
		Expect(o.storedRecord().RefreshOnly).To(BeTrue())
		Expect(rec.ID).To(Equal(runnerapi.PlanID(runnerapi.FileSHA256(file), inputsHash, 2, "lineage-r")))

		By("a Plan Job without --refresh-only stores a plan that is not refresh-only, whatever it was before")
		r := o.planChannel()
		plain := r.savePlan(upload(planZip(2, "lineage-r", []byte("a full plan"))))
		Expect(plain.RefreshOnly).To(BeFalse())
		Expect(o.storedRecord().RefreshOnly).To(BeFalse())
		raw, err := json.Marshal(plain)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(raw)).NotTo(ContainSubstring("refreshOnly"), "omitted when false")

		By("an upload that claims refresh-only is refused: the runner does not decide the kind")
		b, err := json.Marshal(upload(planZip(2, "lineage-r", []byte("a forged plan"))))
		Expect(err).NotTo(HaveOccurred())
		forged := append([]byte(`{"refreshOnly":true,`), b[1:]...)
		code, body := r.do(http.MethodPut, r.planURL(), forged, r.cred)
		Expect(code).To(Equal(http.StatusBadRequest), body)
		Expect(o.storedRecord().ID).To(Equal(plain.ID))
	})

	It("records a targeted plan's target from its own --target, never from the upload", func() {
		o := newObject()
		const target = "import module.net.terraform_data.a[0] an id with blanks"
		file := planZip(2, "lineage-t", []byte("an import plan"))
		rec := o.targetPlanChannel(target).savePlan(upload(file))
		Expect(rec.Target).To(Equal(target))
		Expect(o.storedRecord().Target).To(Equal(target))
		Expect(rec.RefreshOnly || rec.Destroy).To(BeFalse())
		Expect(runnerapi.PlanKindOf(rec)).To(Equal(runnerapi.PlanKindApply), "an Apply Job applies a targeted plan")
		Expect(rec.ID).To(Equal(runnerapi.PlanID(runnerapi.FileSHA256(file), inputsHash, 2, "lineage-t")), "the ID is computed as for any plan")

		By("a Plan Job without --target stores a plan without a target, whatever it was before")
		r := o.planChannel()
		plain := r.savePlan(upload(planZip(2, "lineage-t", []byte("a full plan"))))
		Expect(plain.Target).To(BeEmpty())
		Expect(o.storedRecord().Target).To(BeEmpty())
		raw, err := json.Marshal(plain)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(raw)).NotTo(ContainSubstring(`"target"`), "omitted when empty")

		By("an upload that names a target is refused: the runner does not decide what the plan carries out")
		b, err := json.Marshal(upload(planZip(2, "lineage-t", []byte("a forged plan"))))
		Expect(err).NotTo(HaveOccurred())
		forged := append([]byte(`{"target":"replace terraform_data.b",`), b[1:]...)
		for _, ch := range []*running{r, o.targetPlanChannel("replace terraform_data.a")} {
			code, body := ch.do(http.MethodPut, ch.planURL(), forged, ch.cred)
			Expect(code).To(Equal(http.StatusBadRequest), body)
			Expect(o.storedRecord().ID).To(Equal(plain.ID))
		}

		By("a Plan Job with --target records its own target, not the upload's")
		replaced := o.targetPlanChannel("replace terraform_data.a").savePlan(upload(planZip(3, "lineage-t", []byte("a replace plan"))))
		Expect(replaced.Target).To(Equal("replace terraform_data.a"))
		Expect(o.storedRecord().Target).To(Equal("replace terraform_data.a"))

		By("an Apply Job gets the targeted plan, its record and target included")
		code, dl, _ := o.applyChannel(9, replaced.ID).getPlan()
		Expect(code).To(Equal(http.StatusOK))
		Expect(dl.Record).To(Equal(replaced))
	})

	It("stores only a Plan Job's plan, and only a plan file", func() {
		o := newObject()
		file := planZip(1, "l", []byte("p"))
		apply := start(o.config(GinkgoT().TempDir())) // no --operation: not a Plan Job
		code, body := apply.putPlan(upload(file))
		Expect(code).To(Equal(http.StatusForbidden), body)
		Expect(body).To(ContainSubstring("only a Plan Job stores a plan"))

		r := o.planChannel()
		code, body = r.putPlan(upload([]byte("not a zip")))
		Expect(code).To(Equal(http.StatusUnprocessableEntity), body)
		up := upload(file)
		up.Summary.Addresses = make([]string, runnerapi.MaxRecordAddresses+1)
		code, _ = r.putPlan(up)
		Expect(code).To(Equal(http.StatusBadRequest))
		Expect(o.planSecret().Data).To(BeEmpty())
	})

	It("refuses a plan that does not fit the plan Secret, and cuts a text that does not fit beside it", func() {
		o := newObject()
		r := o.planChannel()
		code, body := r.putPlan(upload(planZip(1, "l", randomBytes(runnerapi.MaxPlanSecretBytes+1))))
		Expect(code).To(Equal(http.StatusRequestEntityTooLarge), body)
		Expect(body).To(ContainSubstring("does not fit the plan Secret"))
		Expect(o.planSecret().Data).To(BeEmpty())

		up := upload(planZip(1, "l", randomBytes(900<<10)))
		up.Text = strings.Repeat("  # terraform_data.x will be updated in-place\n", 8000) // about 370 KiB
		rec := r.savePlan(up)
		Expect(rec.TextTruncated).To(BeTrue())
		sec := o.planSecret()
		total := 0
		for _, v := range sec.Data {
			total += len(v)
		}
		Expect(total).To(BeNumerically("<=", runnerapi.MaxPlanSecretBytes))
		Expect(string(sec.Data[runnerapi.PlanTextKey])).To(HaveSuffix(runnerapi.PlanTextTruncatedMarker))
		Expect(o.storedRecord().TextTruncated).To(BeTrue())
		Expect(sec.Data[runnerapi.PlanJSONKey]).To(Equal(up.JSON), "the JSON plan goes before the text")

		By("a JSON plan that does not fit beside the plan file is left out, and the Secret says so")
		up = upload(planZip(1, "l", randomBytes(900<<10)))
		up.JSON = []byte(`{"resource_changes":[` + strings.Repeat(`{"address":"terraform_data.x","change":{"actions":["update"]}},`, 3000) + `{}]}`)
		Expect(len(up.JSON)).To(BeNumerically("<=", runnerapi.MaxPlanJSONBytes))
		rec = r.savePlan(up)
		Expect(rec.JSONLeftOut).To(BeTrue())
		Expect(o.storedRecord().JSONLeftOut).To(BeTrue())
		var left map[string]runnerapi.PlanJSONTruncation
		Expect(json.Unmarshal(o.planSecret().Data[runnerapi.PlanJSONKey], &left)).To(Succeed())
		Expect(left).To(HaveKey(runnerapi.PlanJSONTruncatedKey))
		Expect(left[runnerapi.PlanJSONTruncatedKey].Reason).To(ContainSubstring("did not fit the plan Secret beside the plan file"))
		Expect(left[runnerapi.PlanJSONTruncatedKey].KeptChanges).To(BeZero())
		Expect(left[runnerapi.PlanJSONTruncatedKey].ResourceChanges).To(Equal(3))

		By("a JSON plan that is not JSON is refused")
		up = upload(planZip(1, "l", []byte("small")))
		up.JSON = []byte(`{"resource_changes":`)
		code, body = r.putPlan(up)
		Expect(code).To(Equal(http.StatusBadRequest), body)
		Expect(body).To(ContainSubstring("the JSON plan is not JSON"))
	})

	It("fences a plan write: refused and recorded once the run lease names another Job; the stored plan stays", func() {
		o := newObject()
		r := o.planChannel()
		first := r.savePlan(upload(planZip(1, "l", []byte("first"))))
		o.setRunLease(naming.JobName(o.suffix, 8))
		code, body := r.putPlan(upload(planZip(1, "l", []byte("second"))))
		Expect(code).To(Equal(http.StatusForbidden), body)
		Expect(r.records().Fenced).To(Equal(&runnerapi.Fenced{Request: "PUT /plan", RunLeaseHolder: naming.JobName(o.suffix, 8)}))
		Expect(o.storedRecord().ID).To(Equal(first.ID))
	})

	Context("handing out", func() {
		var o *tfObject
		var file []byte
		var rec runnerapi.PlanRecord
		BeforeEach(func() {
			o = newObject()
			file = planZip(3, "lineage-b", []byte("the approved plan"))
			rec = o.planChannel().savePlan(upload(file))
		})

		It("hands the approved plan to its Apply Job once, marking it consumed by that Job", func() {
			a := o.applyChannel(9, rec.ID)
			code, dl, _ := a.getPlan()
			Expect(code).To(Equal(http.StatusOK))
			Expect(dl.File).To(Equal(file))
			Expect(dl.Record).To(Equal(rec))
			Expect(o.planSecret().Annotations).To(HaveKeyWithValue(runnerapi.PlanConsumedByAnnotation, naming.JobName(o.suffix, 9)))

			By("the same Job may fetch it again")
			code, dl, _ = a.getPlan()
			Expect(code).To(Equal(http.StatusOK))
			Expect(dl.File).To(Equal(file))

			By("another Job of the same plan ID is refused: a plan is applied at most once")
			b := o.applyChannel(10, rec.ID)
			code, _, refusal := b.getPlan()
			Expect(code).To(Equal(http.StatusConflict))
			Expect(refusal.Reason).To(Equal(runnerapi.PlanRefusedConsumed))
			Expect(refusal.Message).To(ContainSubstring(naming.JobName(o.suffix, 9)))
			Expect(o.planSecret().Annotations).To(HaveKeyWithValue(runnerapi.PlanConsumedByAnnotation, naming.JobName(o.suffix, 9)))

			By("a new plan clears the mark")
			o.setRunLease(o.job)
			next := o.planChannel().savePlan(upload(planZip(4, "lineage-b", []byte("the next plan"))))
			Expect(o.planSecret().Annotations).NotTo(HaveKey(runnerapi.PlanConsumedByAnnotation))
			Expect(o.planSecret().Annotations).To(HaveKeyWithValue(runnerapi.PlanIDAnnotation, next.ID))
		})

		It("refuses a plan other than the approved one: superseded, and leaves it unconsumed", func() {
			other := runnerapi.PlanID(rec.FileSHA256, inputsHash, 2, "lineage-b")
			code, _, refusal := o.applyChannel(9, other).getPlan()
			Expect(code).To(Equal(http.StatusConflict))
			Expect(refusal.Reason).To(Equal(runnerapi.PlanRefusedSuperseded))
			Expect(refusal.Message).To(ContainSubstring(rec.ID))
			Expect(o.planSecret().Annotations).NotTo(HaveKey(runnerapi.PlanConsumedByAnnotation))

			By("an empty plan Secret holds no plan")
			sec := o.planSecret()
			sec.Data = nil
			Expect(k8s.Update(ctx, sec)).To(Succeed())
			code, _, refusal = o.applyChannel(10, rec.ID).getPlan()
			Expect(code).To(Equal(http.StatusConflict))
			Expect(refusal.Reason).To(Equal(runnerapi.PlanRefusedSuperseded))
		})

		It("refuses a plan whose stored file is not the one its record names", func() {
			sec := o.planSecret()
			var gz bytes.Buffer
			zw := gzip.NewWriter(&gz)
			_, err := zw.Write(planZip(3, "lineage-b", []byte("a swapped plan")))
			Expect(err).NotTo(HaveOccurred())
			Expect(zw.Close()).To(Succeed())
			sec.Data[runnerapi.PlanFileKey] = gz.Bytes()
			Expect(k8s.Update(ctx, sec)).To(Succeed())
			code, _, refusal := o.applyChannel(9, rec.ID).getPlan()
			Expect(code).To(Equal(http.StatusUnprocessableEntity))
			Expect(refusal.Reason).To(Equal(runnerapi.PlanRefusedCorrupt))
			Expect(refusal.Message).To(ContainSubstring("SHA-256"))
			Expect(o.planSecret().Annotations).NotTo(HaveKey(runnerapi.PlanConsumedByAnnotation))
		})

		It("refuses a record whose ID is not the hash of its fields", func() {
			sec := o.planSecret()
			tampered := rec
			tampered.StateSerial = 7 // the file, the approval and the ID still say 3
			b, err := json.Marshal(tampered)
			Expect(err).NotTo(HaveOccurred())
			sec.Data[runnerapi.PlanRecordKey] = b
			Expect(k8s.Update(ctx, sec)).To(Succeed())
			code, _, refusal := o.applyChannel(9, rec.ID).getPlan()
			Expect(code).To(Equal(http.StatusUnprocessableEntity))
			Expect(refusal.Reason).To(Equal(runnerapi.PlanRefusedCorrupt))
		})

		It("fences a plan fetch: refused and recorded, the plan not consumed", func() {
			a := o.applyChannel(9, rec.ID)
			o.setRunLease(naming.JobName(o.suffix, 11))
			code, body := a.do(http.MethodGet, a.planURL(), nil, a.cred)
			Expect(code).To(Equal(http.StatusForbidden), body)
			Expect(a.records().Fenced).To(Equal(&runnerapi.Fenced{Request: "GET /plan", RunLeaseHolder: naming.JobName(o.suffix, 11)}))
			Expect(o.planSecret().Annotations).NotTo(HaveKey(runnerapi.PlanConsumedByAnnotation))
		})

		It("hands a plan to one of two racing claims only: the mark is a conditional write", func() {
			a := o.applyChannel(9, rec.ID)
			rival := naming.JobName(o.suffix, 12)
			a.srv.beforeClaim = func() {
				// Another channel (one that slipped past fencing) claims the plan between this
				// channel's read and its write.
				sec := o.planSecret()
				sec.Annotations[runnerapi.PlanConsumedByAnnotation] = rival
				Expect(k8s.Update(ctx, sec)).To(Succeed())
			}
			code, _, refusal := a.getPlan()
			Expect(code).To(Equal(http.StatusConflict))
			Expect(refusal.Reason).To(Equal(runnerapi.PlanRefusedConsumed))
			Expect(o.planSecret().Annotations).To(HaveKeyWithValue(runnerapi.PlanConsumedByAnnotation, rival))
		})

		It("refuses an apply plan to a Refresh Job: kind, and leaves it unconsumed", func() {
			code, _, refusal := o.refreshChannel(9, rec.ID).getPlan()
			Expect(code).To(Equal(http.StatusConflict))
			Expect(refusal.Reason).To(Equal(runnerapi.PlanRefusedKind))
			Expect(refusal.Message).To(ContainSubstring("is an apply plan, which only an Apply Job applies"))
			Expect(o.planSecret().Annotations).NotTo(HaveKey(runnerapi.PlanConsumedByAnnotation))

			By("and to a Destroy Job")
			code, _, refusal = o.destroyChannel(10, rec.ID).getPlan()
			Expect(code).To(Equal(http.StatusConflict))
			Expect(refusal.Reason).To(Equal(runnerapi.PlanRefusedKind))
			Expect(o.planSecret().Annotations).NotTo(HaveKey(runnerapi.PlanConsumedByAnnotation))

			By("its Apply Job still gets it")
			code, dl, _ := o.applyChannel(10, rec.ID).getPlan()
			Expect(code).To(Equal(http.StatusOK))
			Expect(dl.File).To(Equal(file))
		})

		It("hands out nothing to a Job that applies no saved plan", func() {
			r := start(o.config(GinkgoT().TempDir()))
			code, body := r.do(http.MethodGet, r.planURL(), nil, r.cred)
			Expect(code).To(Equal(http.StatusForbidden), body)
			code, _ = r.do(http.MethodGet, r.addr+runnerapi.PlanPathPrefix+namespace+"/ffffffffffffffff", nil, r.cred)
			Expect(code).To(Equal(http.StatusForbidden), "another object's plan")
			code, _ = r.do(http.MethodGet, r.planURL(), nil, "wrong")
			Expect(code).To(Equal(http.StatusUnauthorized))
		})
	})
	Context("handing out a destroy plan", func() {
		var o *tfObject
		var file []byte
		var rec runnerapi.PlanRecord
		BeforeEach(func() {
			o = newObject()
			file = planZip(3, "lineage-c", []byte("the approved destroy plan"))
			rec = o.destroyPlanChannel().savePlan(upload(file))
		})

		It("records the kind from its own flag, refuses the plan to an Apply and a Refresh Job, and hands it to its Destroy Job once", func() {
			Expect(rec.Destroy).To(BeTrue())
			Expect(rec.RefreshOnly).To(BeFalse())
			for _, channelOf := range []func(int64, string) *running{o.applyChannel, o.refreshChannel} {
				code, _, refusal := channelOf(9, rec.ID).getPlan()
				Expect(code).To(Equal(http.StatusConflict))
				Expect(refusal.Reason).To(Equal(runnerapi.PlanRefusedKind))
				Expect(refusal.Message).To(ContainSubstring("is a destroy plan, which only a Destroy Job applies"))
				Expect(o.planSecret().Annotations).NotTo(HaveKey(runnerapi.PlanConsumedByAnnotation))
			}
			code, dl, _ := o.destroyChannel(11, rec.ID).getPlan()
			Expect(code).To(Equal(http.StatusOK))
			Expect(dl.File).To(Equal(file))
			Expect(dl.Record).To(Equal(rec))
			Expect(o.planSecret().Annotations).To(HaveKeyWithValue(runnerapi.PlanConsumedByAnnotation, naming.JobName(o.suffix, 11)))
		})
	})
	Context("handing out a refresh-only plan", func() {
		var o *tfObject
		var file []byte
		var rec runnerapi.PlanRecord
		BeforeEach(func() {
			o = newObject()
			file = planZip(3, "lineage-c", []byte("the approved refresh-only plan"))
			rec = o.refreshPlanChannel().savePlan(upload(file))
			Expect(rec.RefreshOnly).To(BeTrue())
		})

		It("refuses a refresh-only plan to an Apply Job: kind, and leaves it unconsumed", func() {
			code, _, refusal := o.applyChannel(9, rec.ID).getPlan()
			Expect(code).To(Equal(http.StatusConflict))
			Expect(refusal.Reason).To(Equal(runnerapi.PlanRefusedKind))
			Expect(refusal.Message).To(ContainSubstring("only a Refresh Job applies"))
			Expect(o.planSecret().Annotations).NotTo(HaveKey(runnerapi.PlanConsumedByAnnotation))
		})

		It("hands the approved refresh-only plan to its Refresh Job once, marking it consumed by that Job", func() {
			code, dl, _ := o.refreshChannel(9, rec.ID).getPlan()
			Expect(code).To(Equal(http.StatusOK))
			Expect(dl.File).To(Equal(file))
			Expect(dl.Record).To(Equal(rec))
			Expect(o.planSecret().Annotations).To(HaveKeyWithValue(runnerapi.PlanConsumedByAnnotation, naming.JobName(o.suffix, 9)))

			By("another Refresh Job of the same plan ID is refused: a plan is applied at most once")
			code, _, refusal := o.refreshChannel(10, rec.ID).getPlan()
			Expect(code).To(Equal(http.StatusConflict))
			Expect(refusal.Reason).To(Equal(runnerapi.PlanRefusedConsumed))
		})
	})
})
