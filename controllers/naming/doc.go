// Package naming derives every name CAPTF gives to the objects it creates: the state suffix of
// a reconciled object, the Terraform backend's Secret and lock Lease, the run and cluster
// Leases, Jobs and their Secrets, and the label values that tie them to their owner. The names
// the runner shares (the backend's state Secret and lock Lease, the plan Secret, the owner
// label value) come from runnerapi, the one stdlib-only source of that layout; naming only
// passes them on.
//
// Invariants: every name is a pure function of its inputs (namespace, kind, name, sequence), so
// a pass after a crash or on a stale cache rebuilds the same name; every name and label value
// fits the API server's limits whatever the length of the object's name.
package naming
