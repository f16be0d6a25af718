// Package terraformmachinepool adapts the shared engine to TerraformMachinePool: its contract
// inputs (the MachinePool's bootstrap data and version; the cluster's endpoint and outputs) and
// outputs (spec.providerIDList, status.replicas, status.ready).
package terraformmachinepool
