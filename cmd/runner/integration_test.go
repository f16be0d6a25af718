package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// The test binary doubles as the runner: with CAPTF_RUNNER_MAIN=1 it runs main() instead of the
// tests, so the suite drives the real command line, signal handling and exit codes.
func TestMain(m *testing.M) {
	if os.Getenv("CAPTF_RUNNER_MAIN") == "1" {
		main()
		return
	}
	code := m.Run()
	stopBenchHarness()
	os.Exit(code)
}

func TestRunnerIntegration(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "runner against a real API server with real terraform and tofu")
}

var (
	ctx   context.Context
	h     *harness
	bins  map[string]tfBinary
	specs int
)

var _ = envtest.RegisterSuite(envtest.SuiteOptions{}, func(s *envtest.Suite) {
	ctx = s.Ctx
	var err error
	bins, err = findBinaries()
	Expect(err).NotTo(HaveOccurred())
	for _, name := range binaries {
		b := bins[name]
		// Printed so the CI log names both binaries and their versions.
		fmt.Printf("runner integration: %s %s (%s)\n", b.name, b.path, b.version)
		GinkgoWriter.Printf("runner integration: %s %s (%s)\n", b.name, b.path, b.version)
	}
	h, err = newHarness(s.Env, s.Client)
	Expect(err).NotTo(HaveOccurred())
	s.Defer(h.cleanup)
})

// newTestObject is an object in a fresh namespace, run with the binary of its container.
func newTestObject(bin string) *stateObject {
	specs++
	ns := h.namespace(ctx, "runner-it-")
	return h.newObject(ctx, bins[bin], ns, fmt.Sprintf("it-%d", specs), GinkgoT().TempDir(), GinkgoWriter)
}

// Every spec below runs once with OpenTofu and once with Terraform.
var _ = func() bool {
	for _, bin := range binaries {
		describeKubernetesBackend(bin)
		describeChannel(bin)
		describePlans(bin)
		describeTargets(bin)
	}
	return true
}()

// describeKubernetesBackend: the runner without a channel, on Terraform's kubernetes backend
// (local runs; and the layout the channel must keep reading and writing).
func describeKubernetesBackend(bin string) {
	Describe(bin+": the runner on the kubernetes backend", Ordered, func() {
		var o *stateObject
		var alphaBackup []byte
		run := func(op string, vars map[string]any, restore []byte) (runnerapi.Result, int, string) {
			return o.startRunner(op, vars, restore, "", 10*time.Second).wait()
		}

		BeforeAll(func() { o = newTestObject(bin) })

		It("applies, keeping state and outputs in the backend Secret and locking with the Lease", func() {
			res, code, raw := run(runnerapi.OperationApply, map[string]any{"name": "alpha"}, nil)
			GinkgoWriter.Printf("runner result (apply): %s\n", raw)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Outcome).To(Equal(runnerapi.OutcomeSucceeded))
			Expect(stepNames(res)).To(Equal([]string{"init", "apply"}))
			Expect(res.Binary).To(Equal(filepath.Base(o.bin.path)))

			st, raw2 := o.readState()
			Expect(st.Outputs).To(HaveKeyWithValue("greeting", HaveField("Value", "hello alpha")))
			Expect(st.Outputs).To(HaveKeyWithValue("secret_length", HaveField("Value", BeNumerically("==", len(secretWord)))))
			Expect(st.Resources).To(ContainElement(HaveField("Name", "greeting")))
			alphaBackup = raw2
			Expect(o.lockLease().Spec.HolderIdentity).To(BeNil(), "the lock was released")
		})

		It("plans and checks drift: no changes, no drift", func() {
			res, code, raw := run(runnerapi.OperationPlan, map[string]any{"name": "alpha"}, nil)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Changes).To(HaveValue(BeFalse()))
			res, code, raw = run(runnerapi.OperationDrift, map[string]any{"name": "alpha"}, nil)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Drift).To(HaveValue(BeFalse()))
			Expect(res.Changes).To(BeNil())
			Expect(res.Health).To(HaveValue(Equal(runnerapi.HealthSample{Healthy: true, Message: "the name is alpha"})),
				"a drift check reports the health output as its plan evaluated it")
		})

		It("reports changes and drift without failing when the module would change things", func() {
			res, code, raw := run(runnerapi.OperationPlan, map[string]any{"name": "beta"}, nil)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Outcome).To(Equal(runnerapi.OutcomeSucceeded))
			Expect(res.Changes).To(HaveValue(BeTrue()))
			res, code, raw = run(runnerapi.OperationDrift, map[string]any{"name": "beta"}, nil)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Drift).To(HaveValue(BeTrue()))
			Expect(res.Health).To(HaveValue(Equal(runnerapi.HealthSample{Healthy: false, Message: "the name is beta"})),
				"the plan's value, not the state's: the state still says alpha")
		})

		It("restores an older backup of the same lineage over a newer state, without -force", func() {
			_, code, raw := run(runnerapi.OperationApply, map[string]any{"name": "beta"}, nil)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			beta, _ := o.readState()
			Expect(beta.Outputs["greeting"].Value).To(Equal("hello beta"))

			res, code, raw := run(runnerapi.OperationRestore, map[string]any{"name": "alpha"}, alphaBackup)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(stepNames(res)).To(Equal([]string{"init", "state-pull", "state-push"}))
			restored, _ := o.readState()
			Expect(restored.Outputs["greeting"].Value).To(Equal("hello alpha"))
			Expect(restored.Lineage).To(Equal(beta.Lineage))
			Expect(restored.Serial).To(BeNumerically(">", beta.Serial))

			res, code, raw = run(runnerapi.OperationPlan, map[string]any{"name": "alpha"}, nil)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Changes).To(HaveValue(BeFalse()))
		})

		It("refuses to restore a backup of another lineage over a live state", func() {
			before, _ := o.readState()
			var foreign map[string]any
			Expect(json.Unmarshal(alphaBackup, &foreign)).To(Succeed())
			foreign["lineage"] = "00000000-0000-0000-0000-000000000000"
			foreign["serial"] = before.Serial + 100
			b, err := json.Marshal(foreign)
			Expect(err).NotTo(HaveOccurred())
			res, code, raw := run(runnerapi.OperationRestore, map[string]any{"name": "alpha"}, b)
			Expect(code).To(Equal(runnerapi.ExitBadInput), raw)
			Expect(res.Outcome).To(Equal(runnerapi.OutcomeFailed))
			Expect(res.Error).To(ContainSubstring("refusing to restore"))
			after, _ := o.readState()
			Expect(after.Serial).To(Equal(before.Serial))
			Expect(after.Lineage).To(Equal(before.Lineage))
		})

		It("stops an interrupted apply cleanly and releases the state lock", func() {
			r := o.startRunner(runnerapi.OperationApply, map[string]any{"name": "alpha", "slow": true}, nil, "", 10*time.Second)
			Eventually(func(g Gomega) {
				g.Expect(o.lockLease().Spec.HolderIdentity).NotTo(BeNil(), "the apply holds the state lock")
				g.Expect(r.stdout.String()).To(ContainSubstring("local-exec"), "the slow resource is being created")
			}).WithTimeout(time.Minute).WithPolling(50 * time.Millisecond).Should(Succeed())
			Expect(r.cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
			res, code, raw := r.wait()
			Expect(code).To(Equal(runnerapi.ExitInterrupted), raw)
			Expect(res.Outcome).To(Equal(runnerapi.OutcomeInterrupted))
			Expect(res.Error).To(ContainSubstring("interrupted by terminated during apply"))
			Expect(o.lockLease().Spec.HolderIdentity).To(BeNil(), "the interrupted apply released the lock")

			// A refresh takes the lock again (twice: its refresh-only plan, then that plan's apply).
			res, code, raw = run(runnerapi.OperationRefresh, map[string]any{"name": "alpha"}, nil)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(stepNames(res)).To(Equal([]string{"init", "refresh", "show-json", "apply"}))
			Expect(o.lockLease().Spec.HolderIdentity).To(BeNil())
		})

		It("destroys, leaving an empty state in the Secret", func() {
			res, code, raw := run(runnerapi.OperationDestroy, map[string]any{"name": "alpha"}, nil)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(stepNames(res)).To(Equal([]string{"init", "destroy"}))
			st, _ := o.readState()
			Expect(st.Resources).To(BeEmpty())
			Expect(st.Outputs).To(BeEmpty())
			Expect(o.lockLease().Spec.HolderIdentity).To(BeNil())
		})
	})
}

// describeChannel: the runner as a Job runs it, through the state channel (the channel under
// a token of a ServiceAccount bound to exactly jobs.RunnerPolicyRules; the runner with no
// Kubernetes credential at all, in a hostile environment).
func describeChannel(bin string) {
	Describe(bin+": the runner through the state channel", func() {
		It("applies, plans and destroys, in the kubernetes backend's layout", func() {
			o := newTestObject(bin)
			o.prepare()
			res, code, raw := o.runJob(runnerapi.OperationApply, map[string]any{"name": "alpha"})
			GinkgoWriter.Printf("runner result (apply through the channel): %s\n", raw)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Outcome).To(Equal(runnerapi.OutcomeSucceeded))
			Expect(res.LockBroken).To(BeNil())
			st, _ := o.readState()
			Expect(st.Outputs).To(HaveKeyWithValue("greeting", HaveField("Value", "hello alpha")))
			Expect(o.lockLease().Spec.HolderIdentity).To(BeNil(), "the lock was released")

			res, code, raw = o.runJob(runnerapi.OperationPlan, map[string]any{"name": "alpha"})
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Changes).To(HaveValue(BeFalse()), "the plan read the state the apply wrote")

			Expect(o.statePull().Serial).To(Equal(st.Serial), "Terraform's kubernetes backend reads what the channel wrote")

			res, code, raw = o.runJob(runnerapi.OperationDestroy, map[string]any{"name": "alpha"})
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			after, _ := o.readState()
			Expect(after.Resources).To(BeEmpty())
			Expect(after.Lineage).To(Equal(st.Lineage))
			Expect(after.Serial).To(BeNumerically(">", st.Serial))
		})

		It("restores an older backup of the same lineage through the channel, without -force", func() {
			o := newTestObject(bin)
			o.prepare()
			_, code, raw := o.runJob(runnerapi.OperationApply, map[string]any{"name": "alpha"})
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			_, alpha := o.readState()
			_, code, raw = o.runJob(runnerapi.OperationApply, map[string]any{"name": "beta"})
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			beta, _ := o.readState()

			res, code, raw := o.startRestoreJob(runnerapi.OperationRestore, map[string]any{"name": "alpha"}, alpha, 10*time.Second).wait()
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(stepNames(res)).To(Equal([]string{"init", "state-pull", "state-push"}))
			restored, _ := o.readState()
			Expect(restored.Outputs["greeting"].Value).To(Equal("hello alpha"))
			Expect(restored.Lineage).To(Equal(beta.Lineage))
			Expect(restored.Serial).To(BeNumerically(">", beta.Serial))
		})

		It("restores a backup onto an absent state keeping its lineage and serial", func() {
			src := newTestObject(bin)
			src.prepare()
			_, code, raw := src.runJob(runnerapi.OperationApply, map[string]any{"name": "alpha"})
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			backup, alpha := src.readState()

			o := newTestObject(bin)
			o.prepare() // the pre-created state Secret holds no state
			res, code, raw := o.startRestoreJob(runnerapi.OperationRestore, map[string]any{"name": "alpha"}, alpha, 10*time.Second).wait()
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(stepNames(res)).To(Equal([]string{"init", "state-pull", "state-push"}))
			restored, _ := o.readState()
			Expect(restored.Lineage).To(Equal(backup.Lineage), "terraform's state push would have given it a new lineage")
			Expect(restored.Serial).To(Equal(backup.Serial))
			Expect(restored.Outputs["greeting"].Value).To(Equal("hello alpha"))
			Expect(o.lockLease().Spec.HolderIdentity).To(BeNil(), "the restore released the lock")

			res, code, raw = o.runJob(runnerapi.OperationPlan, map[string]any{"name": "alpha"})
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Changes).To(HaveValue(BeFalse()), "terraform reads the restored state as its own")
		})

		It("reads and updates a state the kubernetes backend wrote, and the kubernetes backend reads the update", func() {
			o := newTestObject(bin)
			_, code, raw := o.startRunner(runnerapi.OperationApply, map[string]any{"name": "before"}, nil, "", 10*time.Second).wait()
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			before, _ := o.readState()

			o.prepare() // the controller's pre-creation finds both objects there
			res, code, raw := o.runJob(runnerapi.OperationApply, map[string]any{"name": "after"})
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Outcome).To(Equal(runnerapi.OutcomeSucceeded))
			after, _ := o.readState()
			Expect(after.Lineage).To(Equal(before.Lineage), "no migration: the lineage is kept")
			Expect(after.Serial).To(Equal(before.Serial+1), "the serial continues")
			Expect(after.Outputs["greeting"].Value).To(Equal("hello after"))

			pulled := o.statePull()
			Expect(pulled.Lineage).To(Equal(after.Lineage))
			Expect(pulled.Serial).To(Equal(after.Serial))
			Expect(pulled.Outputs["greeting"].Value).To(Equal("hello after"))
		})

		It("stops at init, changing nothing, when the state is not the one the controller read", func() {
			o := newTestObject(bin)
			o.prepare()
			_, code, raw := o.runJob(runnerapi.OperationApply, map[string]any{"name": "alpha"})
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			st, _ := o.readState()

			By("the lineage the controller read: the run goes through")
			res, code, raw := o.startJobOf(runnerapi.OperationApply, map[string]any{"name": "beta"}, jobOpts{stateLineage: st.Lineage}).wait()
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.Outcome).To(Equal(runnerapi.OutcomeSucceeded))
			beta, betaRaw := o.readState()
			Expect(beta.Serial).To(Equal(st.Serial + 1))

			By("replaced with another lineage between the controller's read and the run: refused")
			var doc map[string]any
			Expect(json.Unmarshal(betaRaw, &doc)).To(Succeed())
			doc["lineage"] = "0e0e0e0e-feed-4bad-8bad-000000000001"
			other, err := json.Marshal(doc)
			Expect(err).NotTo(HaveOccurred())
			o.putStateData(other)
			for _, op := range []string{runnerapi.OperationApply, runnerapi.OperationDrift} {
				res, code, raw = o.startJobOf(op, map[string]any{"name": "gamma"}, jobOpts{stateLineage: st.Lineage}).wait()
				GinkgoWriter.Printf("runner result (%s against a replaced state): %s\n", op, raw)
				Expect(code).NotTo(Equal(runnerapi.ExitOK), raw)
				Expect(res.Outcome).To(Equal(runnerapi.OutcomeFailed))
				Expect(res.Error).To(ContainSubstring("the state changed since the controller read it (lineage " + st.Lineage))
				Expect(res.Error).To(ContainSubstring("holds lineage 0e0e0e0e-feed-4bad-8bad-000000000001"))
				Expect(stepNames(res)).To(Equal([]string{"init"}), "nothing ran after init")
				now, _ := o.readState()
				Expect(now.Lineage).To(Equal("0e0e0e0e-feed-4bad-8bad-000000000001"), "the state was left as the person left it")
				Expect(o.lockLease().Spec.HolderIdentity).To(BeNil())
			}

			By("emptied: refused, where a run without the lineage would create everything anew")
			o.putStateData(nil)
			res, code, raw = o.startJobOf(runnerapi.OperationApply, map[string]any{"name": "gamma"}, jobOpts{stateLineage: st.Lineage}).wait()
			Expect(code).NotTo(Equal(runnerapi.ExitOK), raw)
			Expect(res.Error).To(ContainSubstring("the state Secret now holds no state"))
			sec := &corev1.Secret{}
			Expect(o.h.k8s.Get(o.ctx, client.ObjectKey{Namespace: o.namespace, Name: naming.StateSecretName(o.suffix)}, sec)).To(Succeed())
			Expect(sec.Data).NotTo(HaveKey(runnerapi.StateKey), "no state was written")
		})

		It("fences a run whose run lease is taken over mid-apply: no state write, outcome Fenced", func() {
			o := newTestObject(bin)
			o.prepare()
			_, code, raw := o.runJob(runnerapi.OperationApply, map[string]any{"name": "alpha"})
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			before, _ := o.readState()

			j := o.startJob(runnerapi.OperationApply, map[string]any{"name": "beta", "slow": true, "slow_seconds": 3}, 10*time.Second)
			Eventually(func(g Gomega) {
				g.Expect(o.lockLease().Spec.HolderIdentity).NotTo(BeNil(), "the apply holds the state lock")
				g.Expect(j.runner.stdout.String()).To(ContainSubstring("local-exec"), "the slow resource is being created")
			}).WithTimeout(time.Minute).WithPolling(50 * time.Millisecond).Should(Succeed())
			// Another manager's pass (or a stale one) gives the run lease to a new Job.
			o.setRunLease(naming.JobName(o.suffix, 99))

			res, code, raw := j.wait()
			GinkgoWriter.Printf("runner result (fenced apply): %s\n", raw)
			Expect(code).To(Equal(runnerapi.ExitFenced), raw)
			Expect(res.Outcome).To(Equal(runnerapi.OutcomeFenced))
			Expect(res.Error).To(ContainSubstring(naming.JobName(o.suffix, 99)))
			after, _ := o.readState()
			Expect(after.Serial).To(Equal(before.Serial), "the fenced run wrote no state")
			Expect(after.Outputs["greeting"].Value).To(Equal("hello alpha"))
			Expect(o.lockLease().Spec.HolderIdentity).To(BeNil(), "the fenced run still released its lock")
		})

		It("breaks the lock of a runner killed without grace exactly once, and the apply converges", func() {
			o := newTestObject(bin)
			o.prepare()
			killed := o.startJob(runnerapi.OperationApply, map[string]any{"name": "alpha", "slow": true}, 10*time.Second)
			Eventually(func(g Gomega) {
				g.Expect(o.lockLease().Spec.HolderIdentity).NotTo(BeNil())
				g.Expect(killed.runner.stdout.String()).To(ContainSubstring("local-exec"))
			}).WithTimeout(time.Minute).WithPolling(50 * time.Millisecond).Should(Succeed())
			// SIGKILL, no grace: the runner, its terraform and the channel die at once.
			killed.runner.killGroups()
			killed.channel.killGroups()
			stale := o.lockLease()
			Expect(stale.Spec.HolderIdentity).NotTo(BeNil(), "the lock stays held")
			Expect(stale.Annotations).To(HaveKeyWithValue(runnerapi.LockPodAnnotation, killed.pod))
			// The killed pod is gone (no Pod object), its Job exists and is the object's.

			res, code, raw := o.runJob(runnerapi.OperationApply, map[string]any{"name": "alpha"})
			GinkgoWriter.Printf("runner result (apply after a stale lock): %s\n", raw)
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.LockBroken).To(Equal(&runnerapi.LockBroken{LockID: *stale.Spec.HolderIdentity, Who: res.LockBroken.Who,
				Pod: killed.pod, Job: killed.job}))
			Expect(res.LockBroken.Who).NotTo(BeEmpty())
			st, _ := o.readState()
			Expect(st.Outputs["greeting"].Value).To(Equal("hello alpha"))
			Expect(o.lockLease().Spec.HolderIdentity).To(BeNil())

			res, code, raw = o.runJob(runnerapi.OperationPlan, map[string]any{"name": "alpha"})
			Expect(code).To(Equal(runnerapi.ExitOK), raw)
			Expect(res.LockBroken).To(BeNil(), "broken once: the next run finds the lock free")
		})

		It("never breaks a lock held by a running pod of its own object; the result names the holder", func() {
			o := newTestObject(bin)
			o.prepare()
			job, pod := o.nextJob()
			j := &batchv1.Job{}
			Expect(h.k8s.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: job}, j)).To(Succeed())
			Expect(h.k8s.Create(ctx, objects.PodOf(j, pod).Obj())).To(Succeed())
			holdLock(o, "running-lock", "runner@"+pod, map[string]string{runnerapi.LockPodAnnotation: pod, runnerapi.LockJobAnnotation: job})

			res, code, raw := o.startJob(runnerapi.OperationApply, map[string]any{"name": "alpha"}, 2*time.Second).wait()
			Expect(code).To(Equal(runnerapi.ExitTerraformFailed), raw)
			Expect(res.Outcome).To(Equal(runnerapi.OutcomeFailed))
			Expect(res.LockBroken).To(BeNil())
			Expect(res.LockHolder).To(HaveField("ID", "running-lock"))
			Expect(res.LockHolder).To(HaveField("Who", "runner@"+pod))
			Expect(*o.lockLease().Spec.HolderIdentity).To(Equal("running-lock"))
		})

		It("never breaks a foreign lock (ops@laptop); the result names the holder", func() {
			o := newTestObject(bin)
			o.prepare()
			holdLock(o, "ops-lock", "ops@laptop", nil)
			res, code, raw := o.startJob(runnerapi.OperationApply, map[string]any{"name": "alpha"}, 2*time.Second).wait()
			GinkgoWriter.Printf("runner result (foreign lock): %s\n", raw)
			Expect(code).To(Equal(runnerapi.ExitTerraformFailed), raw)
			Expect(res.LockHolder).To(Equal(&runnerapi.LockHolder{ID: "ops-lock", Who: "ops@laptop", Operation: "OperationTypeApply", Created: "2026-01-01T00:00:00Z"}))
			Expect(res.Error).To(ContainSubstring("ops-lock"))
			Expect(*o.lockLease().Spec.HolderIdentity).To(Equal("ops-lock"))
		})
	})
}

// holdLock sets the lock Lease as Terraform's kubernetes backend (extra nil) or a channel
// (extra: its pod and Job annotations) leaves a lock it holds.
func holdLock(o *stateObject, id, who string, extra map[string]string) {
	info, err := json.Marshal(map[string]string{"ID": id, "Operation": "OperationTypeApply", "Info": "", "Who": who,
		"Version": "1.11.4", "Created": "2026-01-01T00:00:00Z", "Path": ""})
	Expect(err).NotTo(HaveOccurred())
	l := o.lockLease()
	l.Spec.HolderIdentity = ptr.To(id)
	l.Annotations = map[string]string{runnerapi.StateLockInfoAnnotation: string(info)}
	for k, v := range extra {
		l.Annotations[k] = v
	}
	Expect(h.k8s.Update(ctx, l)).To(Succeed())
}
