// Package inputs assembles the Terraform variables a Job of a TerraformCluster,
// TerraformMachine or TerraformMachinePool runs with, and builds the two Secrets that carry them:
// the durable inputs Secret (owned by the object, moved by `clusterctl move`, read again by a
// destroy) and the per-run Secret (owned by the Job, read by the runner).
//
// Assemble reads spec.variablesFrom through the reader the caller passes (the engine passes the
// live API reader, so a Secret edited a second ago is seen), applies spec.variables over it and
// adds the contract inputs under the one reserved variable "captf".
//
// Invariants:
//   - Only Secrets and ConfigMaps labelled captf.io/variables=true (VariablesLabel) are read.
//     A source without the label is an InputsError (VariablesSourceNotOptedIn) whether or not
//     its entry is optional: optional covers a missing source, never a foreign one.
//   - Precedence is fixed: variablesFrom entries in order, later entries win; spec.variables
//     wins over all of them; nothing a user writes can replace the "captf" variable.
//   - Every variable name is a valid Terraform identifier that a module can declare.
//   - Inputs.Variables is canonical JSON (object keys sorted at every depth, no insignificant
//     whitespace), so equal inputs always give the same Hash whatever order they were read in,
//     and Hash carries a scheme version prefix so the scheme can change without false matches.
//   - Hash covers the module's source (ModuleIdentity of spec.module) with the variables: the
//     same variables for another module are another hash. LegacyHash is the earlier scheme's
//     (the variables alone), kept only to take over what an earlier manager recorded; the
//     durable inputs Secret keeps the module beside the variables, and FromDurableSecret checks
//     either scheme's hash against what the Secret holds.
//   - Every value read from a Secret, and the bootstrap data, is in Inputs.Redact, so the runner
//     can mask it in logs and results.
//   - Inputs never exceed what the per-run Secret can hold (MaxRunSecretBytes, all keys
//     counted); too large is a typed error, never a truncated Secret.
//   - Problems a user can fix (a missing or unlabelled source, a bad name, inputs too large)
//     are returned as *InputsError with a condition reason; anything else (API errors) is
//     returned wrapped, so the caller retries instead of reporting a user error.
//   - Values are never logged; log lines name sources and keys only.
package inputs
