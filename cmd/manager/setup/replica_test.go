package setup

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// A replica named by its bucket but without a usable Secret stops the manager's start with an
// error that says what is missing (docs/configuration.md, --state-replica-secret); a manager
// whose flags name no bucket keeps no replica and reads nothing.
func TestAReplicaWithoutAUsableSecretStopsTheStart(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	partial := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "captf-system", Name: "partial"},
		Data: map[string][]byte{ReplicaAccessKeyIDKey: []byte("a"), ReplicaEncryptionKeyKey: []byte("short")}}
	short := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "captf-system", Name: "short-key"},
		Data: map[string][]byte{ReplicaAccessKeyIDKey: []byte("a"), ReplicaSecretAccessKeyKey: []byte("b"), ReplicaEncryptionKeyKey: []byte("short")}}
	live := fake.NewClientBuilder().WithScheme(scheme).WithObjects(partial, short).Build()
	for name, tc := range map[string]struct {
		opts      ReplicaOptions
		namespace string
		want      string
	}{
		"no Secret named":          {ReplicaOptions{Bucket: "b"}, "captf-system", "needs --state-replica-secret"},
		"no manager namespace":     {ReplicaOptions{Bucket: "b", Secret: "partial"}, "", "manager's namespace, which is unknown"},
		"a Secret that is missing": {ReplicaOptions{Bucket: "b", Secret: "gone"}, "captf-system", "read the state replica's Secret captf-system/gone"},
		"a Secret without keys":    {ReplicaOptions{Bucket: "b", Secret: "partial"}, "captf-system", "lacks the keys [secretAccessKey]"},
		"a key of the wrong size":  {ReplicaOptions{Bucket: "b", Secret: "short-key"}, "captf-system", "AES-256 needs 32"},
	} {
		t.Run(name, func(t *testing.T) {
			store, err := stateReplica(context.Background(), nil, live, Options{StateReplica: tc.opts}, tc.namespace)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("store %v, error %v; want an error saying %q", store, err, tc.want)
			}
		})
	}
	store, err := stateReplica(context.Background(), nil, live, Options{}, "captf-system")
	if store != nil || err != nil {
		t.Fatalf("no bucket named: store %v, error %v; want neither", store, err)
	}
}
