package v1alpha1_test

import (
	"testing"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// TestOperationCondition: the condition that reports an operation's Jobs and waits, the one
// rule the status and the lease waits both use.
func TestOperationCondition(t *testing.T) {
	want := map[infrav1.Operation]string{
		infrav1.OperationApply: infrav1.ApplyJobSucceededCondition, infrav1.OperationDestroy: infrav1.ApplyJobSucceededCondition,
		infrav1.OperationPlan: infrav1.ApplyJobSucceededCondition, infrav1.OperationRefresh: infrav1.DriftJobSucceededCondition,
		infrav1.OperationDrift: infrav1.DriftJobSucceededCondition, infrav1.OperationRestore: infrav1.RestoreJobSucceededCondition,
	}
	for op, c := range want {
		if got := op.Condition(); got != c {
			t.Errorf("%s.Condition() = %s, want %s", op, got, c)
		}
	}
}
