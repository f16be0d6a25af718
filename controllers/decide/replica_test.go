package decide

import (
	"strings"
	"testing"
	"time"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// TestNeedsReplicaLookup: only an object with no state of its own looks in the replica store; an
// object with a state, one that wrote or started one, and a deleting one never read it.
func TestNeedsReplicaLookup(t *testing.T) {
	fresh := Evidence{State: StateEvidence{Read: StateAbsent}}
	cases := []struct {
		name string
		edit func(*Evidence)
		want bool
	}{
		{"a new object whose live read found no state", func(*Evidence) {}, true},
		{"the state was not read", func(ev *Evidence) { ev.State.Read = StateNotRead }, false},
		{"a state is present", func(ev *Evidence) { ev.State.Read = StatePresent }, false},
		{"the state cannot be read", func(ev *Evidence) { ev.State.Read = StateUnreadable }, false},
		{"it applied before (its state is lost: StateLost, not a recovery)", func(ev *Evidence) { ev.State.AppliedBefore = true }, false},
		{"it recorded a lineage", func(ev *Evidence) { ev.State.OwnLineage = "L" }, false},
		{"its first run started", func(ev *Evidence) { ev.State.FirstRun = true }, false},
		{"it is being deleted", func(ev *Evidence) { ev.Object.Deleting = true }, false},
		{"it destroyed", func(ev *Evidence) { ev.Object.Destroyed = true }, false},
	}
	for _, tc := range cases {
		ev := fresh
		tc.edit(&ev)
		if got := NeedsReplicaLookup(ev); got != tc.want {
			t.Errorf("%s: NeedsReplicaLookup = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestTheReplicaHoldNamesWhatTheStoreHoldsAndTheOptIn: the hold's message gives a person what
// the opt-in needs (the lineage), and says why an adopted version is not brought back.
func TestTheReplicaHoldNamesWhatTheStoreHoldsAndTheOptIn(t *testing.T) {
	ev := Evidence{State: StateEvidence{Read: StateAbsent, AdoptLineage: "R",
		Replica: &ReplicaLookup{Versions: []ReplicaVersionView{{Lineage: "R", Serial: 7, UID: "u-old", Unopened: "sealed with the key \"k0\""}, {Lineage: "Q", Serial: 2, Empty: true}}}}}
	w := replicaHold(ev)
	if w == nil || w.Reason != infrav1.ReplicaStateFoundReason || w.ConditionType != infrav1.StateReadableCondition {
		t.Fatalf("replicaHold = %+v, want a StateReadable hold with ReplicaStateFound", w)
	}
	for _, want := range []string{"lineage R at serial 7", "u-old", "cannot read: sealed with the key \"k0\"", infrav1.AdoptStateAnnotation + "=<lineage>",
		"The adopt opt-in names lineage R"} {
		if !strings.Contains(w.Message, want) {
			t.Errorf("the message %q does not say %q", w.Message, want)
		}
	}
	if strings.Contains(w.Message, "lineage Q") {
		t.Errorf("the message names an empty lineage, which holds nothing: %q", w.Message)
	}
}

// TestNeedsReplicaVersion: a restore looks in the store only for a serial no backup has, of a
// lineage the object may bring back, and not for one whose restore failed.
func TestNeedsReplicaVersion(t *testing.T) {
	base := Evidence{State: StateEvidence{OwnLineage: "L", RestoreSerial: "9", Backups: []BackupView{{Serial: 5, Lineage: "L"}}}}
	cases := []struct {
		name string
		edit func(*Evidence)
		want bool
	}{
		{"a serial no backup has", func(*Evidence) {}, true},
		{"a serial a backup has", func(ev *Evidence) { ev.State.RestoreSerial = "5" }, false},
		{"no restore asked for", func(ev *Evidence) { ev.State.RestoreSerial = "" }, false},
		{"its restore failed", func(ev *Evidence) { ev.State.RestoreFailed = "9" }, false},
		{"not a serial", func(ev *Evidence) { ev.State.RestoreSerial = "latest" }, false},
		{"no lineage to bring back", func(ev *Evidence) { ev.State.OwnLineage = "" }, false},
		{"the adopt opt-in's lineage", func(ev *Evidence) { ev.State.OwnLineage, ev.State.AdoptLineage = "", "R" }, true},
	}
	for _, tc := range cases {
		ev := base
		tc.edit(&ev)
		if got := NeedsReplicaVersion(ev); got != tc.want {
			t.Errorf("%s: NeedsReplicaVersion = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestARestoreTheStoreCouldNotAnswerIsAskedAgain: a restore of a serial no backup has, while the
// store cannot be read, is not refused for good: the object waits a minute and looks again.
func TestARestoreTheStoreCouldNotAnswerIsAskedAgain(t *testing.T) {
	ev := Evidence{Object: ObjectEvidence{HasFinalizer: true, BlockMove: true}, Inputs: InputsEvidence{Gathered: true, DesiredHash: "h1", AppliedHash: "h1"},
		State: StateEvidence{AppliedBefore: true, OwnLineage: "L", Read: StatePresent, Lineage: "L", RestoreSerial: "9",
			Replica: &ReplicaLookup{Problem: "connection refused"}}}
	d := Decide(ev)
	if d.Action != ActionWait || d.Wait == nil || d.Wait.Reason != infrav1.RestoreRefusedReason || d.Wait.RequeueAfter != time.Minute ||
		!strings.Contains(d.Wait.Message, "connection refused") || !strings.Contains(d.Wait.Message, "looks again") {
		t.Fatalf("Decide = %+v (wait %+v), want a RestoreRefused wait of a minute that says the store could not be read", d, d.Wait)
	}
}
