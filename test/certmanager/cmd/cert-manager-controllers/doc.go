// Command cert-manager-controllers runs cert-manager's own controllers, compiled from the
// cert-manager module at the version CAPTF's go.mod pins, against one API server. It is a test
// tool (built into the tool cache by `hack/build-bin.sh cert-manager`), never shipped: the
// cert-manager binaries live in modules the Go module proxy does not serve, so this program
// holds only the wiring that those binaries would do and none of the logic.
//
// What runs, in one process:
//
//   - the cainjector, on a controller-runtime manager, for ValidatingWebhookConfigurations,
//     MutatingWebhookConfigurations and CustomResourceDefinitions (conversion webhooks) that
//     carry `cert-manager.io/inject-ca-from` (a Certificate) or
//     `cert-manager.io/inject-ca-from-secret` (a Secret);
//   - the Issuer and ClusterIssuer controllers, with the SelfSigned and CA issuer types
//     registered (an Issuer of any other type never becomes Ready: the controller logs that
//     its type is not registered and retries);
//   - the Certificate controllers: trigger, key manager, request manager, issuing, readiness and
//     revision manager (which prunes old CertificateRequests);
//   - the CertificateRequest controllers: the approver (without it nothing is signed) and the
//     SelfSigned and CA signers.
//
// What does not run: ACME (orders, challenges, the HTTP-01 and DNS-01 solvers), Vault, Venafi
// and external issuers; the CertificateSigningRequest controllers; the ingress and Gateway API
// certificate shims; the certificate metrics controller; cainjector's APIService injection;
// cert-manager's admission webhook (so no defaulting or validation of cert-manager objects
// beyond what the CRDs' schemas check); leader election (run one copy per API server).
//
// Flags: --kubeconfig (required), --cluster-resource-namespace (where a ClusterIssuer's CA
// Secret lives, as cert-manager's own flag of that name), --workers (per controller) and -v (log
// verbosity). No metrics or health endpoint is served.
//
// The process stops on SIGTERM or SIGINT, and by itself when its parent dies (it watches its
// parent process id), so a test that is killed leaves no controller behind.
package main
