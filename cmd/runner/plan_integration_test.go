package main

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// planModule changes each kind of resource between inputs: greeting is updated in place when
// name changes, replaced is replaced, extra[*] are created and legacy[*] deleted as their
// counts change. sealed and the output shout hold values terraform marks sensitive that the
// redact list does not name (the secret word in upper case), so only the JSON plan's masking
// keeps them out of the plan Secret.
const planModule = `
variable "name" {
  type = string
}

variable "secret_word" {
  type      = string
  sensitive = true
}

variable "extra" {
  type    = number
  default = 0
}

variable "legacy" {
  type    = number
  default = 0
}

resource "terraform_data" "greeting" {
  input = "hello ${var.name}"
}

resource "terraform_data" "replaced" {
  input            = "fixed"
  triggers_replace = [var.name]
}

resource "terraform_data" "extra" {
  count = var.extra
  input = "extra ${count.index}"
}

resource "terraform_data" "legacy" {
  count = var.legacy
  input = "legacy ${count.index}"
}

output "greeting" {
  value = terraform_data.greeting.output
}

resource "terraform_data" "sealed" {
  # triggers_replace, unlike input, is not echoed in an attribute terraform leaves unmarked.
  triggers_replace = sensitive({ word = "sealed-${upper(var.secret_word)}", plain = "visible" })
}

output "shout" {
  value     = upper(var.secret_word)
  sensitive = true
}

output "secret_length" {
  value     = length(var.secret_word)
  sensitive = true
}
`

// newPlanObject is an object of planModule in a fresh namespace, prepared as the controller
// prepares it (state, lock, plan Secret, run lease).
func newPlanObject(bin string) *stateObject {
	specs++
	ns := h.namespace(ctx, "runner-plan-")
	o := h.newObjectWithModule(ctx, bins[bin], ns, fmt.Sprintf("plan-%d", specs), GinkgoT().TempDir(), GinkgoWriter, planModule)
	o.prepare()
	return o
}

// storedPlan is the plan Secret as the controller reads it.
type storedPlan struct {
	record      runnerapi.PlanRecord
	file        []byte
	text        string
	json        string
	annotations map[string]string
	// digests are those of the artifacts as the Secret holds them.
	digests runnerapi.PlanDigests
}

// savedRef is the Result's savedPlan of this stored plan: its reference and the digests of
// its artifacts as stored (what the controller binds the plan Secret with).
func (p storedPlan) savedRef() runnerapi.PlanRef {
	ref := p.record.Ref()
	d := p.digests
	ref.Digests = &d
	return ref
}

func (o *stateObject) readPlan() storedPlan {
	sec := &corev1.Secret{}
	Expect(o.h.k8s.Get(o.ctx, client.ObjectKey{Namespace: o.namespace, Name: naming.PlanSecretName(o.suffix)}, sec)).To(Succeed())
	var p storedPlan
	Expect(json.Unmarshal(sec.Data[runnerapi.PlanRecordKey], &p.record)).To(Succeed())
	zr, err := gzip.NewReader(bytes.NewReader(sec.Data[runnerapi.PlanFileKey]))
	Expect(err).NotTo(HaveOccurred())
	p.file, err = io.ReadAll(zr)
	Expect(err).NotTo(HaveOccurred())
	p.text = string(sec.Data[runnerapi.PlanTextKey])
	p.json = string(sec.Data[runnerapi.PlanJSONKey])
	p.annotations = sec.Annotations
	p.digests = runnerapi.DigestPlanArtifacts(sec.Data)
	return p
}

// tamperState changes the state behind terraform's back, as a person editing the Secret would:
// mutate edits the state JSON, and the serial moves on.
func (o *stateObject) tamperState(mutate func(state map[string]any)) {
	sec := &corev1.Secret{}
	Expect(o.h.k8s.Get(o.ctx, client.ObjectKey{Namespace: o.namespace, Name: naming.StateSecretName(o.suffix)}, sec)).To(Succeed())
	_, raw := o.readState()
	var state map[string]any
	Expect(json.Unmarshal(raw, &state)).To(Succeed())
	mutate(state)
	state["serial"] = state["serial"].(float64) + 1
	b, err := json.Marshal(state)
	Expect(err).NotTo(HaveOccurred())
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err = zw.Write(b)
	Expect(err).NotTo(HaveOccurred())
	Expect(zw.Close()).To(Succeed())
	sec.Data[runnerapi.StateKey] = gz.Bytes()
	Expect(o.h.k8s.Update(o.ctx, sec)).To(Succeed())
}

// setGreetingInput makes the state say terraform_data.greeting's input (and output) is v.
func setGreetingInput(v string) func(map[string]any) {
	return func(state map[string]any) {
		for _, r := range state["resources"].([]any) {
			res := r.(map[string]any)
			if res["name"] != "greeting" {
				continue
			}
			attrs := res["instances"].([]any)[0].(map[string]any)["attributes"].(map[string]any)
			attrs["input"] = map[string]any{"value": v, "type": "string"}
			attrs["output"] = map[string]any{"value": v, "type": "string"}
		}
	}
}

func resourceNames(st tfState) []string {
	var out []string
	for _, r := range st.Resources {
		out = append(out, r.Name)
	}
	return out
}

// describePlans: saved plans, their application, drift and refresh, through the state channel.
func describePlans(bin string) {
	Describe(bin+": saved plans through the state channel", func() {
		It("summarises, saves, applies exactly once, and re-plans against the next serial", func() {
			o := newPlanObject(bin)
			before := map[string]any{"name": "alpha", "legacy": 1}
			_, code, raw := o.runJob(runnerapi.OperationApply, before)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			st0, _ := o.readState()

			By("(a) a plan with a create, an update, a replace and a delete: the counts and the sorted addresses")
			after := map[string]any{"name": "beta", "extra": 1}
			planJob := o.startJobOf(runnerapi.OperationPlan, after, jobOpts{})
			res, code, raw := planJob.wait()
			GinkgoWriter.Printf("runner result (plan): %s\n", raw)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Changes).To(HaveValue(BeTrue()))
			Expect(stepNames(res)).To(Equal([]string{"init", "plan", "show-json", "show"}))
			want := runnerapi.PlanSummary{Create: 1, Update: 1, Replace: 1, Delete: 1,
				Addresses: []string{"terraform_data.extra[0]", "terraform_data.greeting", "terraform_data.legacy[0]", "terraform_data.replaced"}}
			Expect(res.Summary).To(Equal(&want))
			Expect(res.SavedPlan).NotTo(BeNil())
			st, _ := o.readState()
			Expect(st.Serial).To(Equal(st0.Serial), "a plan writes no state")

			By("(b) the plan Secret holds the plan, bound to its file, the inputs and the state serial and lineage")
			p := o.readPlan()
			Expect(*res.SavedPlan).To(Equal(p.savedRef()), "the result reports the digests of the artifacts as stored")
			Expect(p.record.FileSHA256).To(Equal(runnerapi.FileSHA256(p.file)))
			Expect(p.record.StateSerial).To(BeEquivalentTo(st0.Serial))
			Expect(p.record.StateLineage).To(Equal(st0.Lineage))
			Expect(p.record.InputsHash).To(Equal(inputsHash(after)))
			Expect(p.record.ID).To(Equal(runnerapi.PlanID(p.record.FileSHA256, inputsHash(after), uint64(st0.Serial), st0.Lineage)))
			Expect(p.record.PlanSummary).To(Equal(want))
			Expect(p.annotations).To(HaveKeyWithValue(runnerapi.PlanIDAnnotation, p.record.ID))
			Expect(p.text).To(ContainSubstring("terraform_data.greeting will be updated in-place"))
			Expect(p.text).To(ContainSubstring("terraform_data.replaced must be replaced"))
			Expect(p.text).NotTo(ContainSubstring(secretWord))

			By("(b2) the JSON plan keeps the changes and masks every sensitive value: variables, outputs, attributes")
			Expect(p.json).NotTo(ContainSubstring(secretWord))
			Expect(p.json).NotTo(ContainSubstring(strings.ToUpper(secretWord)), "a value terraform marks sensitive is masked")
			Expect(p.record.JSONLeftOut).To(BeFalse())
			var doc struct {
				Variables map[string]struct {
					Value any `json:"value"`
				} `json:"variables"`
				ResourceChanges []struct {
					Address string `json:"address"`
					Change  struct {
						Actions []string       `json:"actions"`
						Before  map[string]any `json:"before"`
						After   map[string]any `json:"after"`
					} `json:"change"`
				} `json:"resource_changes"`
				OutputChanges map[string]struct {
					Before any `json:"before"`
					After  any `json:"after"`
				} `json:"output_changes"`
				Configuration any `json:"configuration"`
				PriorState    any `json:"prior_state"`
			}
			Expect(json.Unmarshal([]byte(p.json), &doc)).To(Succeed())
			Expect(doc.Variables).To(HaveKeyWithValue("secret_word", HaveField("Value", runnerapi.SensitiveValue)))
			Expect(doc.Variables).To(HaveKeyWithValue("name", HaveField("Value", "beta")))
			Expect(doc.OutputChanges).To(HaveKeyWithValue("shout", And(HaveField("Before", runnerapi.SensitiveValue), HaveField("After", runnerapi.SensitiveValue))))
			Expect(doc.OutputChanges).To(HaveKeyWithValue("secret_length", HaveField("After", runnerapi.SensitiveValue)))
			Expect(doc.OutputChanges).To(HaveKeyWithValue("greeting", HaveField("Before", "hello alpha")), "a value not marked sensitive stays")
			Expect(doc.Configuration).To(BeNil(), "the module's expressions are left out")
			Expect(doc.PriorState).To(BeNil(), "the prior state is left out")
			changes := map[string][]string{}
			for _, c := range doc.ResourceChanges {
				changes[c.Address] = c.Change.Actions
				if c.Address == "terraform_data.sealed" {
					Expect(c.Change.Before).To(HaveKeyWithValue("triggers_replace", runnerapi.SensitiveValue))
					Expect(c.Change.After).To(HaveKeyWithValue("triggers_replace", runnerapi.SensitiveValue))
				}
			}
			Expect(changes).To(Equal(map[string][]string{"terraform_data.extra[0]": {"create"}, "terraform_data.greeting": {"update"},
				"terraform_data.legacy[0]": {"delete"}, "terraform_data.replaced": {"delete", "create"}, "terraform_data.sealed": {"no-op"}}))
			cred, err := os.ReadFile(filepath.Join(planJob.dir, runnerapi.ChannelCredentialFile))
			Expect(err).NotTo(HaveOccurred())
			for name, entry := range zipEntries(p.file) {
				Expect(entry).NotTo(ContainSubstring("127.0.0.1:"), "%s records the plan Job's channel address", name)
				Expect(entry).NotTo(ContainSubstring(string(cred)), "%s holds the per-run credential", name)
			}

			By("(c) the apply of the saved plan applies exactly it")
			res, code, raw = o.runJobOf(runnerapi.OperationApply, after, jobOpts{planID: p.record.ID})
			GinkgoWriter.Printf("runner result (apply of the saved plan): %s\n", raw)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.AppliedPlan).To(Equal(&runnerapi.PlanRef{ID: p.record.ID, FileSHA256: p.record.FileSHA256}))
			Expect(stepNames(res)).To(Equal([]string{"init", "apply"}))
			st1, _ := o.readState()
			Expect(st1.Serial).To(Equal(st0.Serial + 1))
			Expect(st1.Lineage).To(Equal(st0.Lineage))
			Expect(st1.Outputs["greeting"].Value).To(Equal("hello beta"))
			Expect(resourceNames(st1)).To(ConsistOf("greeting", "replaced", "extra", "sealed"))
			Expect(o.readPlan().annotations).To(HaveKeyWithValue(runnerapi.PlanConsumedByAnnotation, naming.JobName(o.suffix, o.seq)))
			Expect(o.lockLease().Spec.HolderIdentity).To(BeNil())

			By("(d) a second apply of the same plan is refused, and applies nothing")
			res, code, raw = o.runJobOf(runnerapi.OperationApply, after, jobOpts{planID: p.record.ID})
			Expect(code).To(Equal(runnerapi.ExitPlanRefused), raw)
			Expect(res.Outcome).To(Equal(runnerapi.OutcomeFailed))
			Expect(res.PlanRefused).To(Equal(runnerapi.PlanRefusedConsumed))
			Expect(res.AppliedPlan).To(BeNil())
			st2, _ := o.readState()
			Expect(st2.Serial).To(Equal(st1.Serial))

			By("(b) a plan against the next serial has another ID; with no changes the counts are zero")
			res, code, raw = o.runJob(runnerapi.OperationPlan, after)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Changes).To(HaveValue(BeFalse()))
			Expect(res.Summary).To(Equal(&runnerapi.PlanSummary{}))
			next := o.readPlan()
			Expect(next.record.StateSerial).To(BeEquivalentTo(st1.Serial))
			Expect(next.record.ID).NotTo(Equal(p.record.ID))
			Expect(next.annotations).NotTo(HaveKey(runnerapi.PlanConsumedByAnnotation))
		})

		It("(e) refuses a saved plan whose state changed since: stale, nothing applied", func() {
			o := newPlanObject(bin)
			_, code, raw := o.runJob(runnerapi.OperationApply, map[string]any{"name": "alpha"})
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			res, code, raw := o.runJob(runnerapi.OperationPlan, map[string]any{"name": "beta"})
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			id := res.SavedPlan.ID

			// Another apply moves the state on before the approved plan runs.
			_, code, raw = o.runJob(runnerapi.OperationApply, map[string]any{"name": "gamma"})
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			moved, _ := o.readState()

			res, code, raw = o.runJobOf(runnerapi.OperationApply, map[string]any{"name": "beta"}, jobOpts{planID: id})
			GinkgoWriter.Printf("runner result (stale plan): %s\n", raw)
			Expect(code).To(Equal(runnerapi.ExitPlanRefused), raw)
			Expect(res.Outcome).To(Equal(runnerapi.OutcomeFailed))
			Expect(res.PlanStale).To(BeTrue())
			Expect(res.AppliedPlan).To(BeNil())
			Expect(res.Error).To(ContainSubstring("Saved plan is stale"))
			after, _ := o.readState()
			Expect(after.Serial).To(Equal(moved.Serial), "nothing was applied")
			Expect(after.Outputs["greeting"].Value).To(Equal("hello gamma"))
			Expect(o.lockLease().Spec.HolderIdentity).To(BeNil())
		})

		It("(f) drift: a state changed behind terraform's back shows an update; no drift is no drift; refresh records the outputs that follow it", func() {
			o := newPlanObject(bin)
			vars := map[string]any{"name": "alpha"}
			_, code, raw := o.runJob(runnerapi.OperationApply, vars)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)

			res, code, raw := o.runJob(runnerapi.OperationDrift, vars)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Drift).To(HaveValue(BeFalse()))
			Expect(res.Summary).To(Equal(&runnerapi.PlanSummary{}))
			Expect(res.SavedPlan).To(BeNil(), "a drift check saves no plan")

			o.tamperState(setGreetingInput("tampered"))
			tampered, _ := o.readState()
			res, code, raw = o.runJob(runnerapi.OperationDrift, vars)
			GinkgoWriter.Printf("runner result (drift): %s\n", raw)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Outcome).To(Equal(runnerapi.OutcomeSucceeded), "drift is not a failure")
			Expect(res.Drift).To(HaveValue(BeTrue()))
			Expect(res.Summary).To(Equal(&runnerapi.PlanSummary{Update: 1, Addresses: []string{"terraform_data.greeting"}}))
			st, _ := o.readState()
			Expect(st.Serial).To(Equal(tampered.Serial), "a drift check writes no state")

			res, code, raw = o.runJob(runnerapi.OperationRefresh, vars)
			GinkgoWriter.Printf("runner result (refresh): %s\n", raw)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(stepNames(res)).To(Equal([]string{"init", "refresh", "show-json", "apply"}))
			// terraform_data has no remote object to read back, so no resource changed outside
			// terraform; the root output follows the tampered resource, so the refresh-only plan
			// has that change, and its apply writes it.
			Expect(res.Changes).To(HaveValue(BeTrue()))
			Expect(res.Summary).To(Equal(&runnerapi.PlanSummary{Update: 1, Addresses: []string{"output.greeting"}}))
			st, _ = o.readState()
			Expect(st.Serial).To(Equal(tampered.Serial+1), "a refresh writes the state")
			Expect(st.Outputs["greeting"].Value).To(Equal("tampered"))
			Expect(resourceNames(st)).To(ConsistOf("greeting", "replaced", "sealed"))
			Expect(o.lockLease().Spec.HolderIdentity).To(BeNil())

			sec := &corev1.Secret{}
			Expect(o.h.k8s.Get(o.ctx, client.ObjectKey{Namespace: o.namespace, Name: naming.PlanSecretName(o.suffix)}, sec)).To(Succeed())
			Expect(sec.Data).To(BeEmpty(), "drift and refresh save no plan")
		})

		It("(g) refresh records in the state an output that changed outside terraform, changing no resource; a second refresh finds nothing", func() {
			o, ext := newRefreshObject(bin)
			vars := map[string]any{"name": "alpha", "ext_state": ext}
			writeExtState(ext, 1, "10.0.0.0/24")
			_, code, raw := o.runJob(runnerapi.OperationApply, vars)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			st0, raw0 := o.readState()
			Expect(st0.Outputs["subnet"].Value).To(Equal("10.0.0.0/24"))

			writeExtState(ext, 2, "10.0.1.0/24")
			res, code, raw := o.runJob(runnerapi.OperationRefresh, vars)
			GinkgoWriter.Printf("runner result (refresh of an outside change): %s\n", raw)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Outcome).To(Equal(runnerapi.OutcomeSucceeded))
			Expect(stepNames(res)).To(Equal([]string{"init", "refresh", "show-json", "apply"}))
			Expect(res.Changes).To(HaveValue(BeTrue()))
			Expect(res.Drift).To(BeNil())
			Expect(res.Summary).To(Equal(&runnerapi.PlanSummary{Update: 1, Addresses: []string{"output.subnet"}}))
			Expect(res.SavedPlan).To(BeNil())
			Expect(res.AppliedPlan).To(BeNil())
			st1, raw1 := o.readState()
			Expect(st1.Outputs["subnet"].Value).To(Equal("10.0.1.0/24"), "the state records the new value")
			Expect(st1.Serial).To(Equal(st0.Serial + 1))
			Expect(st1.Lineage).To(Equal(st0.Lineage))
			Expect(managedResources(raw1)).To(Equal(managedResources(raw0)), "no resource changed")
			Expect(o.lockLease().Spec.HolderIdentity).To(BeNil())

			By("a second refresh finds nothing, and writes no new state")
			res, code, raw = o.runJob(runnerapi.OperationRefresh, vars)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Changes).To(HaveValue(BeFalse()))
			Expect(res.Summary).To(Equal(&runnerapi.PlanSummary{}))
			st2, raw2 := o.readState()
			Expect(st2.Serial).To(Equal(st1.Serial))
			Expect(st2.Outputs["subnet"].Value).To(Equal("10.0.1.0/24"))
			Expect(managedResources(raw2)).To(Equal(managedResources(raw0)))

			By("a plan after the refresh has nothing to do")
			res, code, raw = o.runJob(runnerapi.OperationPlan, vars)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Changes).To(HaveValue(BeFalse()))
		})

		It("(h) a refresh-only plan saved by a Plan Job is applied only by a Refresh Job, and an apply plan only by an Apply Job", func() {
			o, ext := newRefreshObject(bin)
			vars := map[string]any{"name": "alpha", "ext_state": ext}
			writeExtState(ext, 1, "10.0.0.0/24")
			_, code, raw := o.runJob(runnerapi.OperationApply, vars)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			st0, raw0 := o.readState()
			writeExtState(ext, 2, "10.0.1.0/24")

			By("a refresh-only Plan Job saves a refresh-only plan and writes no state")
			res, code, raw := o.runJobOf(runnerapi.OperationPlan, vars, jobOpts{refreshOnly: true})
			GinkgoWriter.Printf("runner result (refresh-only plan): %s\n", raw)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(stepNames(res)).To(Equal([]string{"init", "plan", "show-json", "show"}))
			Expect(res.Changes).To(HaveValue(BeTrue()))
			want := runnerapi.PlanSummary{Update: 1, Addresses: []string{"output.subnet"}}
			Expect(res.Summary).To(Equal(&want))
			Expect(res.SavedPlan).NotTo(BeNil())
			p := o.readPlan()
			Expect(*res.SavedPlan).To(Equal(p.savedRef()), "the result reports the digests of the artifacts as stored")
			Expect(p.record.RefreshOnly).To(BeTrue())
			Expect(p.record.PlanSummary).To(Equal(want))
			Expect(p.text).To(ContainSubstring("subnet"))
			st, _ := o.readState()
			Expect(st.Serial).To(Equal(st0.Serial), "a plan writes no state")

			By("an Apply Job given the refresh-only plan is refused (Kind): nothing applied, the plan not consumed")
			res, code, raw = o.runJobOf(runnerapi.OperationApply, vars, jobOpts{planID: p.record.ID})
			Expect(code).To(Equal(runnerapi.ExitPlanRefused), raw)
			Expect(res.PlanRefused).To(Equal(runnerapi.PlanRefusedKind))
			Expect(res.AppliedPlan).To(BeNil())
			Expect(o.readPlan().annotations).NotTo(HaveKey(runnerapi.PlanConsumedByAnnotation))
			st, _ = o.readState()
			Expect(st.Serial).To(Equal(st0.Serial))

			By("the Refresh Job given it applies exactly it")
			res, code, raw = o.runJobOf(runnerapi.OperationRefresh, vars, jobOpts{planID: p.record.ID})
			GinkgoWriter.Printf("runner result (refresh of the saved plan): %s\n", raw)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(stepNames(res)).To(Equal([]string{"init", "apply"}))
			Expect(res.AppliedPlan).To(Equal(&runnerapi.PlanRef{ID: p.record.ID, FileSHA256: p.record.FileSHA256}))
			Expect(o.readPlan().annotations).To(HaveKeyWithValue(runnerapi.PlanConsumedByAnnotation, naming.JobName(o.suffix, o.seq)))
			st1, raw1 := o.readState()
			Expect(st1.Outputs["subnet"].Value).To(Equal("10.0.1.0/24"))
			Expect(st1.Serial).To(Equal(st0.Serial + 1))
			Expect(managedResources(raw1)).To(Equal(managedResources(raw0)), "no resource changed")
			Expect(o.lockLease().Spec.HolderIdentity).To(BeNil())

			By("a Refresh Job given a plan that is not refresh-only is refused (Kind)")
			res, code, raw = o.runJobOf(runnerapi.OperationPlan, map[string]any{"name": "beta", "ext_state": ext}, jobOpts{})
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Changes).To(HaveValue(BeTrue()))
			full := o.readPlan()
			Expect(full.record.RefreshOnly).To(BeFalse())
			res, code, raw = o.runJobOf(runnerapi.OperationRefresh, map[string]any{"name": "beta", "ext_state": ext}, jobOpts{planID: full.record.ID})
			Expect(code).To(Equal(runnerapi.ExitPlanRefused), raw)
			Expect(res.PlanRefused).To(Equal(runnerapi.PlanRefusedKind))
			Expect(res.AppliedPlan).To(BeNil())
			Expect(o.readPlan().annotations).NotTo(HaveKey(runnerapi.PlanConsumedByAnnotation))
			st2, _ := o.readState()
			Expect(st2.Serial).To(Equal(st1.Serial), "nothing applied")
			Expect(st2.Outputs["greeting"].Value).To(Equal("hello alpha"))
		})
	})
}

// refreshModule reads an output of another state (a file the test writes, standing for
// infrastructure that changes outside terraform) and passes it on as its own output.
const refreshModule = `
variable "name" {
  type = string
}

variable "secret_word" {
  type      = string
  sensitive = true
}

variable "ext_state" {
  type = string
}

data "terraform_remote_state" "ext" {
  backend = "local"
  config = {
    path = var.ext_state
  }
}

resource "terraform_data" "greeting" {
  input = "hello ${var.name}"
}

output "greeting" {
  value = terraform_data.greeting.output
}

output "subnet" {
  value = data.terraform_remote_state.ext.outputs.subnet
}
`

// newRefreshObject is an object of refreshModule in a fresh namespace, prepared as the
// controller prepares it, and the path of the outside state it reads.
func newRefreshObject(bin string) (*stateObject, string) {
	specs++
	ns := h.namespace(ctx, "runner-refresh-")
	dir := GinkgoT().TempDir()
	o := h.newObjectWithModule(ctx, bins[bin], ns, fmt.Sprintf("refresh-%d", specs), dir, GinkgoWriter, refreshModule)
	o.prepare()
	return o, filepath.Join(dir, "ext.tfstate")
}

// writeExtState writes the outside state refreshModule reads: a state whose output subnet is
// the given value.
func writeExtState(path string, serial int, subnet string) {
	doc := fmt.Sprintf(`{"version":4,"terraform_version":"1.0.0","serial":%d,"lineage":"outside-infrastructure","outputs":{"subnet":{"value":%q,"type":"string"}},"resources":[]}`,
		serial, subnet)
	Expect(os.WriteFile(path, []byte(doc), 0o644)).To(Succeed())
}

// managedResources is the state's managed resources (data sources left out: a refresh reads
// them again), as JSON values.
func managedResources(raw []byte) []any {
	var state struct {
		Resources []map[string]any `json:"resources"`
	}
	Expect(json.Unmarshal(raw, &state)).To(Succeed())
	var out []any
	for _, r := range state.Resources {
		if r["mode"] == "managed" {
			out = append(out, r)
		}
	}
	Expect(out).NotTo(BeEmpty())
	return out
}

// zipEntries reads every entry of a plan file (a zip) uncompressed.
func zipEntries(file []byte) map[string]string {
	zr, err := zip.NewReader(bytes.NewReader(file), int64(len(file)))
	Expect(err).NotTo(HaveOccurred())
	out := map[string]string{}
	for _, f := range zr.File {
		rc, err := f.Open()
		Expect(err).NotTo(HaveOccurred())
		b, err := io.ReadAll(rc)
		Expect(err).NotTo(HaveOccurred())
		Expect(rc.Close()).To(Succeed())
		out[f.Name] = string(b)
	}
	Expect(out).To(HaveKey("tfplan"))
	return out
}

// runJobOf runs an operation with opts as the object's next Job and waits for it.
func (o *stateObject) runJobOf(op string, vars map[string]any, opts jobOpts) (runnerapi.Result, int, string) {
	return o.startJobOf(op, vars, opts).wait()
}
