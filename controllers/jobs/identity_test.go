package jobs

import (
	"context"
	"testing"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// answerProber answers every question the same, and counts them.
type answerProber struct {
	accepts bool
	asked   int
}

func (a *answerProber) AcceptsAudience(context.Context, string) (bool, error) {
	a.asked++
	return a.accepts, nil
}

// TestCheckIdentityAudienceRefusesWhatTheAPIServerAccepts is the rule without an API server:
// the well-known audiences are refused without asking; any other audience is refused exactly
// when the API server (here a prober) accepts it.
func TestCheckIdentityAudienceRefusesWhatTheAPIServerAccepts(t *testing.T) {
	spec := func(aud string) *infrav1.TerraformSpec {
		return &infrav1.TerraformSpec{Job: infrav1.JobPolicy{IdentityToken: &infrav1.IdentityToken{Audience: aud}}}
	}
	for _, tc := range []struct {
		audience      string
		serverAccepts bool
		refused       bool
		asks          int
	}{
		{"sts.amazonaws.com", false, false, 1},
		{"https://oidc.example.com/cluster", true, true, 1},
		{"kubernetes.default.svc", false, true, 0},
		{"https://kubernetes.default.svc.cluster.local/", false, true, 0},
		{"HTTPS://KUBERNETES.DEFAULT.SVC", false, true, 0},
	} {
		p := &answerProber{accepts: tc.serverAccepts}
		reason, msg, err := CheckIdentityAudience(context.Background(), p, spec(tc.audience))
		if err != nil {
			t.Fatalf("%s: %v", tc.audience, err)
		}
		if got := reason == infrav1.IdentityAudienceRefusedReason; got != tc.refused {
			t.Errorf("%s (server accepts: %v): refused %v, want %v (%s)", tc.audience, tc.serverAccepts, got, tc.refused, msg)
		}
		if p.asked != tc.asks {
			t.Errorf("%s: asked the API server %d times, want %d", tc.audience, p.asked, tc.asks)
		}
	}
	p := &answerProber{accepts: true}
	if reason, _, err := CheckIdentityAudience(context.Background(), p, &infrav1.TerraformSpec{}); reason != "" || err != nil || p.asked != 0 {
		t.Errorf("no identity token: reason %q, err %v, asked %d; want nothing", reason, err, p.asked)
	}
}
