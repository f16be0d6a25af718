package engine

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
)

// The decision lives in controllers/decide. These names stay here for the packages that know
// the engine by them: Wait is part of the Kind contract the per-kind controllers implement,
// and the docs and drift bench tests read StartedOperations and DriftDueAt through the engine.

// Wait says why a pass starts nothing (decide.Wait).
type Wait = decide.Wait

// StartedOperations are the operations Decide starts Jobs of (decide.StartedOperations).
var StartedOperations = decide.StartedOperations

// DriftDueAt is when the next drift check of an object is due (decide.DriftDueAt).
func DriftDueAt(last, created, managerStart time.Time, interval time.Duration, uid types.UID) time.Time {
	return decide.DriftDueAt(last, created, managerStart, interval, uid)
}
