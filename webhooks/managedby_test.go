package webhooks_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

func TestValidateExternallyManaged(t *testing.T) {
	mark := map[string]string{infrav1.ManagedByAnnotation: ""}
	fin := []string{infrav1.Finalizer}
	cluster := func(ann map[string]string, finalizers []string) metav1.Object {
		return &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Annotations: ann, Finalizers: finalizers}}
	}
	for _, tc := range []struct {
		name   string
		old    map[string]string
		obj    metav1.Object
		refuse bool
	}{
		{"create, marked, no finalizer", nil, cluster(mark, nil), false},
		{"create, marked, with the finalizer", nil, cluster(mark, fin), true},
		{"create, not marked", nil, cluster(nil, fin), false},
		{"update adds the mark to a managed cluster", map[string]string{}, cluster(mark, fin), true},
		{"update keeps the mark", mark, cluster(mark, fin), false},
		{"update adds the mark, no finalizer", map[string]string{}, cluster(mark, []string{"other.io/f"}), false},
		{"a machine's mark is not the contract's", nil, &infrav1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Annotations: mark, Finalizers: fin}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := webhooks.ValidateExternallyManaged(tc.old, tc.obj)
			if got := len(errs) > 0; got != tc.refuse {
				t.Errorf("refused = %v (%v), want %v", got, errs, tc.refuse)
			}
		})
	}
}
