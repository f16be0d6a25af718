//go:build captf_unsafe_no_audience_check

package jobs

import "os"

// audienceCheckDisabled turns the identity token audience check OFF: CheckIdentityAudience and
// IdentityAudienceRefusal admit every audience, including the Kubernetes API server's own, so
// module code receives a working Kubernetes credential of the Job's ServiceAccount and can read
// and overwrite the object's state Secret past the state channel.
//
// UNSAFE. TEST ONLY. This file is compiled only with the build tag
// captf_unsafe_no_audience_check, which exists for one purpose: the end-to-end suite
// (test/e2e/identity_test.go) builds a second manager with it to show that the exploit is real
// when the check is off. No released binary, image or Makefile target is built with this tag,
// and none may be: a manager built with it does not protect the state.
const audienceCheckDisabled = true

// init says so on every start of a binary built with the tag, so such a binary is never
// mistaken for a real one.
func init() {
	_, _ = os.Stderr.WriteString("WARNING: built with captf_unsafe_no_audience_check: the identity token audience check is OFF; " +
		"module code can receive a Kubernetes credential. This binary is for the end-to-end suite only.\n")
}
