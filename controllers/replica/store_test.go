package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
)

const secretOutput = "s3cr3t-output-value-6f1d"

func testKey(t *testing.T, id string, fill byte) *StaticKey {
	t.Helper()
	k, err := NewStaticKey(id, bytes.Repeat([]byte{fill}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func testStore(t *testing.T, bucket *blob.Bucket, key KeySource) *Store {
	t.Helper()
	s, err := New(bucket, key, Options{Prefix: "mgmt-a/"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func version(serial int64) Version {
	return Version{Ref: Ref{Namespace: "team-a", Kind: "TerraformCluster", Name: "demo"}, UID: "uid-1", Lineage: "lin-1", Serial: serial}
}

func stateOf(serial int64) []byte {
	return []byte(fmt.Sprintf(`{"version":4,"serial":%d,"lineage":"lin-1","outputs":{"token":{"value":%q}}}`, serial, secretOutput))
}

func TestPutGetListRoundTrip(t *testing.T) {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	s := testStore(t, bucket, testKey(t, "k1", 1))
	for _, serial := range []int64{1, 2, 10} {
		r, err := s.Put(ctx, version(serial), stateOf(serial))
		if err != nil || !r.Written {
			t.Fatalf("put serial %d: %+v, %v", serial, r, err)
		}
	}
	got, err := s.Get(ctx, version(10))
	if err != nil || !bytes.Equal(got, stateOf(10)) {
		t.Fatalf("get serial 10: %q, %v", got, err)
	}
	list, err := s.List(ctx, version(0).Ref)
	if err != nil {
		t.Fatal(err)
	}
	var serials []int64
	for _, v := range list {
		serials = append(serials, v.Serial)
	}
	if fmt.Sprint(serials) != "[1 2 10]" {
		t.Fatalf("listed serials %v, want [1 2 10] (in serial order, 10 after 2)", serials)
	}
	if n, ok := Newest(list, "lin-1"); !ok || n.Serial != 10 {
		t.Fatalf("newest %+v %v, want serial 10", n, ok)
	}
	if _, ok := Newest(list, "lin-other"); ok {
		t.Fatal("a lineage the store does not hold has no newest version")
	}
	attrs, err := bucket.Attributes(ctx, "mgmt-a/states/team-a/TerraformCluster/demo/lin-1/00000000000000000010.tfstate.sealed")
	if err != nil {
		t.Fatalf("the version is not at the documented key: %v", err)
	}
	for k, want := range map[string]string{"captf-namespace": "team-a", "captf-kind": "TerraformCluster", "captf-name": "demo", "captf-uid": "uid-1", "captf-lineage": "lin-1", "captf-serial": "10", "captf-key-id": "k1"} {
		if attrs.Metadata[k] != want {
			t.Errorf("metadata %s = %q, want %q", k, attrs.Metadata[k], want)
		}
	}
	if _, err := s.Get(ctx, version(3)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a serial never written: %v, want ErrNotFound", err)
	}
}

func TestAReplayIsANoOpAndAnotherStateUnderTheSameSerialOverwritesNothing(t *testing.T) {
	ctx := context.Background()
	s := testStore(t, memblob.OpenBucket(nil), testKey(t, "k1", 1))
	if _, err := s.Put(ctx, version(5), stateOf(5)); err != nil {
		t.Fatal(err)
	}
	r, err := s.Put(ctx, version(5), stateOf(5))
	if err != nil || r.Written {
		t.Fatalf("the same version again: %+v, %v; want a no-op", r, err)
	}
	_, err = s.Put(ctx, version(5), []byte(`{"serial":5,"lineage":"lin-1","forked":true}`))
	var conflict *ConflictError
	if !errors.As(err, &conflict) {
		t.Fatalf("another state under serial 5: %v, want a *ConflictError", err)
	}
	got, err := s.Get(ctx, version(5))
	if err != nil || !bytes.Equal(got, stateOf(5)) {
		t.Fatalf("after the conflict the store holds %q (%v), want the first state", got, err)
	}
}

func TestAnOlderVersionArrivingLateNeverReplacesTheNewest(t *testing.T) {
	ctx := context.Background()
	s := testStore(t, memblob.OpenBucket(nil), testKey(t, "k1", 1))
	for _, serial := range []int64{7, 3} { // 3 arrives after 7 (a slow manager, a retry)
		if _, err := s.Put(ctx, version(serial), stateOf(serial)); err != nil {
			t.Fatal(err)
		}
	}
	list, err := s.List(ctx, version(0).Ref)
	if err != nil {
		t.Fatal(err)
	}
	n, ok := Newest(list, "lin-1")
	if !ok || n.Serial != 7 {
		t.Fatalf("newest %+v, want serial 7", n)
	}
	got, err := s.Get(ctx, n)
	if err != nil || !bytes.Equal(got, stateOf(7)) {
		t.Fatalf("the newest holds %q, %v", got, err)
	}
}

func TestConcurrentWritersOfOneVersionWriteItOnce(t *testing.T) {
	ctx := context.Background()
	s := testStore(t, memblob.OpenBucket(nil), testKey(t, "k1", 1))
	var wg sync.WaitGroup
	results := make([]Result, 8)
	errs := make([]error, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = s.Put(ctx, version(4), stateOf(4))
		}()
	}
	wg.Wait()
	written := 0
	for i := range results {
		if errs[i] != nil {
			t.Fatalf("writer %d: %v", i, errs[i])
		}
		if results[i].Written {
			written++
		}
	}
	if written != 1 {
		t.Fatalf("%d writers wrote version 4, want exactly 1 (the others replays)", written)
	}
}

func TestTheBucketHoldsNoPlaintextState(t *testing.T) {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	s := testStore(t, bucket, testKey(t, "k1", 1))
	for serial := int64(1); serial <= 3; serial++ {
		if _, err := s.Put(ctx, version(serial), stateOf(serial)); err != nil {
			t.Fatal(err)
		}
	}
	it := bucket.List(nil)
	seen := 0
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seen++
		raw, err := bucket.ReadAll(ctx, obj.Key)
		if err != nil {
			t.Fatal(err)
		}
		attrs, err := bucket.Attributes(ctx, obj.Key)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, []byte(secretOutput)) || strings.Contains(obj.Key, secretOutput) || strings.Contains(fmt.Sprint(attrs.Metadata), secretOutput) {
			t.Fatalf("%s holds the output value in plaintext", obj.Key)
		}
		if bytes.Contains(raw, []byte(`"outputs"`)) {
			t.Fatalf("%s holds state JSON in plaintext", obj.Key)
		}
	}
	if seen != 3 {
		t.Fatalf("the bucket holds %d objects, want 3", seen)
	}
}

func TestAWrongKeyIsAClearErrorAndOverwritesNothing(t *testing.T) {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	right := testStore(t, bucket, testKey(t, "k1", 1))
	if _, err := right.Put(ctx, version(2), stateOf(2)); err != nil {
		t.Fatal(err)
	}
	for name, key := range map[string]*StaticKey{
		"another key under another id":  testKey(t, "k2", 2),
		"another key under the same id": testKey(t, "k1", 2),
	} {
		wrong := testStore(t, bucket, key)
		if _, err := wrong.Get(ctx, version(2)); !errors.Is(err, ErrWrongKey) {
			t.Errorf("%s: get %v, want ErrWrongKey", name, err)
		}
		if _, err := wrong.Put(ctx, version(2), []byte("another state")); !errors.Is(err, ErrWrongKey) {
			t.Errorf("%s: put over a version it cannot open: %v, want ErrWrongKey", name, err)
		}
	}
	got, err := right.Get(ctx, version(2))
	if err != nil || !bytes.Equal(got, stateOf(2)) {
		t.Fatalf("the right key reads %q, %v", got, err)
	}
}

func TestASealedVersionOpensOnlyAsWhatItWasSealedFor(t *testing.T) {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	s := testStore(t, bucket, testKey(t, "k1", 1))
	res, err := s.Put(ctx, version(2), stateOf(2))
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := bucket.ReadAll(ctx, res.Key)
	if err != nil {
		t.Fatal(err)
	}
	// Copied under another object's key, another serial or another lineage: it does not open.
	others := map[string]Version{}
	other := version(2)
	other.Name = "other"
	others["another object"] = other
	others["another serial"] = version(3)
	other = version(2)
	other.Lineage = "lin-2"
	others["another lineage"] = other
	for name, v := range others {
		if err := bucket.WriteAll(ctx, s.key(v), sealed, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, v); !errors.Is(err, ErrWrongKey) {
			t.Errorf("%s: %v, want ErrWrongKey", name, err)
		}
	}
	// The UID in the header is authenticated too.
	forged := bytes.Replace(sealed, []byte(`"uid":"uid-1"`), []byte(`"uid":"uid-9"`), 1)
	if bytes.Equal(forged, sealed) {
		t.Fatal("the header does not carry the UID as expected")
	}
	if _, _, err := open(ctx, s.keys, version(2), forged); !errors.Is(err, ErrWrongKey) {
		t.Errorf("a header with another UID: %v, want ErrWrongKey", err)
	}
	// A flipped bit of the ciphertext.
	flipped := bytes.Clone(sealed)
	flipped[len(flipped)-1] ^= 1
	if _, _, err := open(ctx, s.keys, version(2), flipped); !errors.Is(err, ErrWrongKey) {
		t.Errorf("a flipped bit: %v, want ErrWrongKey", err)
	}
}

func TestPutRefusesAVersionWithoutItsIdentity(t *testing.T) {
	ctx := context.Background()
	s := testStore(t, memblob.OpenBucket(nil), testKey(t, "k1", 1))
	cases := map[string]func(*Version){
		"no uid":            func(v *Version) { v.UID = "" },
		"no lineage":        func(v *Version) { v.Lineage = "" },
		"no namespace":      func(v *Version) { v.Namespace = "" },
		"a slash in a name": func(v *Version) { v.Name = "a/b" },
		"a negative serial": func(v *Version) { v.Serial = -1 },
		"a dot-dot lineage": func(v *Version) { v.Lineage = ".." },
	}
	for name, mutate := range cases {
		v := version(1)
		mutate(&v)
		if _, err := s.Put(ctx, v, stateOf(1)); err == nil {
			t.Errorf("%s: put accepted", name)
		}
	}
	if _, err := NewStaticKey("k", []byte("short")); err == nil {
		t.Error("a key of 5 bytes was accepted")
	}
}
