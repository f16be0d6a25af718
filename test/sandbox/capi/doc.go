// Package capi plays, in the sandbox, the few parts of Cluster API's core controllers that CAPTF
// depends on. The sandbox runs no Cluster API controller, so without this nobody would link a
// Machine to its TerraformMachine or tell the Cluster that its infrastructure is provisioned.
//
// What it does, per object, following the Cluster API v1beta2 contract:
//   - Cluster: a finalizer; the TerraformCluster of spec.infrastructureRef gets the Cluster as
//     its controller owner and the cluster-name label; spec.controlPlaneEndpoint and
//     status.initialization.infrastructureProvisioned are copied from it. Deleting a Cluster
//     deletes its Machines, MachinePools and MachineDeployments, waits until they are gone,
//     then deletes the TerraformCluster, waits, and removes the finalizer.
//   - Machine and MachinePool: a finalizer; the Cluster as owner; the infrastructure object
//     gets the Machine (MachinePool) as its controller owner and the cluster-name label;
//     spec.providerID (providerIDList) and status.initialization.infrastructureProvisioned are
//     copied from it. Deleting one deletes its infrastructure object first.
//   - MachineDeployment: the Cluster as owner (so clusterctl move takes it along).
//
// Like Cluster API's controllers, which watch their infrastructure kinds, it links an
// infrastructure object as soon as it appears, whether it was created before or after the
// Cluster, Machine or MachinePool that references it (an index of their infrastructure
// references maps it back); it never waits for an unrelated event.
//
// What it never does: anything a bootstrap or control plane provider or a workload cluster
// would do. Bootstrap data comes from the Machine's spec.bootstrap.dataSecretName (the samples
// set it and ship the Secret); status.nodeRef and the ControlPlaneInitialized condition, which
// clusterctl move checks, are set by whoever needs them (the end-to-end tests, or a person with
// kubectl, see docs/sandbox.md).
//
// Invariant: like Cluster API, nothing here acts on a paused Cluster (spec.paused or the
// cluster.x-k8s.io/paused annotation) or on a paused object, so clusterctl move sees no writes
// from it while it moves.
package capi
