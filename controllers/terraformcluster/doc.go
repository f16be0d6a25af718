// Package terraformcluster adapts the shared engine to TerraformCluster: its contract inputs
// (names, the Cluster's network, a known endpoint) and outputs (spec.controlPlaneEndpoint,
// status.failureDomains), and its deletion order: a cluster is destroyed only after its
// machines and pools are gone.
package terraformcluster
