package setup

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/captf/cluster-api-provider-terraform/controllers/replica"
)

// The keys of the state replica's Secret (ReplicaOptions.Secret).
const (
	ReplicaAccessKeyIDKey     = "accessKeyID"
	ReplicaSecretAccessKeyKey = "secretAccessKey"
	ReplicaEncryptionKeyKey   = "encryptionKey"
	ReplicaEncryptionKeyIDKey = "encryptionKeyID"
)

// stateReplica opens the replica store o names (nil when it names none), reading its Secret
// live from namespace, and closes the bucket when the manager stops.
func stateReplica(ctx context.Context, mgr manager.Manager, live client.Reader, o Options, namespace string) (*replica.Store, error) {
	if o.StateReplicaStore != nil {
		return o.StateReplicaStore, nil
	}
	ro := o.StateReplica
	if ro.Bucket == "" {
		return nil, nil
	}
	if ro.Secret == "" {
		return nil, errors.New("--state-replica-bucket needs --state-replica-secret: a Secret of the manager's namespace with the store's credentials and the encryption key")
	}
	if namespace == "" {
		return nil, errors.New("the state replica's Secret is read from the manager's namespace, which is unknown: run the manager in a Pod or set --manager-service-account")
	}
	sec := &corev1.Secret{}
	if err := live.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ro.Secret}, sec); err != nil {
		return nil, fmt.Errorf("read the state replica's Secret %s/%s: %w", namespace, ro.Secret, err)
	}
	var missing []string
	for _, k := range []string{ReplicaAccessKeyIDKey, ReplicaSecretAccessKeyKey, ReplicaEncryptionKeyKey} {
		if len(sec.Data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the state replica's Secret %s/%s lacks the keys %v", namespace, ro.Secret, missing)
	}
	keyID := string(sec.Data[ReplicaEncryptionKeyIDKey])
	if keyID == "" {
		keyID = ro.Secret
	}
	key, err := replica.NewStaticKey(keyID, sec.Data[ReplicaEncryptionKeyKey])
	if err != nil {
		return nil, fmt.Errorf("the state replica's Secret %s/%s: %w", namespace, ro.Secret, err)
	}
	bucket, err := replica.OpenS3(ctx, replica.S3Options{Endpoint: ro.Endpoint, Region: ro.Region, Bucket: ro.Bucket, PathStyle: ro.PathStyle,
		AccessKeyID: string(sec.Data[ReplicaAccessKeyIDKey]), SecretAccessKey: string(sec.Data[ReplicaSecretAccessKeyKey])})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		return bucket.Close()
	})); err != nil {
		_ = bucket.Close()
		return nil, fmt.Errorf("add the replica bucket's closer: %w", err)
	}
	return replica.New(bucket, key, replica.Options{Prefix: ro.Prefix})
}
