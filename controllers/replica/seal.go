package replica

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrWrongKey: a sealed version does not open with the store's key (another key sealed it,
// or it was altered, or it was copied to another object's key).
var ErrWrongKey = errors.New("the sealed state does not open with this key")

// KeySource wraps and unwraps the data keys of sealed versions with a key-encryption key.
type KeySource interface {
	// ID names the key-encryption key; it is recorded with each version it wraps.
	ID() string
	// Wrap seals a data key, bound to aad.
	Wrap(ctx context.Context, dataKey, aad []byte) ([]byte, error)
	// Unwrap opens a data key that the key named keyID wrapped, bound to aad. It returns
	// ErrWrongKey (wrapped) when it cannot.
	Unwrap(ctx context.Context, keyID string, wrapped, aad []byte) ([]byte, error)
}

// StaticKey is a KeySource holding one 32-byte AES-256 key (from a Secret).
type StaticKey struct {
	id   string
	aead cipher.AEAD
}

// NewStaticKey returns a KeySource for a 32-byte key named id.
func NewStaticKey(id string, key []byte) (*StaticKey, error) {
	if id == "" {
		return nil, errors.New("the key needs an id")
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("the key %s has %d bytes; AES-256 needs 32", id, len(key))
	}
	aead, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	return &StaticKey{id: id, aead: aead}, nil
}

// ID implements KeySource.
func (k *StaticKey) ID() string { return k.id }

// Wrap implements KeySource.
func (k *StaticKey) Wrap(_ context.Context, dataKey, aad []byte) ([]byte, error) {
	return sealWith(k.aead, dataKey, aad)
}

// Unwrap implements KeySource.
func (k *StaticKey) Unwrap(_ context.Context, keyID string, wrapped, aad []byte) ([]byte, error) {
	if keyID != k.id {
		return nil, fmt.Errorf("%w: it was sealed with the key %q, this store has the key %q", ErrWrongKey, keyID, k.id)
	}
	dk, err := openWith(k.aead, wrapped, aad)
	if err != nil {
		return nil, fmt.Errorf("%w: the data key does not open with the key %q", ErrWrongKey, k.id)
	}
	return dk, nil
}

// magic starts every sealed version.
const magic = "CAPTF-REPLICA-1\n"

// header is what a sealed version says of itself, before its ciphertext.
type header struct {
	Alg        string `json:"alg"`
	KeyID      string `json:"keyID"`
	WrappedKey []byte `json:"wrappedKey"`
	UID        string `json:"uid"`
}

const algorithm = "AES-256-GCM"

// aad binds a sealed version to its identity.
func (v Version) aad(uid string) []byte {
	return []byte(strings.Join([]string{"captf.io/replica/v1", v.Namespace, v.Kind, v.Name, uid, v.Lineage, strconv.FormatInt(v.Serial, 10)}, "\x00"))
}

// seal encrypts state for v under a fresh data key wrapped by keys.
func seal(ctx context.Context, keys KeySource, v Version, state []byte) ([]byte, error) {
	dataKey := make([]byte, 32)
	if _, err := rand.Read(dataKey); err != nil {
		return nil, fmt.Errorf("make a data key: %w", err)
	}
	aad := v.aad(string(v.UID))
	wrapped, err := keys.Wrap(ctx, dataKey, aad)
	if err != nil {
		return nil, fmt.Errorf("wrap the data key: %w", err)
	}
	aead, err := newGCM(dataKey)
	if err != nil {
		return nil, err
	}
	ct, err := sealWith(aead, state, aad)
	if err != nil {
		return nil, err
	}
	h, err := json.Marshal(header{Alg: algorithm, KeyID: keys.ID(), WrappedKey: wrapped, UID: string(v.UID)})
	if err != nil {
		return nil, fmt.Errorf("encode the header: %w", err)
	}
	var out bytes.Buffer
	out.WriteString(magic)
	_ = binary.Write(&out, binary.BigEndian, uint32(len(h)))
	out.Write(h)
	out.Write(ct)
	return out.Bytes(), nil
}

// open decrypts a sealed version of v; it returns the UID the version was sealed for too.
func open(ctx context.Context, keys KeySource, v Version, sealed []byte) ([]byte, string, error) {
	rest, ok := bytes.CutPrefix(sealed, []byte(magic))
	if !ok || len(rest) < 4 {
		return nil, "", fmt.Errorf("%w: not a sealed CAPTF state", ErrWrongKey)
	}
	n := binary.BigEndian.Uint32(rest)
	rest = rest[4:]
	if uint64(n) > uint64(len(rest)) {
		return nil, "", fmt.Errorf("%w: the header is cut short", ErrWrongKey)
	}
	var h header
	if err := json.Unmarshal(rest[:n], &h); err != nil {
		return nil, "", fmt.Errorf("%w: the header does not decode", ErrWrongKey)
	}
	if h.Alg != algorithm {
		return nil, "", fmt.Errorf("sealed with %q, which this version does not read", h.Alg)
	}
	aad := v.aad(h.UID)
	dataKey, err := keys.Unwrap(ctx, h.KeyID, h.WrappedKey, aad)
	if err != nil {
		return nil, "", err
	}
	aead, err := newGCM(dataKey)
	if err != nil {
		return nil, "", err
	}
	state, err := openWith(aead, rest[n:], aad)
	if err != nil {
		return nil, "", fmt.Errorf("%w: the state does not open with its data key", ErrWrongKey)
	}
	return state, h.UID, nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("aes key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("gcm: %w", err)
	}
	return aead, nil
}

// sealWith returns nonce || ciphertext.
func sealWith(aead cipher.AEAD, plaintext, aad []byte) ([]byte, error) {
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("make a nonce: %w", err)
	}
	return aead.Seal(nonce, nonce, plaintext, aad), nil
}

func openWith(aead cipher.AEAD, sealed, aad []byte) ([]byte, error) {
	if len(sealed) < aead.NonceSize() {
		return nil, errors.New("cut short")
	}
	return aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], aad)
}
