// Package v1alpha1 holds the CAPTF API: TerraformCluster, TerraformMachine and
// TerraformMachinePool, their templates, and the condition types and reasons the controller
// sets on them.
//
// It owns the shape of the API and the validation the API server can enforce by itself (OpenAPI
// bounds and CEL rules). It is a leaf: it imports apimachinery, core API types and Cluster API's
// API types only, never controller or webhook code, so that any client may import it cheaply.
//
// Invariants kept here:
//   - every kind implements the Cluster API v1beta2 infrastructure contract fields;
//   - nothing the controller needs to survive a `clusterctl move` lives only in status: status is
//     a report, and the controller rebuilds it from Secrets, Jobs and annotations.
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.cluster.x-k8s.io
package v1alpha1
