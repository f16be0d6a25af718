package channel

import (
	"encoding/json"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// putState writes state into the state Secret directly, as a previous run or a person with
// kubectl leaves it ("" removes the tfstate key: no state).
func (o *tfObject) putState(state string) {
	GinkgoHelper()
	sec := o.stateSecret()
	if state == "" {
		delete(sec.Data, runnerapi.StateKey)
	} else {
		gz, err := runnerapi.EncodeState([]byte(state))
		Expect(err).NotTo(HaveOccurred())
		if sec.Data == nil {
			sec.Data = map[string][]byte{}
		}
		sec.Data[runnerapi.StateKey] = gz
	}
	Expect(k8s.Update(ctx, sec)).To(Succeed())
}

// storedState is the state Secret's tfstate value as stored (gzip'd bytes, nil when absent)
// and the Secret's resourceVersion.
func (o *tfObject) storedState() ([]byte, string) {
	GinkgoHelper()
	sec := o.stateSecret()
	return sec.Data[runnerapi.StateKey], sec.ResourceVersion
}

// stateHead is the lineage and serial of the state the Secret holds.
func (o *tfObject) stateHead() (string, int) {
	GinkgoHelper()
	raw := o.stateSecret().Data[runnerapi.StateKey]
	Expect(raw).NotTo(BeEmpty(), "the state Secret holds no state")
	var h struct {
		Lineage string `json:"lineage"`
		Serial  int    `json:"serial"`
	}
	Expect(json.Unmarshal([]byte(gunzip(raw)), &h)).To(Succeed())
	return h.Lineage, h.Serial
}

func stateOf(lineage string, serial int) []byte {
	b, _ := json.Marshal(map[string]any{"version": 4, "terraform_version": "1.11.4", "serial": serial, "lineage": lineage,
		"outputs": map[string]any{}, "resources": []any{}})
	return b
}

func postRefusal(expected, sent string) *StateRefusal {
	return &StateRefusal{StateRefused: runnerapi.StateRefused{Expected: expected}, Request: http.MethodPost, Sent: sent}
}

var _ = Describe("state writes carry the run's lineage", func() {
	It("refuses a hostile module's write of another lineage under terraform's own lock, and keeps the state byte for byte", func() {
		o := newObject()
		o.putState(stateV1) // lineage 3f2a, serial 1: what the last run left and the controller read
		cfg := o.config(GinkgoT().TempDir())
		cfg.Operation, cfg.StateLineage = runnerapi.OperationApply, "3f2a"
		r := start(cfg)

		By("terraform reads the state and takes the lock")
		code, body := r.call(http.MethodGet, "", nil)
		Expect(code).To(Equal(http.StatusOK), body)
		Expect(body).To(Equal(stateV1))
		code, body = r.call(methodLock, "", lockBody("tf-lock-7d1e", "runner@"+o.pod))
		Expect(code).To(Equal(http.StatusOK), body)
		before, version := o.storedState()

		By("the module learns terraform's lock ID: a LOCK with another ID answers 423 with the holder's lock info")
		code, body = r.call(methodLock, "", lockBody("module-probe", "module@"+o.pod))
		Expect(code).To(Equal(http.StatusLocked), body)
		var holder lockInfo
		Expect(json.Unmarshal([]byte(body), &holder)).To(Succeed())
		Expect(holder.ID).To(Equal("tf-lock-7d1e"))

		By("the module writes a state of another lineage with the learned ID: refused, nothing written")
		code, body = r.call(http.MethodPost, "?ID="+holder.ID, stateOf("f00d-foreign", 9))
		Expect(code).To(Equal(http.StatusConflict), body)
		Expect(body).To(ContainSubstring("state write refused"))
		Expect(body).To(ContainSubstring("lineage 3f2a"))
		Expect(body).To(ContainSubstring("sent lineage f00d-foreign"))
		Expect(body).To(ContainSubstring("nothing was written"))
		after, afterVersion := o.storedState()
		Expect(after).To(Equal(before), "the state Secret holds the original state, byte for byte")
		Expect(afterVersion).To(Equal(version), "the state Secret was not written at all")
		Expect(gunzip(after)).To(Equal(stateV1))
		lineage, serial := o.stateHead()
		Expect(lineage).To(Equal("3f2a"))
		Expect(serial).To(Equal(1))
		Expect(r.records().StateRefused).To(Equal(postRefusal("3f2a", "f00d-foreign")), "recorded for the runner")

		By("terraform's own write, the run's lineage with a higher serial, still succeeds")
		code, body = r.call(http.MethodPost, "?ID=tf-lock-7d1e", stateOf("3f2a", 2))
		Expect(code).To(Equal(http.StatusOK), body)
		lineage, serial = o.stateHead()
		Expect(lineage).To(Equal("3f2a"))
		Expect(serial).To(Equal(2))
	})

	It("refuses a write of another lineage than the one the controller read, even after the state Secret lost that state", func() {
		o := newObject()
		o.putState(stateV1)
		cfg := o.config(GinkgoT().TempDir())
		cfg.Operation, cfg.StateLineage = runnerapi.OperationApply, "3f2a"
		r := start(cfg)
		Expect(r.code(methodLock, "", lockBody("tf", "runner"))).To(Equal(http.StatusOK))

		By("a person empties the state Secret; the module writes its own state without reading")
		o.putState("")
		code, body := r.call(http.MethodPost, "?ID=tf", stateOf("9e1b", 1))
		Expect(code).To(Equal(http.StatusConflict), body)
		Expect(body).To(ContainSubstring("lineage 3f2a (the lineage the controller read)"))
		Expect(o.stateSecret().Data).NotTo(HaveKey(runnerapi.StateKey))
		Expect(r.records().StateRefused).To(Equal(postRefusal("3f2a", "9e1b")))
	})

	It("pins a first apply's lineage at its first write: another lineage is refused later, even after the state was emptied", func() {
		o := newObject()
		cfg := o.config(GinkgoT().TempDir())
		cfg.Operation = runnerapi.OperationApply // no --state-lineage: the controller read no state
		r := start(cfg)
		Expect(r.code(http.MethodGet, "", nil)).To(Equal(http.StatusNoContent))
		Expect(r.code(methodLock, "", lockBody("tf", "runner"))).To(Equal(http.StatusOK))

		By("the first write pins its lineage")
		code, body := r.call(http.MethodPost, "?ID=tf", stateOf("a1a1", 1))
		Expect(code).To(Equal(http.StatusOK), body)
		Expect(r.records()).To(Equal(Records{}))

		By("a second write that changes the lineage is refused")
		before, version := o.storedState()
		code, body = r.call(http.MethodPost, "?ID=tf", stateOf("b2b2", 2))
		Expect(code).To(Equal(http.StatusConflict), body)
		Expect(body).To(ContainSubstring("this run's state is lineage a1a1 (the lineage this run wrote first)"))
		Expect(body).To(ContainSubstring("sent lineage b2b2"))
		after, afterVersion := o.storedState()
		Expect(after).To(Equal(before))
		Expect(afterVersion).To(Equal(version))
		Expect(r.records().StateRefused).To(Equal(postRefusal("a1a1", "b2b2")))

		By("the pinned lineage with a higher serial is written")
		Expect(r.code(http.MethodPost, "?ID=tf", stateOf("a1a1", 2))).To(Equal(http.StatusOK))
		lineage, serial := o.stateHead()
		Expect([]any{lineage, serial}).To(Equal([]any{"a1a1", 2}))

		By("the state is emptied mid-run: the pin holds, not what the Secret holds now")
		o.putState("")
		code, body = r.call(http.MethodPost, "?ID=tf", stateOf("b2b2", 3))
		Expect(code).To(Equal(http.StatusConflict), body)
		Expect(o.stateSecret().Data).NotTo(HaveKey(runnerapi.StateKey))
		Expect(r.code(http.MethodPost, "?ID=tf", stateOf("a1a1", 3))).To(Equal(http.StatusOK))
		lineage, serial = o.stateHead()
		Expect([]any{lineage, serial}).To(Equal([]any{"a1a1", 3}))
	})

	It("pins the state a first apply finds in the Secret, when one appeared after the controller read none", func() {
		o := newObject()
		o.putState(stateV1)
		cfg := o.config(GinkgoT().TempDir())
		cfg.Operation = runnerapi.OperationApply
		r := start(cfg)
		Expect(r.code(methodLock, "", lockBody("tf", "runner"))).To(Equal(http.StatusOK))
		code, body := r.call(http.MethodPost, "?ID=tf", stateOf("9e1b", 1))
		Expect(code).To(Equal(http.StatusConflict), body)
		Expect(body).To(ContainSubstring("lineage 3f2a (the lineage of the state the Secret held at the run's first write)"))
		Expect(gunzip(o.stateSecret().Data[runnerapi.StateKey])).To(Equal(stateV1))
		Expect(r.code(http.MethodPost, "?ID=tf", stateOf("3f2a", 2))).To(Equal(http.StatusOK))
		lineage, serial := o.stateHead()
		Expect([]any{lineage, serial}).To(Equal([]any{"3f2a", 2}))
	})

	It("refuses a write that is not a state document with a lineage", func() {
		o := newObject()
		o.putState(stateV1)
		cfg := o.config(GinkgoT().TempDir())
		cfg.Operation, cfg.StateLineage = runnerapi.OperationApply, "3f2a"
		r := start(cfg)
		Expect(r.code(methodLock, "", lockBody("tf", "runner"))).To(Equal(http.StatusOK))
		before, _ := o.storedState()
		for _, b := range []string{`not json`, `{"version":4,"serial":2}`, `{"version":4,"serial":2,"lineage":""}`, `[]`, `null`, `"3f2a"`} {
			code, body := r.call(http.MethodPost, "?ID=tf", []byte(b))
			Expect(code).To(Equal(http.StatusConflict), "%s: %s", b, body)
			Expect(body).To(ContainSubstring("state write refused"), b)
			Expect(body).To(ContainSubstring("nothing was written"), b)
			Expect(r.records().StateRefused).To(Equal(postRefusal("3f2a", "")), b)
		}
		after, _ := o.storedState()
		Expect(after).To(Equal(before))
	})

	It("lets a Restore replace a state of another lineage, then pins the restored lineage", func() {
		o := newObject()
		// The current state is empty (no resources, no outputs) and of another lineage: the
		// runner pushes the backup over it.
		o.putState(string(stateOf("old-1", 3)))
		cfg := o.config(GinkgoT().TempDir())
		cfg.Operation = runnerapi.OperationRestore
		r := start(cfg)
		Expect(r.code(methodLock, "", lockBody("restore", "captf-runner"))).To(Equal(http.StatusOK))
		code, body := r.call(http.MethodPost, "?ID=restore", stateOf("backup-1", 5))
		Expect(code).To(Equal(http.StatusOK), body)
		lineage, serial := o.stateHead()
		Expect([]any{lineage, serial}).To(Equal([]any{"backup-1", 5}))
		Expect(r.records()).To(Equal(Records{}))

		code, body = r.call(http.MethodPost, "?ID=restore", stateOf("other-2", 6))
		Expect(code).To(Equal(http.StatusConflict), body)
		Expect(body).To(ContainSubstring("this run's state is lineage backup-1"))
		lineage, serial = o.stateHead()
		Expect([]any{lineage, serial}).To(Equal([]any{"backup-1", 5}))
		Expect(r.records().StateRefused).To(Equal(postRefusal("backup-1", "other-2")))
	})
})
