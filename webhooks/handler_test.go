package webhooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/controllers/runlease"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// guardOver returns a Guard whose reads go to a fake API server that fails every read when
// failReads, and a counter of the reads it made.
func guardOver(t *testing.T, failReads bool) (*webhooks.Guard, *int) {
	t.Helper()
	s, err := setup.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	c := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			reads++
			if failReads {
				return errors.New("connection refused")
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			reads++
			if failReads {
				return errors.New("connection refused")
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()
	return &webhooks.Guard{Reader: c, Leases: runlease.New(c, c, runlease.DefaultOptions()), Override: &webhooks.Override{}}, &reads
}

func updateRequest(t *testing.T, sub string, oldObj, newObj *infrav1.TerraformMachine) admission.Request {
	t.Helper()
	raw := func(o *infrav1.TerraformMachine) runtime.RawExtension {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Update, SubResource: sub, Namespace: "ns", Name: "m",
		Kind:     metav1.GroupVersionKind{Group: infrav1.GroupVersion.Group, Version: "v1alpha1", Kind: infrav1.TerraformMachineKind},
		UserInfo: authenticationv1.UserInfo{Username: "someone"},
		Object:   raw(newObj), OldObject: raw(oldObj),
	}}
}

func machine(blockMove bool) *infrav1.TerraformMachine {
	m := objects.Machine("ns", "m").Finalizer()
	if blockMove {
		m.BlockMove()
	}
	return m.Obj()
}

func TestGuardFailsClosedWhenItCannotReadTheEvidence(t *testing.T) {
	g, _ := guardOver(t, true)
	resp := g.Handle(context.Background(), updateRequest(t, "", machine(true), machine(false)))
	if resp.Allowed {
		t.Fatal("a removal whose evidence cannot be read must be refused")
	}
	if !strings.Contains(resp.Result.Message, "could not confirm that no Job of the object runs") || !strings.Contains(resp.Result.Message, "connection refused") {
		t.Fatalf("message: %s", resp.Result.Message)
	}
}

func TestGuardReadsNothingForAnUnguardedUpdate(t *testing.T) {
	g, reads := guardOver(t, true)
	withLabel := machine(true)
	withLabel.Labels = map[string]string{"team": "infra"}
	if resp := g.Handle(context.Background(), updateRequest(t, "", machine(true), withLabel)); !resp.Allowed {
		t.Fatalf("an update that removes nothing must pass whatever the reads would say: %+v", resp.Result)
	}
	if *reads != 0 {
		t.Fatalf("%d reads for an update that removes nothing", *reads)
	}
}

func TestGuardAllowsAnEvidencedRemoval(t *testing.T) {
	g, reads := guardOver(t, false)
	if resp := g.Handle(context.Background(), updateRequest(t, "", machine(true), machine(false))); !resp.Allowed {
		t.Fatalf("no lease, no activeJob: the removal is backed: %+v", resp.Result)
	}
	if *reads == 0 {
		t.Fatal("the removal was allowed without reading the run lease")
	}
}
