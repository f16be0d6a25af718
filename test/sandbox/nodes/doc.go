// Package nodes holds what the sandbox does in a kubelet's place for the Nodes it registers:
// a healthy kubelet's conditions and the node's heartbeat Lease, which the real node lifecycle
// controller reads. The executor's node (package executor), the bench's node (test/bench) and
// the workload clusters' nodes (package workload) use it.
//
// Invariant: a Lease is renewed for its own node only (holder and name are the node's), lasts
// LeaseDurationSeconds as a kubelet's does, and is owned by its Node, so the garbage collector
// removes it with the Node.
package nodes
