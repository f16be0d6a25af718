// Package workload lets the sandbox's own API server play the workload cluster of every Cluster
// made in it, the way Cluster API's in-memory provider fakes workload clusters, so the real
// Cluster API core manager (package capimanager) finds what it looks for there:
//
//   - For each Cluster, the Secret <cluster>-kubeconfig (Cluster API's name, key "value", owned
//     by the Cluster, so clusterctl move takes it along) holding the sandbox's own administrator
//     kubeconfig. Cluster API's cluster cache connects through it once the infrastructure is
//     provisioned. Only created, never updated: a Secret that exists (moved in from another
//     sandbox) names that sandbox, which stays its workload cluster.
//   - For each providerID a Machine (spec.providerID) or a MachinePool (spec.providerIDList)
//     reports, a Ready Node with that providerID, as the kubelet of the machine would register
//     it, whose Lease is renewed every HeartbeatInterval (package nodes). Cluster API's Machine
//     controller then sets the Machine's nodeRef and the Cluster becomes ControlPlaneInitialized
//     once a control plane Machine has one. The Nodes carry the NoSchedule taint
//     captf.io/workload-node, so the scheduler never binds a runner pod to them (only the
//     executor's node runs pods).
//
// A Node's status is written once, when it is registered: a person may then report it NotReady
// (kubectl patch of its status), as its kubelet would, and a MachineHealthCheck acts on it.
//
// Invariants: nothing is done for a paused Cluster or a Cluster being deleted; a Node is
// registered only for a Cluster whose kubeconfig Secret names this sandbox's API server; Nodes
// are never deleted here (Cluster API's Machine controller deletes a deleted Machine's Node, as
// it does in a workload cluster), and their Leases are renewed while they exist.
package workload
