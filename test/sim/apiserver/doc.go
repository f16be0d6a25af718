// Package apiserver is the simulator's in-memory API server: an object store served through
// controller-runtime's client.WithWatch (Store.Client), with the semantics CAPTF's safety
// invariants rest on, each matching kube-apiserver (v1.36) and proven against it by
// TestConformance, which runs a table of operation sequences on envtest's real server and on
// the store and requires the same observations.
//
// # What it owns
//
// Objects of every kind of the scheme it is given (typed; *unstructured.Unstructured for all
// verbs; *metav1.PartialObjectMetadata for reads, patches and deletes), the global
// resourceVersion counter, uids, generateName, generation, the status subresource, deletion with
// finalizers, patches, label and field selection, and watch streams. Hooks for the layers on
// top (Options): Intercept (faults before a request), AfterWrite (lost responses), Deliver
// (delay, reorder across watches, drop a watch; test/sim/informer's lag), Mutate and Validate
// (the admission chain; test/sim/admission runs CAPTF's webhooks there) and Clock.
//
// # Invariants it keeps
//
//   - One counter orders every write of every kind; each write that changes an object takes the
//     next value as the object's resourceVersion; a write that changes nothing (the stored JSON
//     is identical) is a no-op: no new resourceVersion, no event, as etcd3's GuaranteedUpdate.
//   - Update and patch with a resourceVersion other than the stored one fail with Conflict; an
//     update without one is unconditional for most built-ins and Invalid for custom resources
//     and Leases (KindPolicy.UnconditionalUpdate). An update naming another uid is a Conflict.
//   - Create sets uid, creationTimestamp (Options.Clock), generation 1 for kinds with
//     generation, drops status for kinds with a status subresource, and refuses an existing
//     name (AlreadyExists), a resourceVersion (500, as etcd3 does), an invalid name or a missing
//     namespace (NotFound, the NamespaceLifecycle plugin).
//   - Writes to the main resource keep the stored status (status subresource); generation moves
//     on a spec change (built-ins) or any non-metadata change (custom resources), never on
//     metadata or status; Status() writes change status only (custom resources) or all but spec
//     (built-ins), never generation.
//   - Writes are judged as the real server's GuaranteedUpdate judges them: read the stored
//     object, build the candidate (the caller's object, or the patch applied to the stored
//     one), run Options.Mutate, the kind's strategy and Options.Validate outside the lock, and
//     commit only if the stored object is still the one read; otherwise start again from the
//     new state (a stale resourceVersion precondition then fails with Conflict). A refusal
//     changes nothing. Deletes and creates run the same way (Validate only for deletes).
//   - Delete honours uid and resourceVersion preconditions (Conflict); with finalizers the object
//     gets deletionTimestamp (Options.Clock), deletionGracePeriodSeconds 0 and generation+1,
//     once, and stays until a write empties its finalizers, which deletes it; a terminating
//     object refuses new finalizers (Invalid, apimachinery's ValidateObjectMetaAccessorUpdate);
//     deleting it again is a no-op success.
//   - Lists are in etcd key order (namespace, then name) and carry the counter as their
//     resourceVersion; every object a caller receives is its own copy, normalised through JSON
//     as a real client receives it (times in whole seconds).
//   - A watch sends, in resourceVersion order, every change after its resourceVersion (or the
//     current objects as Added first, for "" and "0"); an object that stops matching its
//     selector arrives as Deleted (previous state, new resourceVersion), one that starts
//     matching as Added, as the watch cache does; a Deleted event carries the last stored state.
//   - Nothing depends on map order or the wall clock: uids are a counter, generateName suffixes
//     come from a PCG seeded by Options.Seed, time from Options.Clock; one seed and one sequence
//     of calls give one run.
//
// # Known differences from kube-apiserver (not modelled)
//
//   - No defaulting, no validation beyond object metadata: CRD OpenAPI defaults and schema
//     validation (CEL rules included), built-in defaulting (a Job's generated selector, a Pod's
//     Pending phase) and built-in spec validation are absent; admission is what Options.Mutate and
//     Options.Validate run (test/sim/admission: CAPTF's webhooks).
//   - No managedFields; server-side apply (Apply, ApplyPatchType) fails with BadRequest naming it.
//   - Garbage collection and propagation policy: Delete ignores PropagationPolicy (as Background:
//     no orphan or foregroundDeletion finalizer is added; the real server adds "orphan" to a Job
//     deleted without a policy) and ownerReferences have no effect here (test/sim/kcm's garbage
//     collector acts on them from outside, through the client). Graceful deletion of Pods
//     (grace periods) is not modelled: a Pod deletes like any object. Namespaces cannot be
//     deleted (MethodNotSupported); their contents are not cleaned.
//   - Lists ignore limit/continue (the API allows a server to return everything) and list
//     resourceVersion semantics (always the current state); field selectors support
//     metadata.name and metadata.namespace only (others are BadRequest, though some kinds
//     support more, such as a Pod's spec.nodeName).
//   - Watch history is never compacted (no 410 Gone), there are no bookmarks, and
//     sendInitialEvents is ignored. Dry run fails with BadRequest. Subresources other than
//     status are not served.
//   - Each kind is stored in one version (the scheme's); no conversion between versions.
//   - Error messages are close to, not always identical with, the real server's; reasons and
//     codes (what apierrors.IsX reads) are the same.
package apiserver
