// Package objects builds the Kubernetes objects CAPTF's tests create: the three Terraform kinds,
// CAPTF's Jobs, their pods and Leases, with fluent builders in the style of kueue's testing
// wrappers (objects.Machine("ns", "m").Cluster("prod").Finalizer().Obj()).
//
// It owns no rule of the product: a builder writes what a test asks for and nothing it does not,
// so a test reads as the state it sets up. The labels that make a Job CAPTF's come from the
// product's own naming package, never from literals here, so the builders and the controller
// cannot disagree about them.
//
// Builders are pure (no client, no clock): unit tests and envtest suites both use them. Obj returns
// the object being built (not a copy); a builder is not reused after Obj.
//
// They build what a test creates, patches, deletes or hands to the code under test. What a test
// reads into stays an empty literal (&batchv1.Job{}): a Get decodes into the object it is given
// and keeps what the server's copy omits, such as a label or the module a builder set.
//
// It may import api/v1alpha1, controllers/naming and the Kubernetes API types; shipped code never
// imports it (the no-test-helpers-in-product lint rule).
package objects
