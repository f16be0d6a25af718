// Package objectstore runs a real S3-compatible object store for the sandbox and the tests: the
// Versity S3 gateway (versitygw, built from source into the tool cache by
// `hack/build-bin.sh versitygw`, pinned in hack/versions.mk) over a folder, with its posix
// backend and the objects' metadata in a sidecar folder.
//
// The state replica (controllers/replica) is tested against it: conditional creates, object
// metadata, listing and signatures are the server's, not a stand-in's.
//
// Invariants: the server listens on the loopback interface only; it dies with the process that
// started it (test/sandbox/internal/proc) and Stop ends it; its folders are the caller's (a
// store that must outlive one sandbox, as "the management cluster is lost" needs, is given the
// same folder again).
package objectstore
