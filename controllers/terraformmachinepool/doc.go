// Package terraformmachinepool adapts the shared engine to TerraformMachinePool: its contract
// inputs (the MachinePool's bootstrap data, version and replicas; the cluster's endpoint and
// outputs) and outputs (spec.providerIDList, status.replicas, status.ready, and the
// informational status.instances and status.readyInstances).
package terraformmachinepool
