// Package registry is the sandbox's OCI registry and the images its tests push there: a real
// registry (go-containerregistry's in-memory one, speaking the OCI distribution API) on a
// loopback port behind basic auth, so the node (test/sandbox/executor) pulls a module image
// with a Pod's imagePullSecrets as a kubelet does, and a wrong or missing secret is refused
// with the registry's own reason.
//
// Invariants:
//   - every request, pulls included, needs the registry's one user and password; any other
//     gets 401 with a Basic challenge and an OCI error body (code UNAUTHORIZED) saying whether
//     the credentials were missing or wrong;
//   - the registry listens on 127.0.0.1 only and stops with its context or Stop;
//   - the images it builds are real OCI images (layers of tar entries, a config with
//     WorkingDir and PATH); an image's program is a placeholder, never a real terraform or
//     tofu: the sandbox's node runs the host's program of that name.
package registry
