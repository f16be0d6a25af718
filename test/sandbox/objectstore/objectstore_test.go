package objectstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/captf/cluster-api-provider-terraform/controllers/replica"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/objectstore"
)

const secretOutput = "s3cr3t-output-in-the-real-store-91c2"

func startStore(t *testing.T, dir string) *objectstore.Server {
	t.Helper()
	root, err := envtest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s, err := objectstore.Start(context.Background(), objectstore.Options{
		Binary: filepath.Join(root, "bin", "versitygw"), Dir: dir, AccessKey: "captf-test", SecretKey: "captf-test-secret-key", Out: &out,
	})
	if err != nil {
		t.Fatalf("start the object store (make test-bins builds bin/versitygw): %v\n%s", err, out.String())
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func openReplica(t *testing.T, s *objectstore.Server, o replica.S3Options, key byte) *replica.Store {
	t.Helper()
	b, err := replica.OpenS3(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	k, err := replica.NewStaticKey("test-key", bytes.Repeat([]byte{key}, 32))
	if err != nil {
		t.Fatal(err)
	}
	st, err := replica.New(b, k, replica.Options{Prefix: "mgmt/"})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func version(serial int64) replica.Version {
	return replica.Version{Ref: replica.Ref{Namespace: "team-a", Kind: "TerraformMachine", Name: "m-0"}, UID: "uid-7", Lineage: "lin-7", Serial: serial}
}

func stateOf(serial int64) []byte {
	return fmt.Appendf(nil, `{"version":4,"serial":%d,"lineage":"lin-7","outputs":{"password":{"value":%q}}}`, serial, secretOutput)
}

// The replica's rules hold on a real S3-compatible server: a version is created only where
// none is (the server honours If-None-Match), the bucket holds no plaintext, the identity is in
// the objects' metadata, and what one server kept a new one on the same folder serves.
func TestTheReplicaOnARealS3Store(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	srv := startStore(t, dir)
	if err := srv.CreateBucket(ctx, "captf-states"); err != nil {
		t.Fatal(err)
	}
	store := openReplica(t, srv, srv.ReplicaOptions("captf-states"), 1)

	for _, serial := range []int64{1, 2} {
		if r, err := store.Put(ctx, version(serial), stateOf(serial)); err != nil || !r.Written {
			t.Fatalf("put serial %d: %+v %v", serial, r, err)
		}
	}
	if r, err := store.Put(ctx, version(2), stateOf(2)); err != nil || r.Written {
		t.Fatalf("the same version again: %+v %v, want a replay", r, err)
	}
	var conflict *replica.ConflictError
	if _, err := store.Put(ctx, version(2), []byte(`{"serial":2,"forked":true}`)); !errors.As(err, &conflict) {
		t.Fatalf("another state under serial 2: %v, want a *ConflictError", err)
	}

	var wg sync.WaitGroup
	written := make([]bool, 6)
	errs := make([]error, 6)
	for i := range written {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := store.Put(ctx, version(3), stateOf(3))
			written[i], errs[i] = r.Written, err
		}()
	}
	wg.Wait()
	n := 0
	for i := range written {
		if errs[i] != nil {
			t.Fatalf("writer %d: %v", i, errs[i])
		}
		if written[i] {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d of 6 concurrent writers created serial 3 on the server, want 1", n)
	}

	// What the bucket's own tools see: the identity in the metadata, nothing of the state.
	client := srv.Client()
	list, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("captf-states")})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Contents) != 3 {
		t.Fatalf("the bucket holds %d objects, want 3", len(list.Contents))
	}
	for _, obj := range list.Contents {
		got, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("captf-states"), Key: obj.Key})
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(got.Body)
		_ = got.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, []byte(secretOutput)) || bytes.Contains(raw, []byte(`"outputs"`)) {
			t.Fatalf("%s holds the state in plaintext", aws.ToString(obj.Key))
		}
		if got.Metadata["captf-namespace"] != "team-a" || got.Metadata["captf-lineage"] != "lin-7" || got.Metadata["captf-uid"] != "uid-7" {
			t.Fatalf("%s: metadata %v, want the object's identity", aws.ToString(obj.Key), got.Metadata)
		}
		if !strings.HasPrefix(aws.ToString(obj.Key), "mgmt/states/team-a/TerraformMachine/m-0/lin-7/") {
			t.Fatalf("key %s is not the documented layout", aws.ToString(obj.Key))
		}
	}

	// Wrong credentials: a clear error, nothing written.
	wrong := srv.ReplicaOptions("captf-states")
	wrong.SecretAccessKey = "not-the-secret"
	if _, err := openReplica(t, srv, wrong, 1).Put(ctx, version(4), stateOf(4)); err == nil {
		t.Fatal("a put with wrong credentials succeeded")
	}
	// A wrong encryption key: the server's data stays, and does not open.
	if _, err := openReplica(t, srv, srv.ReplicaOptions("captf-states"), 2).Get(ctx, version(3)); !errors.Is(err, replica.ErrWrongKey) {
		t.Fatalf("get with another key: %v, want ErrWrongKey", err)
	}

	// A new server on the same folder serves what the first kept.
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	again := startStore(t, dir)
	reopened := openReplica(t, again, again.ReplicaOptions("captf-states"), 1)
	versions, err := reopened.List(ctx, version(0).Ref)
	if err != nil {
		t.Fatal(err)
	}
	newest, ok := replica.Newest(versions, "lin-7")
	if !ok || newest.Serial != 3 || len(versions) != 3 {
		t.Fatalf("after a restart the store lists %+v, want serials 1-3", versions)
	}
	got, err := reopened.Get(ctx, newest)
	if err != nil || !bytes.Equal(got, stateOf(3)) {
		t.Fatalf("serial 3 after a restart: %q %v", got, err)
	}
}
