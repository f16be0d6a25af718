// Package statetest writes Terraform states the way the kubernetes backend does (a Secret named
// naming.StateSecretName(suffix), key "tfstate", gzip'd state JSON), for tests: the engine's
// tests complete a Job by writing the state a real runner would have left. It is for tests
// only; production code never writes state.
//
// Invariants: what it writes is what Read accepts from the real backend (one "tfstate" key of
// gzip'd format-4 JSON), so a test that passes with it exercises the production reader.
package statetest
