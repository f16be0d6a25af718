package inputs

import (
	"slices"
	"testing"
)

func TestWithRedactedAddsValuesLongestFirstAndKeepsTheHash(t *testing.T) {
	in := &Inputs{Variables: []byte(`{"a":1}`), Hash: "h", Redact: []string{"medium-secret"}}
	out := WithRedacted(in, "a-much-longer-secret", `quo"te`, "")
	want := []string{"a-much-longer-secret", "medium-secret", `quo\"te`, `quo"te`}
	if !slices.Equal(out.Redact, want) {
		t.Errorf("redact list %q, want %q", out.Redact, want)
	}
	if out.Hash != in.Hash || string(out.Variables) != string(in.Variables) {
		t.Error("the variables or the hash changed")
	}
	if !slices.Equal(in.Redact, []string{"medium-secret"}) {
		t.Errorf("the original inputs changed: %q", in.Redact)
	}
}
