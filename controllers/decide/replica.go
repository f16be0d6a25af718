package decide

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// Recovery from the replica store (docs/state.md, "Recovery into a new management cluster").
// The store outlives the management cluster; the objects re-created there from Git have new
// UIDs, no state Secret and no record of having written one, so their first apply would create
// everything a second time. Such an object (NeedsReplicaLookup) looks in the store for a state
// of its namespace, kind and name first. A state there that still tracks resources holds it
// (ReplicaStateFound) until an override group member names its lineage in captf.io/adopt-state,
// the same opt-in as a retained state's; the controller then brings the newest version of that
// lineage back as a backup of the object (ActionImportReplica) and asks for its restore, which
// runs as every restore does. The store is never judged by what a tenant can write: the object
// names nothing in it but its own namespace, kind and name.

// ReplicaVersionView is the newest version of one lineage the replica store holds for the
// object's namespace, kind and name.
type ReplicaVersionView struct {
	Lineage string
	Serial  int64
	// UID is the object that wrote it (another incarnation, usually in another management
	// cluster); Written is when the store received it.
	UID     string
	Written time.Time
	// Empty: the version tracks no managed resource (a destroy's last state): there is nothing
	// to recover and nothing to create twice.
	Empty bool
	// Unopened says why the version could not be read (sealed with another key, or not a
	// state); "" when it was. An unopened version may track resources: it holds, and is never
	// brought back.
	Unopened string
}

// ReplicaLookup is what a look into the replica store found (NeedsReplicaLookup): the newest
// version of each lineage, or why the store could not be listed.
type ReplicaLookup struct {
	Versions []ReplicaVersionView
	// Listed is every version the listing found, unopened (for status.stateReplica).
	Listed  []ReplicaVersionView
	Problem string
	// Requested is the version of the serial a restore asks for (captf.io/restore-state) in the
	// lineage RestoreLineage names, when no backup has that serial (NeedsReplicaVersion); nil
	// when the store does not hold it.
	Requested *ReplicaVersionView
}

// NeedsReplicaLookup reports whether a pass with a replica store configured looks there: a
// live object whose live read found no state and that never wrote, applied, adopted or started
// one, so its first apply would create everything anew. An object with a state, or one that
// wrote one, never reads the store on a pass.
func NeedsReplicaLookup(ev Evidence) bool {
	return !ev.Object.Deleting && !ev.Object.Destroyed && ev.State.Read == StateAbsent && !ev.State.AppliedBefore &&
		ev.State.OwnLineage == "" && !ev.State.FirstRun
}

// ReplicaFound returns the versions of the lookup that may track resources: every lineage whose
// newest version is not empty (or could not be read). None when no lookup applies.
func ReplicaFound(ev Evidence) []ReplicaVersionView {
	if ev.State.Replica == nil || !NeedsReplicaLookup(ev) {
		return nil
	}
	var out []ReplicaVersionView
	for _, v := range ev.State.Replica.Versions {
		if !v.Empty || v.Unopened != "" {
			out = append(out, v)
		}
	}
	return out
}

// ReplicaImport returns the version to bring back from the store: the newest version of the
// lineage the adopt opt-in names, when the store holds it and it reads. Nil otherwise.
func ReplicaImport(ev Evidence) *ReplicaVersionView {
	if ev.State.AdoptLineage == "" {
		return nil
	}
	for _, v := range ReplicaFound(ev) {
		if v.Lineage == ev.State.AdoptLineage && v.Unopened == "" {
			return &v
		}
	}
	return nil
}

// replicaHold is the wait of an object the store holds a state for that it has not adopted (or
// whose adopted version cannot be read): nothing runs, so nothing is created twice.
func replicaHold(ev Evidence) *Wait {
	found := ReplicaFound(ev)
	if len(found) == 0 {
		return nil
	}
	parts := make([]string, 0, len(found))
	for _, v := range found {
		p := fmt.Sprintf("lineage %s at serial %d (written %s by object UID %s)", v.Lineage, v.Serial, v.Written.UTC().Format(time.RFC3339), v.UID)
		if v.Unopened != "" {
			p += " that this manager cannot read: " + v.Unopened
		}
		parts = append(parts, p)
	}
	msg := fmt.Sprintf("the object has no state Secret and never wrote a state, but the replica store holds a state of its namespace, kind "+
		"and name that may track resources: %s; nothing runs, so nothing is created a second time. To recover it (a management cluster "+
		"rebuilt from Git), an override group member sets kubectl annotate <object> %s=<lineage>: the controller brings that lineage's "+
		"newest version back as a backup and restores it. If that infrastructure is not this object's, delete this object and give it "+
		"another name (see docs/state.md)", strings.Join(parts, "; "), infrav1.AdoptStateAnnotation)
	if a := ev.State.AdoptLineage; a != "" {
		msg += fmt.Sprintf(". The adopt opt-in names lineage %s, which the store does not hold in a version this manager can read", a)
	}
	return &Wait{ConditionType: infrav1.StateReadableCondition, Reason: infrav1.ReplicaStateFoundReason, RequeueAfter: 10 * time.Minute, Message: msg}
}

// NeedsReplicaVersion reports whether a pass with a replica store configured looks there for
// the version a restore asks for: the restore-state annotation names a serial no backup of the
// object has, and the object has a lineage to ask for (RestoreLineage). The version may then
// be brought back as a backup (ReplicaRestore), and the restore runs on it as on any backup.
func NeedsReplicaVersion(ev Evidence) bool {
	if ev.State.RestoreSerial == "" || ev.State.RestoreSerial == ev.State.RestoreFailed || RestoreLineage(ev) == "" {
		return false
	}
	if n, err := strconv.ParseInt(ev.State.RestoreSerial, 10, 64); err != nil || n < 0 {
		return false
	}
	for _, b := range ev.State.Backups {
		if fmt.Sprint(b.Serial) == ev.State.RestoreSerial {
			return false
		}
	}
	return true
}

// RestoreLineage is the lineage a restore from the store may bring back: the object's own
// (recorded, or its newest backup's), else the lineage its adopt opt-in names. A restore never
// brings another lineage back (decideRestore).
func RestoreLineage(ev Evidence) string {
	if ev.State.OwnLineage != "" {
		return ev.State.OwnLineage
	}
	return ev.State.AdoptLineage
}

// ReplicaRestore returns the store's version a restore asks for, to bring back as a backup:
// the requested serial of RestoreLineage, read and checked. Nil otherwise.
func ReplicaRestore(ev Evidence) *ReplicaVersionView {
	if !NeedsReplicaVersion(ev) || ev.State.Replica == nil {
		return nil
	}
	r := ev.State.Replica.Requested
	if r == nil || r.Unopened != "" || r.Lineage != RestoreLineage(ev) || fmt.Sprint(r.Serial) != ev.State.RestoreSerial {
		return nil
	}
	return r
}

// ReplicaAheadMessage is the StateReadable message of a start held because the replica store
// holds serial ahead of the state Secret's serial in lineage: the Secret is older than what the
// object's Jobs wrote, and the way out is a restore of the store's version.
func ReplicaAheadMessage(lineage string, ahead, serial int64) string {
	return fmt.Sprintf("the replica store holds serial %d of this state's lineage %s, newer than the state Secret's serial %d: the Secret is "+
		"older than what this object's Jobs wrote (a management cluster restored from an older etcd backup, say), and a run on it would "+
		"start from a past the infrastructure has left; nothing that writes the state runs. Restore the store's version: kubectl annotate "+
		"<object> %s=%d brings it back as a backup and restores it (see docs/state.md)", ahead, lineage, serial, infrav1.RestoreStateAnnotation, ahead)
}

// ReplicaHolds reports whether a listing of the replica store holds the version of lineage and
// serial.
func ReplicaHolds(listed []ReplicaVersionView, lineage string, serial int64) bool {
	for _, v := range listed {
		if v.Lineage == lineage && v.Serial == serial {
			return true
		}
	}
	return false
}
