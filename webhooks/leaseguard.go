package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
)

// LeaseGuard is the validating webhook that refuses deleting a CAPTF run or cluster Lease whose
// holder Job runs: without the lease, a second Job could start against the same state. The
// webhook configuration selects only Leases labelled captf.io/lease and only DELETE; a lease
// whose holder finished, is gone past the grace, or is past its backstop may be deleted.
type LeaseGuard struct {
	// Reader reads Jobs and Pods through the API server: mgr.GetAPIReader(), never a cache.
	Reader client.Reader
	// Leases supplies the lease rules' options (grace, backstop, clock).
	Leases *runlease.Manager
	// Override decides the break-glass path: for a DELETE it reads the reason from the Lease.
	Override *Override
}

var _ admission.Handler = &LeaseGuard{}

// Handle implements admission.Handler.
func (g *LeaseGuard) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Delete {
		return admission.Allowed("the lease guard judges deletions only")
	}
	l := &coordinationv1.Lease{}
	if err := json.Unmarshal(req.OldObject.Raw, l); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode lease: %w", err))
	}
	owner, ok := LeaseOwner(l)
	if !ok {
		return admission.Allowed("not a CAPTF run or cluster lease")
	}
	logger := log.FromContext(ctx).WithValues("lease", l.Namespace+"/"+l.Name, "user", req.UserInfo.Username)
	v, job, err := g.Leases.Judge(ctx, l, owner)
	if err != nil {
		logger.Error(err, "lease guard could not read the evidence; denying")
		return admission.Errored(http.StatusServiceUnavailable,
			fmt.Errorf("CAPTF lease guard: cannot confirm that the holder of lease %s/%s has finished: %w; retry", l.Namespace, l.Name, err))
	}
	if v.Reason != runlease.LiveHolderRunning && v.Reason != runlease.LivePodsRunning {
		return admission.Allowed("")
	}
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	blocker := fmt.Sprintf("its holder Job %s of %s %s/%s runs", holder, owner.Kind, owner.Namespace, owner.Name)
	if v.Reason == runlease.LivePodsRunning {
		blocker = fmt.Sprintf("a pod of its holder Job %s of %s %s/%s is not terminated", holder, owner.Kind, owner.Namespace, owner.Name)
	}
	if job != nil && job.Status.StartTime != nil {
		blocker += fmt.Sprintf(" (since %s)", since(job.Status.StartTime.Time, g.Leases.Options().Clock.Now()))
	}
	verdict := Verdict{Blockers: []string{blocker}}
	what := "deletes " + strings.ToLower(l.Labels[infrav1.LeaseLabel]) + " lease " + l.Name
	if resp, ok := g.Override.Try(ctx, req, l, l.Annotations[infrav1.GuardOverrideReasonAnnotation], what, verdict); ok {
		return resp
	}
	msg := fmt.Sprintf("CAPTF guard: this request %s, but %s: without the lease a second Job could start against the same Terraform state. "+
		"CAPTF releases the lease itself once the Job has finished: wait for it (kubectl -n %s get job %s -w), or stop it by deleting it (kubectl -n %s delete job %s --cascade=foreground); "+
		"once its pods are gone the lease is free and may be deleted. In an incident, a member of an override group may annotate the lease with "+
		"captf.io/guard-override-reason first, then delete it (see docs/webhooks.md).", what, blocker, l.Namespace, holder, l.Namespace, holder)
	logger.Info("denied deleting a lease whose holder runs", "holder", holder, "rule", v.Reason)
	return admission.Denied(msg)
}

// LeaseOwner rebuilds the object a CAPTF lease belongs to from its labels. A cluster lease
// belongs to its TerraformCluster whatever its owner-kind label says (only a Job of the
// TerraformCluster can back it). ok is false for a Lease CAPTF does not guard.
func LeaseOwner(l *coordinationv1.Lease) (runlease.Owner, bool) {
	kind := l.Labels[infrav1.OwnerKindLabel]
	switch l.Labels[infrav1.LeaseLabel] {
	case infrav1.LeaseKindRun:
	case infrav1.LeaseKindCluster:
		kind = infrav1.TerraformClusterKind
	default:
		return runlease.Owner{}, false
	}
	return runlease.Owner{Namespace: l.Namespace, Kind: kind, Name: l.Labels[infrav1.OwnerNameLabel],
		Cluster: l.Labels[infrav1.ClusterNameLabel]}, true
}
