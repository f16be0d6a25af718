// Package admission runs CAPTF's real admission webhooks (package webhooks) as the simulated API
// server's admission chain: Chain.Mutate and Chain.Validate are test/sim/apiserver's
// Options.Mutate and Options.Validate, so every write to the store, whoever makes it, goes
// through the defaulters, the guard, the Lease guard, the Job guard and spec validation as it
// goes through them on a real server with config/webhook installed, and a write they refuse is
// refused with the status a real server returns.
//
// # What it owns
//
// The routing of config/webhook (which webhook judges which kind, verb and subresource, the
// objectSelectors of the Lease and Job guards, the "spec change of a live object" condition of
// update validation), the admission.Request each webhook receives (objects as JSON with their
// kind, the user from the request's context: WithUser, As), and the turning of a response into
// a patch applied to the object (mutating) or a StatusError (validating: "admission webhook
// "<name>" denied the request: <message>", the response's code, 403 for a denial).
//
// # Invariants it keeps
//
//   - The handlers are the ones webhooks.Setup registers, built the same way (Guard, LeaseGuard,
//     JobGuard, Defaulter, Validator, TemplateValidator, PlanPolicyValidator), reading through
//     the store's client (the API server, never a cache) with the lease rules of
//     controllers/runlease on the bubble's clock.
//   - Mutating webhooks run before validating ones, each once, in config/webhook's order; a
//     validating chain stops at its first denial. Nothing here decides a verdict itself.
//   - A request carries the user its context names (WithUser, As); without one it is
//     DefaultUser, who is neither the manager nor in any group.
//
// # Not modelled
//
// The matchConditions of the guard (it runs on every create and update of its kinds: the
// webhooks package promises that a request that changes nothing guarded is allowed whatever
// runs, so only cost differs), failurePolicy and timeouts (a handler always answers),
// reinvocation, dry run, the ValidatingAdmissionPolicies of config/policy, the metrics of
// webhooks.Measured, and events (the Override and PlanApprovals recorders are nil).
package admission
