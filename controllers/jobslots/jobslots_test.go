package jobslots

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// now is the tests' fixed clock reading.
var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func slotJob(name string, op infrav1.Operation, finished bool) client.Object {
	j := objects.Job("ns", name).Label(infrav1.ManagedLabel, "true").Label(infrav1.OperationLabel, string(op))
	if finished {
		j.Complete(metav1.NewTime(now))
	}
	return j.Obj()
}

func TestJobSlotsBoundAllJobsAndBackgroundJobs(t *testing.T) {
	ctx := context.Background()
	cache := fake.NewClientBuilder().WithObjects(
		slotJob("apply-1", infrav1.OperationApply, false),
		slotJob("drift-1", infrav1.OperationDrift, false),
		slotJob("drift-done", infrav1.OperationDrift, true),
	).Build()
	s := &Slots{Max: 4, MaxBackground: 2, Cache: cache}
	key := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: n} }
	reserve := func(n string, op infrav1.Operation) bool {
		t.Helper()
		ok, err := s.Reserve(ctx, key(n), op, now)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !reserve("drift-2", infrav1.OperationDrift) {
		t.Fatal("the second background slot was refused")
	}
	if reserve("drift-3", infrav1.OperationDrift) {
		t.Fatal("a third background Job got a slot; the background bound is 2")
	}
	if !reserve("apply-2", infrav1.OperationApply) {
		t.Fatal("an apply was starved by background work")
	}
	if reserve("apply-3", infrav1.OperationApply) {
		t.Fatal("a fifth Job got a slot; the bound is 4")
	}
	if !reserve("apply-2", infrav1.OperationApply) {
		t.Fatal("a reservation is not kept for its own Job")
	}
	s.Release(key("apply-2"))
	if !reserve("apply-3", infrav1.OperationApply) {
		t.Fatal("a released slot was not given out again")
	}
	if ok, _ := s.Reserve(ctx, key("apply-4"), infrav1.OperationApply, now.Add(3*time.Minute)); !ok {
		t.Fatal("reservations whose Jobs never appeared are not forgotten")
	}
}

func TestJobSlotsNeverHandOutMoreThanTheBoundConcurrently(t *testing.T) {
	s := &Slots{Max: 5, Cache: fake.NewClientBuilder().Build()}
	granted := make(chan bool, 200)
	for i := 0; i < 200; i++ {
		go func(i int) {
			ok, _ := s.Reserve(context.Background(), types.NamespacedName{Namespace: "ns", Name: fmt.Sprint(i)}, infrav1.OperationApply, now)
			granted <- ok
		}(i)
	}
	n := 0
	for i := 0; i < 200; i++ {
		if <-granted {
			n++
		}
	}
	if n != 5 {
		t.Fatalf("%d of 200 concurrent reservations granted, want exactly 5", n)
	}
}

// hookedReader runs a hook inside List, after the list was read and before it is returned.
type hookedReader struct {
	client.Reader
	hook func()
}

func (r *hookedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	err := r.Reader.List(ctx, list, opts...)
	if h := r.hook; h != nil {
		r.hook = nil
		h()
	}
	return err
}

// A list read before a Job reached the cache and judged after a newer list (another worker's)
// dropped that Job's reservation must not count the Job nowhere: the slot would go out twice.
// This replays that order where it can happen (the list read outside the lock): caller A reads
// a list without Job X; X reaches the cache; caller B reads a list with X and reserves; then A
// judges its old list. Under the bound of 2, X and one of A and B may hold a slot, not both.
func TestJobSlotsNeverCountAJobNowhereWhenListsAreJudgedOutOfOrder(t *testing.T) {
	ctx := context.Background()
	cache := fake.NewClientBuilder().Build()
	reader := &hookedReader{Reader: cache}
	s := &Slots{Max: 2, Cache: reader}
	key := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: n} }
	if ok, err := s.Reserve(ctx, key("x"), infrav1.OperationApply, now); err != nil || !ok {
		t.Fatalf("the first reservation: %v, %v", ok, err)
	}
	var grantedB bool
	reader.hook = func() {
		// A has read its list (no Job x). x is created and reaches the cache.
		if err := cache.Create(ctx, slotJob("x", infrav1.OperationApply, false)); err != nil {
			t.Fatal(err)
		}
		if !s.mu.TryLock() {
			return // A reads under the lock: B cannot come between A's read and A's judgement
		}
		s.mu.Unlock()
		ok, err := s.Reserve(ctx, key("b"), infrav1.OperationApply, now)
		if err != nil {
			t.Fatal(err)
		}
		grantedB = ok
	}
	grantedA, err := s.Reserve(ctx, key("a"), infrav1.OperationApply, now)
	if err != nil {
		t.Fatal(err)
	}
	if !grantedB {
		if grantedB, err = s.Reserve(ctx, key("b"), infrav1.OperationApply, now); err != nil {
			t.Fatal(err)
		}
	}
	if grantedA && grantedB {
		t.Fatalf("Job x runs and both a and b got a slot: 3 Jobs under --max-active-jobs 2")
	}
	if !grantedA && !grantedB {
		t.Fatalf("neither a nor b got the free slot")
	}
}
