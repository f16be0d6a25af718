package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"k8s.io/apimachinery/pkg/types"
)

// Ref names an object whose states the store keeps: a new management cluster finds them by
// namespace, kind and name (its object has another UID).
type Ref struct {
	Namespace, Kind, Name string
}

// Version is one state version of an object.
type Version struct {
	Ref
	// UID is the object's UID when it was written (in the sealed header and the metadata).
	UID types.UID
	// Lineage and Serial are the state's.
	Lineage string
	Serial  int64
	// Written is when the store received it (the bucket's modification time; List only).
	Written time.Time
}

// Result says what a Put did.
type Result struct {
	// Written: the version was new and is now in the store; false: the same state was
	// already there (a replay).
	Written bool
	// Key is the version's key in the bucket.
	Key string
}

// ConflictError: the store holds another state under the same lineage and serial. Nothing
// was overwritten.
type ConflictError struct {
	Key string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("the replica %s holds another state with the same lineage and serial; nothing was overwritten", e.Key)
}

// ErrNotFound: the store holds no such version.
var ErrNotFound = errors.New("no such state version in the replica")

// Store keeps sealed state versions in a bucket.
type Store struct {
	bucket *blob.Bucket
	keys   KeySource
	prefix string
}

// Options configure a Store.
type Options struct {
	// Prefix is put before every key (for a bucket shared with other data, or by several
	// management clusters); "" puts the states at the bucket's root. A non-empty prefix should
	// end with "/".
	Prefix string
}

// New returns a Store over bucket, sealing with keys. The caller owns the bucket (and closes
// it).
func New(bucket *blob.Bucket, keys KeySource, opts Options) (*Store, error) {
	if bucket == nil || keys == nil {
		return nil, errors.New("a replica store needs a bucket and a key")
	}
	return &Store{bucket: bucket, keys: keys, prefix: opts.Prefix}, nil
}

func (s *Store) objectPrefix(r Ref) string {
	return s.prefix + "states/" + r.Namespace + "/" + r.Kind + "/" + r.Name + "/"
}

func (s *Store) key(v Version) string {
	return fmt.Sprintf("%s%s/%020d.tfstate.sealed", s.objectPrefix(v.Ref), v.Lineage, v.Serial)
}

func (v Version) validate() error {
	var missing []string
	for name, val := range map[string]string{"namespace": v.Namespace, "kind": v.Kind, "name": v.Name, "uid": string(v.UID), "lineage": v.Lineage} {
		if val == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("a replicated version needs its %s", strings.Join(missing, ", "))
	}
	if v.Serial < 0 {
		return fmt.Errorf("serial %d is negative", v.Serial)
	}
	for _, part := range []string{v.Namespace, v.Kind, v.Name, v.Lineage} {
		if strings.ContainsAny(part, "/\x00") || part == "." || part == ".." {
			return fmt.Errorf("%q cannot be part of a replica key", part)
		}
	}
	return nil
}

// Put writes one state version (the backend's tfstate bytes, as the state Secret holds them),
// sealed, where no version is yet: the same state again is a no-op, another state under the
// same lineage and serial a *ConflictError.
func (s *Store) Put(ctx context.Context, v Version, state []byte) (Result, error) {
	if err := v.validate(); err != nil {
		return Result{}, err
	}
	key := s.key(v)
	sealed, err := seal(ctx, s.keys, v, state)
	if err != nil {
		return Result{}, err
	}
	err = s.bucket.WriteAll(ctx, key, sealed, &blob.WriterOptions{
		IfNotExist:  true,
		ContentType: "application/octet-stream",
		Metadata: map[string]string{
			"captf-namespace": v.Namespace, "captf-kind": v.Kind, "captf-name": v.Name, "captf-uid": string(v.UID),
			"captf-lineage": v.Lineage, "captf-serial": strconv.FormatInt(v.Serial, 10), "captf-key-id": s.keys.ID(),
		},
	})
	if err == nil {
		return Result{Written: true, Key: key}, nil
	}
	if gcerrors.Code(err) != gcerrors.FailedPrecondition {
		return Result{}, fmt.Errorf("write %s: %w", key, err)
	}
	held, _, err := s.get(ctx, v, key)
	if err != nil {
		return Result{}, fmt.Errorf("read the version already at %s: %w", key, err)
	}
	if !bytes.Equal(held, state) {
		return Result{}, &ConflictError{Key: key}
	}
	return Result{Written: false, Key: key}, nil
}

// Get returns the state of one version (its UID is not needed: the sealed header carries it).
func (s *Store) Get(ctx context.Context, v Version) ([]byte, error) {
	state, _, err := s.Open(ctx, v)
	return state, err
}

// Open returns the state of one version and the UID of the object that wrote it (from the
// sealed header, authenticated with the state).
func (s *Store) Open(ctx context.Context, v Version) ([]byte, types.UID, error) {
	return s.get(ctx, v, s.key(v))
}

func (s *Store) get(ctx context.Context, v Version, key string) ([]byte, types.UID, error) {
	sealed, err := s.bucket.ReadAll(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, "", fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", key, err)
	}
	state, uid, err := open(ctx, s.keys, v, sealed)
	if err != nil {
		return nil, "", fmt.Errorf("open %s: %w", key, err)
	}
	return state, types.UID(uid), nil
}

// List returns every version the store holds for the object, by lineage and then serial.
// The versions carry no UID (read it with Get's header, or the bucket's metadata).
func (s *Store) List(ctx context.Context, r Ref) ([]Version, error) {
	prefix := s.objectPrefix(r)
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	var out []Version
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, err)
		}
		lineage, file, ok := strings.Cut(strings.TrimPrefix(obj.Key, prefix), "/")
		if !ok || obj.IsDir {
			continue
		}
		serial, err := strconv.ParseInt(strings.TrimSuffix(file, ".tfstate.sealed"), 10, 64)
		if err != nil || !strings.HasSuffix(file, ".tfstate.sealed") {
			continue
		}
		out = append(out, Version{Ref: r, Lineage: lineage, Serial: serial, Written: obj.ModTime})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Lineage != out[j].Lineage {
			return out[i].Lineage < out[j].Lineage
		}
		return out[i].Serial < out[j].Serial
	})
	return out, nil
}

// Newest returns the newest version of lineage among versions, or false.
func Newest(versions []Version, lineage string) (Version, bool) {
	var best Version
	found := false
	for _, v := range versions {
		if v.Lineage == lineage && (!found || v.Serial > best.Serial) {
			best, found = v, true
		}
	}
	return best, found
}
