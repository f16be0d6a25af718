// Package planpolicy owns the plan policies (TerraformPlanPolicy, docs/plans.md "Plan
// policies"): the CEL environment a rule is compiled in, the admission check of a policy
// (Validate, which the webhook calls), which policies select an object (Selects), and the
// judgement of a saved plan's JSON (Judge), which the engine takes once when a Plan Job ends.
//
// Invariants:
//   - One environment, one compile path: the webhook refuses exactly the rules the engine could
//     not evaluate (a compile error, a result that is not a bool, an estimated cost over
//     PerCallLimit), because both call Compile.
//   - Fail closed: a rule that returns false, errors, runs over its cost budget, or meets a JSON
//     plan that does not list every change the plan's record counts is a violation; no error
//     of a policy lets a plan apply without an approver.
//   - No I/O: the engine reads the policies, the namespace's labels and the plan Secret, and
//     passes them in. The one clock is each rule's time budget (RuleTimeout), because cel-go's
//     cost limit does not bound the time of every iteration.
package planpolicy
