package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// targetModule has one resource whose configuration never changes: only a targeted replace
// replaces it.
const targetModule = `
variable "name" {
  type = string
}

variable "secret_word" {
  type      = string
  sensitive = true
}

resource "terraform_data" "a" {
  input = "a"
}
`

// forgetModule declares two resources; forgetModuleLater no longer declares terraform_data.b,
// which a forget keeps standing and a plain apply would destroy.
const (
	forgetModule = targetModule + `
resource "terraform_data" "b" {
  input = "b"
}
`
	forgetModuleLater = targetModule
)

// setModule replaces the object's module (main.tf) with module, as a new ConfigMap revision would.
func (o *stateObject) setModule(module string) {
	Expect(os.WriteFile(filepath.Join(o.moduleDir, "..2026_01_01_00_00_00.000000001", "main.tf"), []byte(module), 0o644)).To(Succeed())
}

// managedOf lists the managed resources of a state as type.name.
func managedOf(raw []byte) []string {
	var state struct {
		Resources []struct{ Mode, Type, Name string } `json:"resources"`
	}
	Expect(json.Unmarshal(raw, &state)).To(Succeed())
	var out []string
	for _, r := range state.Resources {
		if r.Mode == "managed" {
			out = append(out, r.Type+"."+r.Name)
		}
	}
	return out
}

// planTargetAndApplyIt runs a Plan with the targeted operation target, which must report a
// change counted as want and record the target, then the Apply of that very plan; it returns
// the state the Apply left.
func (o *stateObject) planTargetAndApplyIt(vars map[string]any, target string, want runnerapi.PlanSummary) []byte {
	GinkgoHelper()
	res, code, raw := o.runJobOf(runnerapi.OperationPlan, vars, jobOpts{target: target})
	Expect(code).To(Equal(runnerapi.ExitOK), raw)
	Expect(res.Changes).To(HaveValue(BeTrue()))
	Expect(res.Summary).To(Equal(&want))
	p := o.readPlan()
	Expect(p.record.Target).To(Equal(target))
	Expect(p.record.PlanSummary).To(Equal(*res.Summary))
	res, code, raw = o.runJobOf(runnerapi.OperationApply, vars, jobOpts{planID: p.record.ID, target: target})
	Expect(code).To(Equal(runnerapi.ExitOK), raw)
	Expect(res.AppliedPlan).To(Equal(&runnerapi.PlanRef{ID: p.record.ID, FileSHA256: p.record.FileSHA256}))
	_, st := o.readState()
	return st
}

// idOf is the id of the state's one instance of the managed resource typ.name.
func idOf(raw []byte, typ, name string) string {
	var state struct {
		Resources []struct {
			Mode, Type, Name string
			Instances        []struct {
				Attributes map[string]any `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	Expect(json.Unmarshal(raw, &state)).To(Succeed())
	for _, r := range state.Resources {
		if r.Mode == "managed" && r.Type == typ && r.Name == name {
			Expect(r.Instances).To(HaveLen(1))
			id, _ := r.Instances[0].Attributes["id"].(string)
			Expect(id).NotTo(BeEmpty())
			return id
		}
	}
	Fail(fmt.Sprintf("no %s.%s in the state", typ, name))
	return ""
}

// describeTargets: targeted operations (--target) with the real binaries, through the channel.
func describeTargets(bin string) {
	Describe(bin+": targeted operations", func() {
		newTargetObject := func() *stateObject {
			specs++
			ns := h.namespace(ctx, "runner-target-")
			o := h.newObjectWithModule(ctx, bins[bin], ns, fmt.Sprintf("target-%d", specs), GinkgoT().TempDir(), GinkgoWriter, targetModule)
			o.prepare()
			return o
		}
		It("replaces one resource whose configuration did not change, by an Apply and by an approved Plan", func() {
			o := newTargetObject()
			vars := map[string]any{"name": "alpha"}
			_, code, raw := o.runJob(runnerapi.OperationApply, vars)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			_, st := o.readState()
			first := idOf(st, "terraform_data", "a")

			By("an Apply without a target changes nothing")
			_, code, raw = o.runJob(runnerapi.OperationApply, vars)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			_, st = o.readState()
			Expect(idOf(st, "terraform_data", "a")).To(Equal(first))

			By("an Apply with a replace target replaces it")
			const target = "replace terraform_data.a"
			res, code, raw := o.runJobOf(runnerapi.OperationApply, vars, jobOpts{target: target})
			GinkgoWriter.Printf("runner result (targeted apply): %s\n", raw)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Outcome).To(Equal(runnerapi.OutcomeSucceeded))
			_, st = o.readState()
			second := idOf(st, "terraform_data", "a")
			Expect(second).NotTo(Equal(first))

			By("a Plan with the target plans the replace; its record says so; the approved plan replaces it")
			st = o.planTargetAndApplyIt(vars, target, runnerapi.PlanSummary{Replace: 1, Addresses: []string{"terraform_data.a"}})
			Expect(idOf(st, "terraform_data", "a")).NotTo(Equal(second))
		})

		It("imports one resource under the ID given, kept literal, by an Apply and by an approved Plan", func() {
			vars := map[string]any{"name": "alpha"}
			// terraform_data takes any ID; "${...}" would be a template if the runner did not escape it.
			const id = "imported-${var.name}-%{ if true }x%{ endif }"
			o := newTargetObject()
			res, code, raw := o.runJobOf(runnerapi.OperationApply, vars, jobOpts{target: "import terraform_data.a " + id})
			GinkgoWriter.Printf("runner result (targeted import): %s\n", raw)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Outcome).To(Equal(runnerapi.OutcomeSucceeded))
			_, st := o.readState()
			Expect(idOf(st, "terraform_data", "a")).To(Equal(id))

			By("through a Plan: its record names the import, and its apply imports exactly that")
			o = newTargetObject()
			target := "import terraform_data.a other-id"
			res, code, raw = o.runJobOf(runnerapi.OperationPlan, vars, jobOpts{target: target})
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Changes).To(HaveValue(BeTrue()))
			p := o.readPlan()
			Expect(p.record.Target).To(Equal(target))
			Expect(p.record.PlanSummary.Import).To(Equal(1), "the summary counts the import: a plan that only imports is a change that waits for its apply")
			Expect(p.record.Addresses).To(Equal([]string{"terraform_data.a"}))
			res, code, raw = o.runJobOf(runnerapi.OperationApply, vars, jobOpts{planID: p.record.ID, target: target})
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.AppliedPlan).To(Equal(&runnerapi.PlanRef{ID: p.record.ID, FileSHA256: p.record.FileSHA256}))
			_, st = o.readState()
			Expect(idOf(st, "terraform_data", "a")).To(Equal("other-id"))
		})

		It("forgets one resource the module no longer declares, by an Apply and by an approved Plan, and a plain plan would destroy it", func() {
			vars := map[string]any{"name": "alpha"}
			const target = "forget terraform_data.b"
			newApplied := func() *stateObject {
				o := newTargetObject()
				o.setModule(forgetModule)
				_, code, raw := o.runJob(runnerapi.OperationApply, vars)
				Expect(code).To(Equal(runnerapi.ExitOK), raw)
				_, st := o.readState()
				Expect(managedOf(st)).To(ConsistOf("terraform_data.a", "terraform_data.b"))
				o.setModule(forgetModuleLater)
				return o
			}
			o := newApplied()
			_, st := o.readState()
			a := idOf(st, "terraform_data", "a")

			By("without the target, the plan of the module that dropped b destroys b")
			res, code, raw := o.runJobOf(runnerapi.OperationPlan, vars, jobOpts{})
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Summary).To(Equal(&runnerapi.PlanSummary{Delete: 1, Addresses: []string{"terraform_data.b"}}))

			By("an Apply with the target removes b from the state and destroys nothing")
			res, code, raw = o.runJobOf(runnerapi.OperationApply, vars, jobOpts{target: target})
			GinkgoWriter.Printf("runner result (targeted forget): %s\n", raw)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Outcome).To(Equal(runnerapi.OutcomeSucceeded))
			_, st = o.readState()
			Expect(managedOf(st)).To(ConsistOf("terraform_data.a"))
			Expect(idOf(st, "terraform_data", "a")).To(Equal(a), "a is untouched")

			By("through a Plan: its record counts the forget, and its apply forgets exactly that")
			o = newApplied()
			// terraform reports a forget as a change (-detailed-exitcode 2).
			st = o.planTargetAndApplyIt(vars, target, runnerapi.PlanSummary{Forget: 1, Addresses: []string{"terraform_data.b"}})
			Expect(managedOf(st)).To(ConsistOf("terraform_data.a"))

			By("a module that still declares the resource: terraform refuses the forget, and the state keeps it")
			o = newApplied()
			o.setModule(forgetModule)
			res, code, raw = o.runJobOf(runnerapi.OperationApply, vars, jobOpts{target: target})
			Expect(code).NotTo(Equal(runnerapi.ExitOK), raw)
			Expect(res.Outcome).To(Equal(runnerapi.OutcomeFailed))
			Expect(res.Error).To(MatchRegexp(`Removed resource (block )?still exists`))
			_, st = o.readState()
			Expect(managedOf(st)).To(ConsistOf("terraform_data.a", "terraform_data.b"))
		})
	})
}
