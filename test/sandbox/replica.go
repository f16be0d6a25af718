package sandbox

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/cluster-api-provider-terraform/test/sandbox/objectstore"
)

// The replica's credentials and key live in the folder beside the store's data, so a sandbox
// started again on the folder opens what the earlier one sealed: ReplicaKeyFile holds the 32-byte
// encryption key (its key ID is ReplicaSecret's name).
const (
	replicaAccessKey  = "captf-sandbox"
	ReplicaKeyFile    = "encryption.key"
	replicaSecretFile = "store-secret.key"
)

// startReplica starts the object store of Options.StateReplicaDir, makes its bucket, writes
// the manager's Secret and adds the manager's flags; nothing without the option.
func (s *Sandbox) startReplica(ctx context.Context) error {
	dir := s.opts.StateReplicaDir
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state replica folder: %w", err)
	}
	key, err := randomFile(filepath.Join(dir, ReplicaKeyFile), 32)
	if err != nil {
		return err
	}
	storeSecret, err := randomFile(filepath.Join(dir, replicaSecretFile), 20)
	if err != nil {
		return err
	}
	secret := fmt.Sprintf("%x", storeSecret)
	store, err := objectstore.Start(ctx, objectstore.Options{Binary: filepath.Join(s.opts.BinDir, "versitygw"), Dir: filepath.Join(dir, "store"),
		AccessKey: replicaAccessKey, SecretKey: secret, Out: s.opts.KubeControllersOutput})
	if err != nil {
		return fmt.Errorf("state replica store (make test-bins builds bin/versitygw): %w", err)
	}
	s.replica = store
	if err := store.CreateBucket(ctx, ReplicaBucket); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ManagerNamespace}}
	if err := s.client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the manager's namespace: %w", err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ManagerNamespace, Name: ReplicaSecret},
		Data: map[string][]byte{"accessKeyID": []byte(replicaAccessKey), "secretAccessKey": []byte(secret), "encryptionKey": key}}
	if err := s.client.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the state replica's Secret: %w", err)
	}
	if err := s.client.Get(ctx, types.NamespacedName{Namespace: ManagerNamespace, Name: ReplicaSecret}, &corev1.Secret{}); err != nil {
		return fmt.Errorf("read the state replica's Secret back: %w", err)
	}
	s.opts.ManagerArgs = append(s.opts.ManagerArgs, "--state-replica-bucket="+ReplicaBucket, "--state-replica-endpoint="+store.Endpoint,
		"--state-replica-path-style", "--state-replica-secret="+ReplicaSecret)
	s.opts.Log.Info("state replica store up", "endpoint", store.Endpoint, "bucket", ReplicaBucket, "folder", dir)
	return nil
}

// randomFile reads n random bytes from path, or writes n new ones there: the replica's key and
// the store's secret, kept beside the store's data.
func randomFile(path string, n int) ([]byte, error) {
	if b, err := os.ReadFile(path); err == nil && len(b) == n {
		return b, nil
	}
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("make %s: %w", filepath.Base(path), err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return b, nil
}
