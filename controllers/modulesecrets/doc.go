// Package modulesecrets is the one rule for every Secret whose data reaches module code (the
// terraform/tofu process in a Job's main container), and the one list of the references that
// hand a Secret to it.
//
// The references (Refs, IdentityRefs) are, for an object's spec: spec.job.env[].valueFrom
// .secretKeyRef, the Secret volumes of spec.job.podTemplate, spec.job.cliConfig.secretRef and
// spec.job.cliConfig.credentials[].secretKeyRef, and spec.variablesFrom[].secretRef; for a
// TerraformIdentity: spec.env[].secretKeyRef, Secrets of the manager's namespace.
//
// The rule (Judge):
//   - a Secret of type kubernetes.io/service-account-token, or one carrying the
//     kubernetes.io/service-account.name annotation (which the token controller reads to fill
//     a Secret with a token), never reaches module code, whoever names it: module code holds no
//     Kubernetes credential;
//   - a Secret of the object's namespace reaches module code only if it carries the opt-in
//     label captf.io/variables=true (Label): an object's author can name any Secret of the
//     namespace, and without the opt-in a user who may edit CAPTF objects but not read Secrets
//     would read another workload's Secret through the module's output. The label is the one
//     variablesFrom sources already carry, so one `kubectl label` opts a Secret in for every
//     path. A TerraformIdentity's Secrets need no label: they live in the manager's namespace,
//     which tenants cannot write, and only a cluster-scoped TerraformIdentity (the platform's)
//     can name them, so the label would guard against no one.
//
// Who applies it: the admission webhooks of the three kinds and their templates (Check through
// the API reader; a Secret that does not exist yet is a warning), the engine before every Job
// (Check again, live: a refusal holds the object with InputsValid=False and a Warning event,
// and no Job is created), inputs.Assemble for variablesFrom (on the very read it copies into
// the variables) and jobs.IdentityValues for identities. A Secret that changes after the Job
// was created cannot reach the pod: the Job names no Secret of the object's author. RenamePod
// rewrites every pod-facing reference to a per-run copy (naming.RunModuleSecretName) that the
// engine writes, owned by the Job and immutable, from the very Secrets Check judged (Copies).
//
// Invariants:
//   - Judge and Refs are pure; Check reads each named Secret once and judges that read;
//   - no message carries a Secret's value: messages name the Secret, the key and what to do;
//   - Refs and RenamePod list the same pod-facing references (TestRenamePodCoversRefs).
package modulesecrets
