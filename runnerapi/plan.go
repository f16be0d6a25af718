package runnerapi

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The saved plan (docs/runner.md, "Saved plans"). A Plan Job's runner runs `plan -out`, reads
// the plan back with `show -json` and `show`, and uploads the plan file, its bounded summary and
// its text to the state channel (PUT PlanPathPrefix<namespace>/<suffix>), which stores them in
// the object's plan Secret (PlanSecretName) under the keys below. An Apply Job built with
// a PlanID fetches that plan from the channel (GET on the same path), which hands it out at most
// once, and runs `apply <plan file>`.

// Keys of the plan Secret.
const (
	// PlanFileKey is the plan file as terraform wrote it, gzip'd.
	PlanFileKey = "tfplan.gz"
	// PlanRecordKey is the plan's PlanRecord as JSON.
	PlanRecordKey = "summary.json"
	// PlanTextKey is the human plan text (`show -no-color <plan file>`: sensitive values masked
	// by terraform, redact.json values masked by the runner), at most MaxPlanTextBytes, cut at
	// the end behind PlanTextTruncatedMarker when it did not fit.
	PlanTextKey = "plan.txt"
	// PlanJSONKey is the machine-readable plan: terraform's `show -json <plan file>` with every
	// sensitive value replaced by SensitiveValue and redact.json values masked, keeping only
	// the keys PlanJSONKeptKeys names, at most MaxPlanJSONBytes (PlanJSONTruncatedKey says what
	// was left out when it did not fit). Plan policies judge this document (docs/plans.md).
	PlanJSONKey = "plan.json"
)

// The machine-readable plan (PlanJSONKey).
const (
	// MaxPlanJSONBytes bounds the JSON plan the runner uploads.
	MaxPlanJSONBytes = 256 << 10
	// SensitiveValue stands for every value terraform marks sensitive in the JSON plan: a
	// sensitive variable's value, and each before or after value (or part of one) its
	// before_sensitive or after_sensitive marks, outputs included.
	SensitiveValue = "(sensitive value)"
	// PlanJSONTruncatedKey is the top-level key of a JSON plan that was cut to fit. Its value is
	// a PlanJSONTruncation.
	PlanJSONTruncatedKey = "captf_truncated"
)

// PlanJSONKeptKeys are the top-level keys of terraform's JSON plan that the stored JSON plan
// keeps. The others (prior_state, planned_values, configuration, relevant_attributes, checks)
// repeat the values kept here or hold the module's expressions, and are left out.
var PlanJSONKeptKeys = []string{"format_version", "terraform_version", "applyable", "complete", "errored", "timestamp",
	"variables", "resource_changes", "resource_drift", "output_changes"}

// PlanJSONTruncation says how a JSON plan was cut to fit MaxPlanJSONBytes: first every change
// loses its before and after values and the variables go (Values), then changes are left out
// from the end (KeptChanges of ResourceChanges listed).
type PlanJSONTruncation struct {
	// Reason says in words what was left out.
	Reason string `json:"reason"`
	// Bytes is the size of the masked document before it was cut.
	Bytes int `json:"bytes"`
	// Values: the before, after and variable values were left out.
	Values bool `json:"values"`
	// ResourceChanges is how many resource changes the plan has; KeptChanges how many the
	// document lists.
	ResourceChanges int `json:"resourceChanges"`
	KeptChanges     int `json:"keptChanges"`
}

// Annotations on the plan Secret, written by the state channel.
const (
	// PlanIDAnnotation names the plan the Secret holds (its PlanRecord.ID), so a metadata-only
	// read tells which plan is stored.
	PlanIDAnnotation = "captf.io/plan-id"
	// PlanConsumedByAnnotation names the Job the channel handed the plan to (GET). Once set, the
	// channel hands the plan to no other Job: a plan is applied at most once (I9). A new plan
	// (PUT) clears it.
	PlanConsumedByAnnotation = "captf.io/plan-consumed-by"
)

// PlanPathPrefix starts the channel's plan endpoint: /plan/<namespace>/<suffix>.
const PlanPathPrefix = "/plan/"

// Bounds of the plan summary and record.
const (
	// MaxResultAddresses bounds the addresses a Result's Summary lists.
	MaxResultAddresses = 20
	// MaxRecordAddresses bounds the addresses a PlanRecord lists.
	MaxRecordAddresses = 50
	// MaxAddressBytes bounds one resource address; a longer one is cut and ends in "...".
	MaxAddressBytes = 256
	// MaxPlanTextBytes bounds the plan text the runner uploads; the channel cuts it further
	// when the plan Secret would not hold it.
	MaxPlanTextBytes = 512 << 10
	// MaxPlanSecretBytes bounds the data of the plan Secret (MaxSecretDataBytes).
	MaxPlanSecretBytes = MaxSecretDataBytes
	// PlanIDLength is the length of a plan ID: hex digits of SHA-256 (128 bits).
	PlanIDLength = 32
)

// PlanTextTruncatedMarker ends a plan text that was cut to fit.
const PlanTextTruncatedMarker = "\n[truncated: the plan file holds the whole plan]\n"

// Reasons a saved plan is refused before terraform sees it (Result.PlanRefused).
const (
	// PlanRefusedSuperseded: the plan Secret holds no plan, or another one than the Job's PlanID
	// (a newer plan replaced it).
	PlanRefusedSuperseded = "Superseded"
	// PlanRefusedConsumed: the plan was already handed to another Job (applied at most once).
	PlanRefusedConsumed = "Consumed"
	// PlanRefusedCorrupt: the stored plan file does not match its record (SHA-256), or the record's
	// ID is not the hash of its own fields, or the file cannot be read.
	PlanRefusedCorrupt = "Corrupt"
	// PlanRefusedKind: the plan is of another kind than the Job applies (PlanKindRefusal): a
	// Refresh Job applies only a refresh-only plan, a Destroy Job only a destroy plan, an Apply
	// Job only a plan that is neither.
	PlanRefusedKind = "Kind"
)

// Kinds of saved plan (PlanKindOf), each applied by the Jobs of one operation only.
const (
	PlanKindApply   = "apply"
	PlanKindRefresh = "refresh-only"
	PlanKindDestroy = "destroy"
)

// PlanKindOf is the kind of a saved plan, from its record: refresh-only, destroy, or an apply's.
func PlanKindOf(rec PlanRecord) string {
	switch {
	case rec.RefreshOnly:
		return PlanKindRefresh
	case rec.Destroy:
		return PlanKindDestroy
	}
	return PlanKindApply
}

// JobPlanKind is the only kind of saved plan a Job of operation applies ("" for an operation
// that applies none).
func JobPlanKind(operation string) string {
	switch operation {
	case OperationApply:
		return PlanKindApply
	case OperationRefresh:
		return PlanKindRefresh
	case OperationDestroy:
		return PlanKindDestroy
	}
	return ""
}

// PlanKindRefusal is the one rule both the channel and the runner apply before a saved plan is
// handed out or applied: a Job applies only a plan of its operation's kind. It returns why rec
// may not be applied by a Job of operation, or "" when it may.
func PlanKindRefusal(rec PlanRecord, operation string) string {
	have, want := PlanKindOf(rec), JobPlanKind(operation)
	if have == want {
		return ""
	}
	if want == "" {
		return fmt.Sprintf("%s applies no saved plan", aJob(operation))
	}
	return fmt.Sprintf("plan %s is %s, which only %s applies; %s applies only %s", rec.ID, aPlan(have), aJob(jobOfKind(have)), aJob(operation), aPlan(want))
}

// aPlan names a plan of kind with its article, for messages.
func aPlan(kind string) string {
	if kind == PlanKindApply {
		return "an apply plan"
	}
	return "a " + kind + " plan"
}

// aJob names a Job of operation with its article, for messages.
func aJob(operation string) string {
	if strings.HasPrefix(operation, "A") {
		return "an " + operation + " Job"
	}
	return "a " + operation + " Job"
}

// jobOfKind is the operation whose Jobs apply plans of kind.
func jobOfKind(kind string) string {
	switch kind {
	case PlanKindRefresh:
		return OperationRefresh
	case PlanKindDestroy:
		return OperationDestroy
	}
	return OperationApply
}

// Plan actions as the summary counts them.
const (
	ActionCreate  = "create"
	ActionUpdate  = "update"
	ActionReplace = "replace"
	ActionDelete  = "delete"
	// ActionForget: the resource leaves the state and its objects stay (a removed block with
	// destroy = false, a targeted forget's).
	ActionForget = "forget"
)

// PlanSummary counts the resource changes of a plan and lists the changed resources.
type PlanSummary struct {
	Create  int `json:"create"`
	Update  int `json:"update"`
	Replace int `json:"replace"`
	Delete  int `json:"delete"`
	// Import counts the resources the plan imports (an import block of a targeted operation,
	// or the module's own); an imported resource whose attributes also change is counted
	// under its action too.
	Import int `json:"import,omitempty"`
	// Forget counts the resources the plan removes from the state without destroying them.
	Forget int `json:"forget,omitempty"`
	// Addresses are the changed resources (the counted ones), sorted, without duplicates, each
	// at most MaxAddressBytes.
	Addresses []string `json:"addresses,omitempty"`
	// Truncated: more resources changed than Addresses lists.
	Truncated bool `json:"truncated,omitempty"`
}

// Changed is the number of counted resource changes.
func (s PlanSummary) Changed() int { return s.Actions() + s.Import }

// Actions is the number of resource changes counted by their action (every count but Import,
// which counts a resource the plan imports whatever its action): what the `show -json`
// actions of the plan's resource_changes add up to under ActionOf.
func (s PlanSummary) Actions() int { return s.Create + s.Update + s.Replace + s.Delete + s.Forget }

// ActionOf maps a plan's resource change actions (terraform's `show -json` "actions") to the
// action the summary counts: a delete-then-create or create-then-delete is a replace; no-op and
// read are not counted ("").
func ActionOf(actions []string) string {
	switch {
	case len(actions) == 1 && actions[0] == ActionCreate:
		return ActionCreate
	case len(actions) == 1 && actions[0] == ActionUpdate:
		return ActionUpdate
	case len(actions) == 1 && actions[0] == ActionDelete:
		return ActionDelete
	case len(actions) == 1 && actions[0] == ActionForget:
		return ActionForget
	case len(actions) == 2 && (actions[0] == ActionDelete && actions[1] == ActionCreate || actions[0] == ActionCreate && actions[1] == ActionDelete):
		return ActionReplace
	}
	return ""
}

// Add counts one resource change; address is listed when the action is counted.
func (s *PlanSummary) Add(address string, actions []string) {
	switch ActionOf(actions) {
	case ActionCreate:
		s.Create++
	case ActionUpdate:
		s.Update++
	case ActionReplace:
		s.Replace++
	case ActionDelete:
		s.Delete++
	case ActionForget:
		s.Forget++
	default:
		return
	}
	s.Addresses = append(s.Addresses, address)
}

// AddImport counts one resource the plan imports; its address is listed.
func (s *PlanSummary) AddImport(address string) {
	s.Import++
	s.Addresses = append(s.Addresses, address)
}

// Bounded returns s with its addresses sorted, without duplicates, each cut to MaxAddressBytes,
// at most n of them (Truncated when some were left out).
func (s PlanSummary) Bounded(n int) PlanSummary {
	out := s
	addrs := make([]string, 0, len(s.Addresses))
	for _, a := range s.Addresses {
		addrs = append(addrs, cutAddress(a))
	}
	sort.Strings(addrs)
	uniq := addrs[:0]
	for i, a := range addrs {
		if i == 0 || a != addrs[i-1] {
			uniq = append(uniq, a)
		}
	}
	if len(uniq) > n {
		uniq = uniq[:n]
		out.Truncated = true
	}
	if len(uniq) == 0 {
		uniq = nil
	}
	out.Addresses = uniq
	return out
}

func cutAddress(a string) string {
	if len(a) <= MaxAddressBytes {
		return a
	}
	end := MaxAddressBytes - 3
	for end > 0 && !utf8.RuneStart(a[end]) {
		end--
	}
	return a[:end] + "..."
}

// PlanRef names a saved plan: its ID and the SHA-256 of its file (hex).
type PlanRef struct {
	ID         string `json:"id"`
	FileSHA256 string `json:"fileSHA256"`
	// Digests (a Plan Job's Result.SavedPlan only): the digests of every artifact as the plan
	// Secret stores them, as the channel reported them when it stored the plan.
	Digests *PlanDigests `json:"digests,omitempty"`
}

// PlanRecord is the plan Secret's PlanRecordKey: what the plan is bound to and what it changes.
// The state channel writes it from what it stored; the runner supplies only the summary.
type PlanRecord struct {
	// ID is PlanID(FileSHA256, InputsHash, StateSerial, StateLineage).
	ID string `json:"id"`
	// FileSHA256 is the SHA-256 (hex) of the plan file as terraform wrote it (not gzip'd).
	FileSHA256 string `json:"fileSHA256"`
	// InputsHash is the plan Job's inputs hash (infrav1.InputsHashAnnotation).
	InputsHash string `json:"inputsHash"`
	// StateSerial and StateLineage are the state the plan was made against, as the plan file
	// records it (0 and "" for no state). Terraform refuses to apply the plan once the state's
	// serial or lineage differ.
	StateSerial  uint64 `json:"stateSerial"`
	StateLineage string `json:"stateLineage"`
	// CreatedAt is when the channel stored the plan (RFC 3339, UTC).
	CreatedAt string `json:"createdAt"`
	// Job is the plan Job.
	Job string `json:"job"`
	// RefreshOnly: a refresh-only plan (the plan Job ran with FlagRefreshOnly, which the
	// channel records from its own flag). Applying it writes to the state what changed outside
	// Terraform and changes no infrastructure; only a Refresh Job applies it.
	RefreshOnly bool `json:"refreshOnly,omitempty"`
	// Destroy: a destroy plan (the plan Job ran with FlagDestroyPlan, which the channel records
	// from its own flag). Applying it destroys what the state tracks; only a Destroy Job
	// applies it.
	Destroy bool `json:"destroy,omitempty"`
	// Target: the targeted operation the plan carries out (the plan Job ran with FlagTarget,
	// which the channel records from its own flag); "" for none.
	Target string `json:"target,omitempty"`
	// The counts and at most MaxRecordAddresses addresses.
	PlanSummary
	// TextTruncated: PlanTextKey was cut to fit.
	TextTruncated bool `json:"textTruncated,omitempty"`
	// JSONLeftOut: the JSON plan (PlanJSONKey) did not fit beside the plan file and was left
	// out; the plan Secret holds a document with only PlanJSONTruncatedKey.
	JSONLeftOut bool `json:"jsonLeftOut,omitempty"`
}

// Ref is the record's PlanRef.
func (r PlanRecord) Ref() PlanRef { return PlanRef{ID: r.ID, FileSHA256: r.FileSHA256} }

// PlanID is the ID of a saved plan: the first PlanIDLength hex digits of a SHA-256 over the plan
// file's SHA-256, the inputs hash, the state serial and the lineage. The same plan file of the
// same inputs against the same state always has the same ID; any change of the four changes it.
// (Terraform stamps each plan file with its creation time, so two plan runs give two files and
// two IDs.)
func PlanID(fileSHA256, inputsHash string, serial uint64, lineage string) string {
	h := sha256.New()
	for _, part := range []string{"captf-plan-id/v1", fileSHA256, inputsHash, strconv.FormatUint(serial, 10), lineage} {
		_, _ = h.Write([]byte(part))
		_, _ = h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:PlanIDLength]
}

// ValidPlanID reports whether id has the form of a PlanID.
func ValidPlanID(id string) bool {
	if len(id) != PlanIDLength {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// FileSHA256 is the hex SHA-256 of a plan file.
func FileSHA256(file []byte) string {
	sum := sha256.Sum256(file)
	return hex.EncodeToString(sum[:])
}

// PlanUpload is the body of the runner's PUT to the channel's plan endpoint.
type PlanUpload struct {
	// File is the plan file as terraform wrote it.
	File []byte `json:"file"`
	// Summary is the plan's summary, at most MaxRecordAddresses addresses.
	Summary PlanSummary `json:"summary"`
	// Text is the human plan text, at most MaxPlanTextBytes.
	Text string `json:"text"`
	// JSON is the masked JSON plan (PlanJSONKey), at most MaxPlanJSONBytes.
	JSON []byte `json:"json,omitempty"`
}

// PlanDownload is the channel's answer to a GET of the plan endpoint.
type PlanDownload struct {
	Record PlanRecord `json:"record"`
	File   []byte     `json:"file"`
}

// PlanRefusal is the channel's answer when it refuses to hand out a plan (409 or 422).
type PlanRefusal struct {
	// Reason is PlanRefusedSuperseded, PlanRefusedConsumed or PlanRefusedCorrupt.
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// CutPlanText returns text when it fits n bytes; otherwise its beginning (where terraform lists
// the changes), cut at a line end when there is one, followed by PlanTextTruncatedMarker, in at
// most n bytes.
func CutPlanText(text string, n int) string {
	if len(text) <= n {
		return text
	}
	keep := n - len(PlanTextTruncatedMarker)
	if keep <= 0 {
		return ""
	}
	head := text[:keep]
	if i := strings.LastIndexByte(head, '\n'); i > 0 {
		head = head[:i]
	}
	return strings.ToValidUTF8(head, "") + PlanTextTruncatedMarker
}

// PlanArtifactKeys are the plan Secret's keys that PlanDigests binds, in the order a mismatch
// is reported.
var PlanArtifactKeys = []string{PlanRecordKey, PlanJSONKey, PlanTextKey, PlanFileKey}

// PlanDigests are the SHA-256 (hex) of each artifact of a saved plan exactly as the plan Secret
// stores it (the bytes of each data key: PlanFileKey gzip'd, PlanTextKey as the channel cut
// it). The state channel computes them from what it wrote; the Plan Job's runner reports them
// in its Result (SavedPlan), which reaches the manager through the pod's status, a path the
// tenant cannot write; the manager keeps them in the object's pending-plan record and checks
// the Secret against them before anything judges, shows or applies the plan (docs/plans.md,
// "Why the plan you approve is the plan that applies").
type PlanDigests struct {
	File   string `json:"file"`
	Record string `json:"record"`
	JSON   string `json:"json"`
	Text   string `json:"text"`
}

// DigestPlanArtifacts digests the plan Secret's artifacts as stored (data holds the raw bytes of
// each key; a missing key digests as empty).
func DigestPlanArtifacts(data map[string][]byte) PlanDigests {
	return PlanDigests{File: FileSHA256(data[PlanFileKey]), Record: FileSHA256(data[PlanRecordKey]),
		JSON: FileSHA256(data[PlanJSONKey]), Text: FileSHA256(data[PlanTextKey])}
}

// digestOf is the digest d holds for a plan Secret key.
func (d PlanDigests) digestOf(key string) string {
	switch key {
	case PlanFileKey:
		return d.File
	case PlanRecordKey:
		return d.Record
	case PlanJSONKey:
		return d.JSON
	case PlanTextKey:
		return d.Text
	}
	return ""
}

// Complete reports whether d holds a well-formed digest of every artifact.
func (d PlanDigests) Complete() bool {
	for _, k := range PlanArtifactKeys {
		if !validSHA256(d.digestOf(k)) {
			return false
		}
	}
	return true
}

func validSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// PlanArtifactMismatch says which artifacts of the plan Secret do not match the digests the plan
// was bound to: someone other than the plan Job's state channel wrote them.
type PlanArtifactMismatch struct {
	// Keys are the mismatching plan Secret keys, in PlanArtifactKeys order.
	Keys []string
}

func (e *PlanArtifactMismatch) Error() string {
	return "the plan Secret's " + strings.Join(e.Keys, ", ") + " do not match the digests the Plan Job reported: they were rewritten after the plan was saved"
}

// Verify checks the plan Secret's artifacts (data holds the raw bytes of each key) against d:
// nil when every one matches, else a *PlanArtifactMismatch naming each that does not. Digests
// that are not Complete match nothing: every key is reported.
func (d PlanDigests) Verify(data map[string][]byte) error {
	got := DigestPlanArtifacts(data)
	var bad []string
	for _, k := range PlanArtifactKeys {
		if !validSHA256(d.digestOf(k)) || got.digestOf(k) != d.digestOf(k) {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		return &PlanArtifactMismatch{Keys: bad}
	}
	return nil
}

// PlanStored is the channel's answer to a PUT of the plan endpoint: the record it wrote
// (PlanRecordKey) and the digests of every artifact as it stored them.
type PlanStored struct {
	PlanRecord
	Digests PlanDigests `json:"digests"`
}
