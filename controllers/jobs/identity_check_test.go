package jobs

import (
	"context"
	"testing"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// TestAudienceCheckIsOnInThisBuild guards the switch of identity_check_default.go: a build
// without the test-only tag captf_unsafe_no_audience_check (every release) refuses an audience
// the API server accepts through both entry points, CheckIdentityAudience (the engine, the
// webhook) and IdentityAudienceRefusal (the webhook when it cannot ask). It fails, on purpose,
// in a build with the tag.
func TestAudienceCheckIsOnInThisBuild(t *testing.T) {
	if audienceCheckDisabled {
		t.Fatal("audienceCheckDisabled is true: this build has the identity token audience check OFF " +
			"(build tag captf_unsafe_no_audience_check, or identity_check_default.go changed); no release may be built so")
	}
	if reason, _ := IdentityAudienceRefusal("kubernetes.default.svc"); reason != infrav1.IdentityAudienceRefusedReason {
		t.Errorf("IdentityAudienceRefusal(kubernetes.default.svc) = %q, want %s", reason, infrav1.IdentityAudienceRefusedReason)
	}
	p := &answerProber{accepts: true}
	spec := &infrav1.TerraformSpec{Job: infrav1.JobPolicy{IdentityToken: &infrav1.IdentityToken{Audience: "https://issuer.example.com"}}}
	reason, _, err := CheckIdentityAudience(context.Background(), p, spec)
	if err != nil || reason != infrav1.IdentityAudienceRefusedReason || p.asked != 1 {
		t.Errorf("an audience the API server accepts: reason %q, err %v, asked %d; want %s after one question",
			reason, err, p.asked, infrav1.IdentityAudienceRefusedReason)
	}
}
