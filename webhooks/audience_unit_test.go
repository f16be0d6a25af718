package webhooks_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// unreachableProber cannot ask the API server.
type unreachableProber struct{}

func (unreachableProber) AcceptsAudience(context.Context, string) (bool, error) {
	return false, errors.New("connection refused")
}

// TestAudienceAdmissionWhenTheAPIServerCannotBeAsked is docs/jobs.md's promise: without an answer
// from the API server, admission still refuses the well-known audiences and admits any other with
// a warning (the controller asks again before every Job).
func TestAudienceAdmissionWhenTheAPIServerCannotBeAsked(t *testing.T) {
	v := webhooks.Validator[*infrav1.TerraformCluster]{Kind: infrav1.TerraformClusterKind, Audiences: unreachableProber{}}
	obj := func(aud string) *infrav1.TerraformCluster {
		return objects.Cluster("ns", "c").Module("example.com/module:1").
			Spec(func(s *infrav1.TerraformSpec) { s.Job.IdentityToken = &infrav1.IdentityToken{Audience: aud} }).Obj()
	}
	warnings, err := v.ValidateCreate(context.Background(), obj("https://kubernetes.default.svc"))
	if err == nil || !strings.Contains(err.Error(), "well-known audience") {
		t.Errorf("a well-known audience: err %v, want the refusal", err)
	}
	if len(warnings) != 0 {
		t.Errorf("a refused audience carries no warning, got %q", warnings)
	}
	warnings, err = v.ValidateCreate(context.Background(), obj("sts.amazonaws.com"))
	if err != nil {
		t.Errorf("another audience: err %v, want it admitted", err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "could not ask the API server") {
		t.Errorf("another audience: warnings %q, want one that says the API server could not be asked", warnings)
	}
}
