// Package state reads an object's Terraform state from the Terraform kubernetes backend's
// Secret and turns the module's outputs into the Cluster API contract fields, without running
// terraform.
//
// The backend keeps the state of the object with suffix S in the Secret
// naming.StateSecretName(S), data key "tfstate", as gzip-compressed JSON (the layout and its
// codec are runnerapi's, shared with the runner's state channel). Read accepts exactly
// that layout. Newer backend versions can split a large state across several keys or Secrets;
// this package does not guess at such a layout: a Secret without the "tfstate" key, or with keys
// besides it, is refused with a StateError (reason StateLayoutUnknown) that says what it found,
// so a chunked state is reported instead of being misread as empty or partial.
//
// Invariants:
//   - Only a state Secret that does not exist (or that exists with no data at all, which the
//     backend itself treats as no state) is "no state" (ErrNoState). Anything unreadable (bad
//     gzip, bad JSON, an unknown layout, an encrypted or oversized state) is a StateError, never
//     an empty state, so a corrupt state is never taken as evidence that nothing is left.
//   - StateEmpty is true only when no managed resource instance remains; a resource of an
//     unknown mode counts as remaining.
//   - Sensitive output values never leave the package in a form meant for status, events or
//     logs: State and Output print no values, Output.Value refuses sensitive outputs, contract
//     outputs marked sensitive are refused, ClusterOutputsForMachines omits sensitive outputs.
//     Only the outputs Secret (a Secret) and State.Bytes (for backups) carry them.
//   - Contract outputs are validated against the CRDs' limits before they are returned, so a
//     status or spec patch built from them is not refused; a bad output is an *OutputError
//     naming the output and what was expected, never a panic.
//   - Reads go through the reader the caller passes (the engine passes the live API reader).
//
// Keeper (keeper.go) is the state's lifecycle beside the object, built once with its clients
// and the backup count; its methods take the object (a Subject) explicitly. It keeps:
//   - the state Secret, its backups and the durable inputs carry the protection finalizer
//     captf.io/state-protection, which only the Keeper removes (LetGo, Retain), and the state
//     Secret never gets an owner reference (the garbage collector must never delete a state);
//   - a backup is taken only of a state newer than the newest backup, and belongs to one
//     incarnation (controller owner reference); a restore reads only a backup of the same
//     incarnation;
//   - Clean deletes the state and the durable inputs but keeps the backups (unprotected) until
//     the object is gone, and deletes the lock Lease only when no terraform holds it (UID and
//     resourceVersion preconditions); when to Clean is the caller's decision (controllers/decide).
package state
