// Package runlease owns CAPTF's two coordination Leases and the operation gate between a
// TerraformCluster and its machines and pools.
//
// The run lease (one per reconciled object, named naming.RunLeaseName(suffix)) says which Job of
// the object may run; the cluster lease (one per Cluster, naming.ClusterLeaseName) says that a
// mutating operation of the TerraformCluster is in flight or about to start. Both are taken
// before the Job exists, with the Job's deterministic name as spec.holderIdentity, so a wait
// costs no pod and no failure.
//
// The package returns data (Result, Wait, Evidence, Verdict); it patches no condition and emits
// no event. The reconcile engine, the cache-lag checks and the admission webhook guards all judge
// a lease through the same functions here (Assess, Manager.RunEvidence, Manager.JudgeLease),
// never through a copy.
//
// Invariants it keeps:
//
//   - Every read that decides (the lease, the holder Job, the holder's pods, the cluster lease,
//     the machines' run leases) goes through the Reader given to New, which the caller wires to
//     mgr.GetAPIReader(): a cache that trails the API server never decides.
//   - A lease is written only with the resourceVersion just read (update) or by a create; a
//     conflict or an AlreadyExists means another writer won, and the call reports "not
//     acquired" without retrying.
//   - A lease is taken over only when Assess says it is free: no holder; the holder Job of this
//     object finished and none of its pods is still non-terminal; no running Job of this object
//     under the holder name, no non-terminal pod of that name, and the lease older than the
//     grace; or the lease older than its backstop, whatever its holder.
//   - The backstop is never trusted below what the manager writes for the operation: a
//     leaseDurationSeconds shorter than the backstop of the holder Job's own deadline (or of
//     the shortest deadline the API accepts, when the holder is not a Job of the owner) counts
//     as that backstop, and a lease time earlier than the holder Job's creation counts as that
//     creation (BackstopFloor): editing a lease's duration or times cannot free it while its
//     Job runs.
//   - A lease whose owner the caller does not know (an admission request) gets its owner from
//     its name, checked against the objects the API server has (OwnerOfLease), never from its
//     labels alone.
//   - A lease is deleted only after a live read shows the expected holder, and with UID and
//     resourceVersion preconditions, so a lease another holder took in between survives.
//   - With the gate on, a TerraformCluster's mutating operation and a mutating operation of one
//     of its machines or pools never both proceed: each side writes its hold before it reads
//     the other side's, and the cluster keeps its holds while it waits (writer preference).
//   - At the gate a machine or pool gives back only a hold its own pass took (created, or took
//     over from another holder), with the resourceVersion it wrote, and never one whose Job
//     exists: a hold it only refreshed may be the one another pass of the same run confirmed
//     and is creating its Job under (two managers without leader election), so it is kept.
//   - The Terraform backend's own lock Lease (lock-tfstate-...) is never read, taken or
//     deleted by this package (the engine creates and cleans it up, the state channel takes
//     and breaks it: docs/leases.md).
package runlease
