// Package docs holds the test that keeps the documentation honest: every condition, reason,
// event reason, annotation, label, flag and metric that README.md or docs/ names exists in the
// code, and every operation the docs say the controller runs is one the engine starts. A
// promise without code fails CI.
package docs
