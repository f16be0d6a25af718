package decide

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// TestAbandonSetBeforeReadsTheManagedFields holds the evidence of AbandonPredates: an abandon
// counts as set before the deletion only when every owner of the annotation last wrote in an
// earlier second than the deletion; anything the managed fields cannot prove counts as meant.
func TestAbandonSetBeforeReadsTheManagedFields(t *testing.T) {
	del := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 5, 0, time.UTC))
	at := func(sec int, nsec int) *metav1.Time {
		x := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, sec, nsec, time.UTC))
		return &x
	}
	owns := func(manager string, when *metav1.Time, keys ...string) metav1.ManagedFieldsEntry {
		fields := ""
		for i, k := range keys {
			if i > 0 {
				fields += ","
			}
			fields += fmt.Sprintf("%q:{}", "f:"+k)
		}
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Time: when,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{` + fields + `}}}`)}
	}
	abandon := infrav1.AbandonInfrastructureAnnotation
	for _, c := range []struct {
		name     string
		deleting bool
		entries  []metav1.ManagedFieldsEntry
		want     bool
	}{
		{"not deleting: nothing to compare", false, []metav1.ManagedFieldsEntry{owns("kubectl-annotate", at(1, 0), abandon)}, false},
		{"set in an earlier second than the deletion", true, []metav1.ManagedFieldsEntry{owns("kubectl-annotate", at(4, 900), abandon)}, true},
		{"set in the second of the deletion: cannot tell, taken as meant", true, []metav1.ManagedFieldsEntry{owns("kubectl-annotate", at(5, 0), abandon)}, false},
		{"set after the deletion", true, []metav1.ManagedFieldsEntry{owns("kubectl-annotate", at(9, 0), abandon)}, false},
		{"only other annotations are owned: no proof", true, []metav1.ManagedFieldsEntry{owns("kubectl-annotate", at(1, 0), "example.com/x")}, false},
		{"no managed fields at all: no proof", true, nil, false},
		{"two owners, one of them after the deletion: no proof", true,
			[]metav1.ManagedFieldsEntry{owns("a", at(1, 0), abandon), owns("b", at(7, 0), abandon)}, false},
		{"two owners, both before the deletion", true,
			[]metav1.ManagedFieldsEntry{owns("a", at(1, 0), abandon, "example.com/x"), owns("b", at(3, 0), abandon)}, true},
		{"an owner without a time: no proof", true, []metav1.ManagedFieldsEntry{owns("a", nil, abandon)}, false},
		{"an unrelated manager writing after the deletion does not matter", true,
			[]metav1.ManagedFieldsEntry{owns("kubectl-annotate", at(2, 0), abandon), owns("manager", at(8, 0), infrav1.BlockMoveAnnotation)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := &metav1.ObjectMeta{ManagedFields: c.entries}
			if c.deleting {
				o.DeletionTimestamp = &del
			}
			if got := AbandonSetBefore(o); got != c.want {
				t.Errorf("AbandonSetBefore = %v, want %v", got, c.want)
			}
		})
	}
}
