package main

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// The runner's account, bound to exactly jobs.RunnerPolicyRules as the controller binds it,
// asked of the API server's own authorizer (SubjectAccessReview): what may it do?
var _ = Describe("the runner's ServiceAccount", func() {
	It("may read and write only its own object's state, lock and plan, and may list, create or delete nothing", func() {
		o := newTestObject(binaries[0])
		o.prepare()
		// Another object in the same namespace, and one in another namespace.
		neighbour := h.newObject(ctx, bins[binaries[0]], o.namespace, "neighbour", GinkgoT().TempDir(), GinkgoWriter)
		neighbour.prepare()
		stranger := newTestObject(binaries[0])
		stranger.prepare()

		sa := naming.RunnerServiceAccountName(o.suffix)
		user := "system:serviceaccount:" + o.namespace + ":" + sa
		groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + o.namespace, "system:authenticated"}
		may := func(verb, group, resource, ns, name string) bool {
			GinkgoHelper()
			r, err := h.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups,
					ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: ns, Name: name}},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			return r.Status.Allowed
		}
		type ask struct {
			verb, group, resource, ns, name string
			allowed                         bool
		}
		ns := o.namespace
		asks := []ask{
			// Its own state, lock and plan: read and write, never delete.
			{"get", "", "secrets", ns, naming.StateSecretName(o.suffix), true},
			{"update", "", "secrets", ns, naming.StateSecretName(o.suffix), true},
			{"delete", "", "secrets", ns, naming.StateSecretName(o.suffix), false},
			{"patch", "", "secrets", ns, naming.StateSecretName(o.suffix), false},
			{"get", "", "secrets", ns, naming.PlanSecretName(o.suffix), true},
			{"delete", "", "secrets", ns, naming.PlanSecretName(o.suffix), false},
			{"get", "coordination.k8s.io", "leases", ns, naming.StateLockLeaseName(o.suffix), true},
			{"update", "coordination.k8s.io", "leases", ns, naming.StateLockLeaseName(o.suffix), true},
			{"delete", "coordination.k8s.io", "leases", ns, naming.StateLockLeaseName(o.suffix), false},
			// Its run lease: read for fencing, never written.
			{"get", "coordination.k8s.io", "leases", ns, naming.RunLeaseName(o.suffix), true},
			{"update", "coordination.k8s.io", "leases", ns, naming.RunLeaseName(o.suffix), false},
			// No listing, no creating, no other Secret: not the neighbour's state, not a
			// workload cluster's kubeconfig, not the durable inputs or outputs.
			{"list", "", "secrets", ns, "", false},
			{"watch", "", "secrets", ns, "", false},
			{"create", "", "secrets", ns, "", false},
			{"get", "", "secrets", ns, naming.StateSecretName(neighbour.suffix), false},
			{"update", "", "secrets", ns, naming.StateSecretName(neighbour.suffix), false},
			{"get", "", "secrets", ns, "prod-kubeconfig", false},
			{"get", "", "secrets", ns, naming.InputsSecretName(o.suffix), false},
			{"get", "", "secrets", ns, naming.OutputsSecretName(o.suffix), false},
			{"get", "", "secrets", stranger.namespace, naming.StateSecretName(stranger.suffix), false},
			{"get", "coordination.k8s.io", "leases", ns, naming.StateLockLeaseName(neighbour.suffix), false},
			{"update", "coordination.k8s.io", "leases", ns, naming.StateLockLeaseName(neighbour.suffix), false},
			{"list", "coordination.k8s.io", "leases", ns, "", false},
			// The I8 evidence: read a Job and a pod by name, nothing more.
			{"get", "batch", "jobs", ns, "any", true},
			{"list", "batch", "jobs", ns, "", false},
			{"delete", "batch", "jobs", ns, "any", false},
			{"get", "", "pods", ns, "any", true},
			{"list", "", "pods", ns, "", false},
			{"create", "", "pods", ns, "", false},
			{"get", "", "configmaps", ns, "any", false},
			{"create", "", "serviceaccounts/token", ns, sa, false},
		}
		var wrong []string
		for _, a := range asks {
			if got := may(a.verb, a.group, a.resource, a.ns, a.name); got != a.allowed {
				wrong = append(wrong, fmt.Sprintf("%s %s/%s %s/%s: allowed=%t, want %t", a.verb, a.group, a.resource, a.ns, a.name, got, a.allowed))
			}
		}
		Expect(wrong).To(BeEmpty())
		fmt.Fprintf(GinkgoWriter, "the runner's account: %d access reviews as expected\n", len(asks))
	})
})
