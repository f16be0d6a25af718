//go:build !captf_unsafe_no_audience_check

package jobs

// audienceCheckDisabled is false in every build without the build tag
// captf_unsafe_no_audience_check, which is every build CAPTF releases: CheckIdentityAudience
// and IdentityAudienceRefusal refuse an identity token audience the Kubernetes API server
// accepts. The tag and its file identity_check_unsafe.go exist only so that the end-to-end
// suite can build a manager without the check and show the exploit it prevents
// (test/e2e/identity_test.go).
const audienceCheckDisabled = false
