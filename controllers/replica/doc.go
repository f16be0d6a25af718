// Package replica keeps the state's durable copy outside the management cluster: every state
// version, sealed with client-side envelope encryption, in an object store bucket
// (gocloud.dev/blob: S3-compatible stores first; GCS and Azure Blob are the same code).
//
// It owns the bucket layout, the sealing and the ordering rules. It does not decide when a
// version is replicated or restored: the state's keeper (controllers/state) does.
//
// Layout. Each version is one object, never rewritten:
//
//	<prefix>states/<namespace>/<kind>/<name>/<lineage>/<serial, 20 digits>.tfstate.sealed
//
// with the object's namespace, kind, name, UID, lineage and serial also in the object's
// metadata, so a person finds a state with the bucket's own tools (and nothing more: the state
// itself is sealed).
//
// Invariants:
//   - Nothing in the bucket is readable without the key: each version is encrypted with
//     AES-256-GCM under a data key of its own, and that data key is stored only wrapped by the
//     key-encryption key (a KeySource: a key from a Secret today, a KMS later). The identity of
//     the version (namespace, kind, name, UID, lineage, serial) is authenticated with it, so a
//     sealed version copied to another object's key does not open.
//   - An older version never replaces a newer one: versions are written only where none is
//     (a conditional create), so the newest serial of a lineage is the newest the store holds,
//     whatever order the writes arrive in.
//   - Writing a version again is a no-op when it is the same state, and an error (a
//     *ConflictError, nothing overwritten) when another state claims the same serial.
//   - A wrong key is a clear error (ErrWrongKey), never a silent empty state.
package replica
