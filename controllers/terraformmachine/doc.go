// Package terraformmachine adapts the shared engine to TerraformMachine: its contract inputs
// (the Machine's bootstrap data, failure domain and version; the cluster's endpoint and
// outputs) and its contract outputs (spec.providerID, status.addresses, status.failureDomain).
// It waits for its TerraformCluster to be provisioned and for the bootstrap data Secret.
package terraformmachine
