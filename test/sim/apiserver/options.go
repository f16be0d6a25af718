package apiserver

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Verb names a request the store serves, as the API server's audit log names it.
type Verb string

// The verbs a Request carries.
const (
	VerbGet         Verb = "get"
	VerbList        Verb = "list"
	VerbWatch       Verb = "watch"
	VerbCreate      Verb = "create"
	VerbUpdate      Verb = "update"
	VerbPatch       Verb = "patch"
	VerbDelete      Verb = "delete"
	VerbDeleteAllOf Verb = "deletecollection"
)

// Request describes one call the store is about to serve (Intercept) or has served (AfterWrite).
type Request struct {
	Verb Verb
	// Kind is the object's group, version and kind (never a List kind).
	Kind schema.GroupVersionKind
	// Namespace and Name are empty where the call has none (a cluster-scoped kind, a List).
	Namespace, Name string
	// Subresource is "status" for Status() writes, else empty.
	Subresource string
}

// Delivery is one watch event about to reach a watcher.
type Delivery struct {
	// Watch numbers the watch (1, 2, ... in the order the watches were opened).
	Watch uint64
	// Kind is the watched kind.
	Kind schema.GroupVersionKind
	// Type is Added, Modified or Deleted.
	Type watch.EventType
	// ResourceVersion is the event's resourceVersion.
	ResourceVersion uint64
	Namespace, Name string
}

// Admission is one write as the admission chain sees it (Options.Mutate, Options.Validate).
type Admission struct {
	Request
	// Object is the object the write would store; nil for a delete. For Mutate it is the
	// caller's object (create, update) or the patched stored object (patch), before the kind's
	// strategy, and Mutate may change it; for Validate it is the object after the strategy
	// (status kept or reset, generation, timestamps), which Validate must not change.
	Object client.Object
	// OldObject is the stored object the write applies to; nil for a create. Never change it.
	OldObject client.Object
}

// Options configure a Store. The zero value is valid: every field documents its default.
type Options struct {
	// Clock stamps creationTimestamp and deletionTimestamp. Default: the real clock. Inside a
	// testing/synctest bubble the real clock reads the bubble's fake time.
	Clock clock.PassiveClock

	// Seed seeds the random suffixes of metadata.generateName. Default 0 (still deterministic).
	Seed uint64

	// Intercept, when set, is called before every request, outside the store's lock, and its
	// error (returned unchanged to the caller, so apierrors.IsX sees it) fails the request
	// before it touches the store: a ServerTimeout, a Conflict, a TooManyRequests. Default: none.
	Intercept func(ctx context.Context, r Request) error

	// AfterWrite, when set, is called after every create, update, patch and delete with the
	// store's outcome; what it returns is what the caller sees. Returning an error for a write
	// that succeeded models a lost response (the write happened; the client thinks it failed).
	// Default: none (the outcome is returned unchanged).
	AfterWrite func(ctx context.Context, r Request, err error) error

	// Deliver, when set, is called for every watch event before the watcher's channel receives
	// it, in the watcher's own goroutine (events of one watch stay in resourceVersion order; the
	// watches of different kinds run independently). It may block to delay the event (on the
	// bubble's clock, on a scheduler); a non-nil error ends that watch, as a dropped connection
	// does. Default: deliver at once.
	Deliver func(ctx context.Context, d Delivery) error

	// Mutate, when set, is the mutating admission chain: called for every create, update and
	// patch (not delete), outside the store's lock, before the kind's strategy; it may change
	// a.Object, and its error (returned unchanged) refuses the write. The request's user is
	// whatever the caller put in ctx (the store does not authenticate). Default: none.
	Mutate func(ctx context.Context, a *Admission) error

	// Validate, when set, is the validating admission chain: called for every create, update,
	// patch and delete (deletecollection: per object), outside the store's lock, after the
	// kind's strategy, with the object the write would store; its error (returned unchanged)
	// refuses the write. It may read through the store's client. If the stored object changed
	// while the chain ran, the write starts again from the new state (and fails with Conflict
	// when it named a resourceVersion), as the real server's GuaranteedUpdate retries its
	// admission. Default: none.
	Validate func(ctx context.Context, a Admission) error

	// Kinds overrides or adds kind policies (scope, status subresource, generation, update
	// rules) over the defaults of DefaultKinds.
	Kinds map[schema.GroupKind]KindPolicy
}
