package decide

import (
	"strings"
	"testing"
	"time"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// targeted is a settled object that applied before, with its state read and the targeted
// operation req asked for; edit changes it before it settles.
func targeted(req string, edit func(*Evidence)) Evidence {
	ev := Evidence{Now: time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC),
		Inputs: InputsEvidence{DesiredHash: "h1", AppliedHash: "h1"},
		State:  StateEvidence{AppliedBefore: true, Read: StatePresent, Lineage: "L", OwnLineage: "L", Serial: 4},
		Target: targetEvidence(map[string]string{infrav1.TargetOperationAnnotation: req})}
	if edit != nil {
		edit(&ev)
	}
	return settled(ev)
}

func TestDecideTargetedOperations(t *testing.T) {
	manual := func(ev *Evidence) { ev.Plan.ApplyPolicy = infrav1.ApplyPolicyManual }
	plan := func(id, target string) *infrav1.PlanRecord {
		return &infrav1.PlanRecord{ID: id, InputsHash: "h1", Serial: 4, Lineage: "L", Target: target, Replace: 1}
	}
	approved := func(p *infrav1.PlanRecord) func(*Evidence) {
		return func(ev *Evidence) { manual(ev); ev.Plan.Pending, ev.Plan.Approved = p, p.ID }
	}
	for _, c := range []struct {
		name         string
		ev           Evidence
		action       Action
		op           infrav1.Operation
		planID       string
		carried      string
		waitReason   string
		waitContains string
	}{
		{name: "Automatic: an apply of its own", ev: targeted("replace a.b", nil),
			action: ActionStart, op: infrav1.OperationApply, carried: "replace a.b"},
		{name: "changed inputs: their apply carries it", ev: targeted("import a.b id 1", func(ev *Evidence) { ev.Inputs.DesiredHash = "h2" }),
			action: ActionStart, op: infrav1.OperationApply, carried: "import a.b id 1"},
		{name: "Manual: a plan of it first", ev: targeted("replace a.b", manual),
			action: ActionStart, op: infrav1.OperationPlan, carried: "replace a.b"},
		{name: "Manual: its plan waits", ev: targeted("replace a.b", func(ev *Evidence) { manual(ev); ev.Plan.Pending = plan("p1", "replace a.b") }),
			action: ActionWait, waitReason: infrav1.PlanAwaitingApprovalReason, waitContains: "plan p1"},
		{name: "Manual: its approved plan applies, carrying it", ev: targeted(" replace  a.b", approved(plan("p1", "replace a.b"))),
			action: ActionStart, op: infrav1.OperationApply, planID: "p1", carried: " replace  a.b"},
		{name: "Manual: an approved plan of another request is not applied for it", ev: targeted("replace a.c", approved(plan("p1", "replace a.b"))),
			action: ActionStart, op: infrav1.OperationPlan, carried: "replace a.c"},
		{name: "Manual: an approved plan of no request is not applied for it", ev: targeted("replace a.b", approved(plan("p1", ""))),
			action: ActionStart, op: infrav1.OperationPlan, carried: "replace a.b"},
		{name: "Manual, changed inputs: an approved plan made before the request is not applied for it", ev: targeted("replace a.b", func(ev *Evidence) {
			approved(plan("p1", ""))(ev)
			ev.Inputs.DesiredHash, ev.Plan.Pending.InputsHash = "h2", "h2"
		}), action: ActionStart, op: infrav1.OperationPlan, carried: "replace a.b"},
		{name: "a value that cannot be read waits with its reason", ev: targeted("replace", nil),
			action: ActionWait, waitReason: infrav1.TargetOperationInvalidReason, waitContains: `want "replace <address>"`},
		{name: "a value that cannot be read rides no apply of changed inputs", ev: targeted("replace", func(ev *Evidence) { ev.Inputs.DesiredHash = "h2" }),
			action: ActionStart, op: infrav1.OperationApply},
		{name: "exclusive: a Job of the object runs (a drift check), so it waits", ev: targeted("replace a.b", func(ev *Evidence) {
			ev.Object.BlockMove, ev.Object.ActiveJob = true, "j-2"
			ev.Jobs.Running = []JobView{{Name: "j-2", Seq: 2, Operation: infrav1.OperationDrift, Phase: JobRunning}}
			ev.Jobs.Current, ev.Jobs.RunSeq = &ev.Jobs.Running[0], 2
		}), action: ActionWaitJob},
		{name: "I7: the state not read, it waits", ev: func() Evidence {
			ev := targeted("replace a.b", func(ev *Evidence) { ev.State.Read = StateNotRead })
			ev.Inputs.Gathered = true
			return ev
		}(), action: ActionWait, waitReason: infrav1.CacheLagReason, waitContains: "no targeted operation starts without it"},
		{name: "in a backoff it waits", ev: targeted("replace a.b", func(ev *Evidence) { ev.Retry.At = ev.Now.Add(time.Minute) }),
			action: ActionWait, waitReason: infrav1.JobFailedReason},
		{name: "before the first apply: that apply carries none", ev: targeted("replace a.b", func(ev *Evidence) {
			ev.Inputs.AppliedHash, ev.State = "", StateEvidence{Read: StateAbsent}
		}), action: ActionStart, op: infrav1.OperationApply},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.ev)
			if d.Action != c.action || d.Operation != c.op || d.PlanID != c.planID {
				t.Fatalf("decided %s %s plan %q (wait %+v), want %s %s plan %q", d.Action, d.Operation, d.PlanID, d.Wait, c.action, c.op, c.planID)
			}
			if got := TargetOf(c.ev, d, d.Operation); got != c.carried {
				t.Errorf("the Job carries %q, want %q", got, c.carried)
			}
			if d.Action == ActionStart {
				events := StartEvents(c.ev, d, d.Operation, "j-9")
				if started := events[len(events)-1].Message; strings.Contains(started, "carrying out") != (c.carried != "") {
					t.Errorf("JobStarted says %q; it names the request exactly when the Job carries one", started)
				}
			}
			if c.waitReason != "" && (d.Wait == nil || d.Wait.Reason != c.waitReason || !strings.Contains(d.Wait.Message, c.waitContains)) {
				t.Errorf("wait %+v, want reason %s with %q", d.Wait, c.waitReason, c.waitContains)
			}
		})
	}
	// A deleting object destroys and never carries the request.
	del := targeted("replace a.b", func(ev *Evidence) { ev.Object.Deleting = true })
	if d := Decide(del); TargetOf(del, d, d.Operation) != "" || d.Operation == infrav1.OperationApply {
		t.Errorf("a deleting object: %s %s carrying %q", d.Action, d.Operation, TargetOf(del, d, d.Operation))
	}
}

// Bookkeeping answers a request once the apply that carried it ran (succeeded or failed), or a
// plan of it changed nothing; a fenced or interrupted run, and a request changed since the Job
// was made, keep the request.
func TestTargetAnswered(t *testing.T) {
	at := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name    string
		op      infrav1.Operation
		outcome infrav1.RunOutcome
		now     string
		plan    *infrav1.PlanRecord
		kept    bool
		event   string
	}{
		{name: "an apply succeeded", op: infrav1.OperationApply, outcome: infrav1.RunSucceeded, event: TargetOperationDoneReason},
		{name: "an apply failed", op: infrav1.OperationApply, outcome: infrav1.RunFailed, event: TargetOperationFailedReason},
		{name: "an apply fenced", op: infrav1.OperationApply, outcome: infrav1.RunFenced, kept: true},
		{name: "an apply interrupted", op: infrav1.OperationApply, outcome: infrav1.RunInterrupted, kept: true},
		{name: "changed since", op: infrav1.OperationApply, outcome: infrav1.RunSucceeded, now: "replace a.c", kept: true, event: TargetOperationDoneReason},
		{name: "a plan that changes something waits", op: infrav1.OperationPlan, outcome: infrav1.RunSucceeded, plan: &infrav1.PlanRecord{ID: "p1", Replace: 1}, kept: true},
		{name: "a plan failed (an import ID that does not exist)", op: infrav1.OperationPlan, outcome: infrav1.RunFailed, event: TargetOperationFailedReason},
		{name: "a plan fenced", op: infrav1.OperationPlan, outcome: infrav1.RunFenced, kept: true},
		{name: "a plan that changes nothing", op: infrav1.OperationPlan, outcome: infrav1.RunSucceeded, plan: &infrav1.PlanRecord{ID: "p1"}, event: TargetOperationDoneReason},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := objects.Cluster("ns", "c").Obj()
			now := "replace a.b"
			if c.now != "" {
				now = c.now
			}
			o.Annotations = map[string]string{infrav1.TargetOperationAnnotation: now}
			cur := JobView{Name: "j-3", Seq: 3, Operation: c.op, Target: "replace a.b"}
			b := JudgeFinished(cur, RunEnd{Outcome: c.outcome, Message: "boom"}, 0, at)
			b.Plan = c.plan
			b.Markers(o, cur, "")
			_, kept := o.Annotations[infrav1.TargetOperationAnnotation]
			if kept != c.kept {
				t.Errorf("request kept %v, want %v", kept, c.kept)
			}
			var reasons []string
			for _, e := range TargetEvents(b, cur) {
				reasons = append(reasons, e.Reason)
			}
			if got := strings.Join(reasons, ","); got != c.event {
				t.Errorf("events %q, want %q", got, c.event)
			}
		})
	}
}
