// Package setup is the manager's wiring: it builds the CAPTF manager from Options (the scheme,
// the scoped cache, the three controllers and, when enabled, the webhooks). cmd/manager and the
// envtest suites use the same function, so tests run the manager exactly as it is deployed.
//
// It also keeps the ConfigMap the plan-approval ValidatingAdmissionPolicy reads
// (webhooks.PlanApproversConfigMap, in the manager's namespace) equal to the approver groups:
// written at start (the manager stops when it cannot), put back when missing.
//
// Invariants: Jobs are cached only when they carry captf.io/managed=true, so memory does not
// grow with the cluster's other Jobs; Pods, Leases, Secrets and ConfigMaps are never cached
// (always read live); every cached type has a watch registered at start-up, and reading a type
// without one is an error (ReaderFailOnMissingInformer), never a lazily created informer.
//
// Imports: it sits at the top of the import graph, beside cmd/manager, so it may import the
// controllers, the webhooks and certs; nothing under controllers/ or webhooks/ imports it
// (depguard: controllers-not-wiring, webhooks-not-engine). It is not internal: the envtest
// suites under test/ and the packages' own tests build managers with it.
package setup
