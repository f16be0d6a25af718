package channel

// The saved plan: PUT stores a Plan Job's plan in the object's plan Secret; GET hands that plan
// to the one Apply or Refresh Job whose --plan-id it is, once, when the plan is of the Job's
// kind (runnerapi.PlanKindRefusal).

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-logr/logr"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// Requests the fencing record names for the plan endpoint.
const (
	requestPutPlan = "PUT /plan"
	requestGetPlan = "GET /plan"
)

// maxPlanUploadBytes bounds a PUT body: the plan file (at most a Secret's worth), base64'd in
// JSON, the summary and the text.
const maxPlanUploadBytes = 4 << 20

// maxPlanFileBytes bounds a plan file the channel accepts or reads back (before gzip).
const maxPlanFileBytes = 64 << 20

func (s *server) planPath() string { return s.path(runnerapi.PlanPathPrefix) }

// servePlan answers the plan endpoint: PUT (a Plan Job stores its plan) and GET (an Apply or a
// Refresh Job fetches the plan it was given).
func (s *server) servePlan(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	if !s.ownPath(ctx, w, r, runnerapi.PlanPathPrefix, "plan", s.planPath()) {
		return
	}
	switch r.Method {
	case http.MethodPut:
		s.putPlan(ctx, w, r)
	case http.MethodGet:
		s.getPlan(ctx, w)
	default:
		w.Header().Set("Allow", "GET, PUT")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// putPlan stores a plan: only in a Plan Job, only while the run lease names the Job (fencing).
// The channel binds the plan itself: it hashes the file it received, reads the state serial and
// lineage the plan file records, and takes the inputs hash and whether the plan is refresh-only
// from its own flags; the runner only supplies the summary and the text. The Secret then holds
// exactly this plan, not consumed.
func (s *server) putPlan(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	log := logr.FromContextOrDiscard(ctx)
	if s.cfg.Operation != runnerapi.OperationPlan {
		http.Error(w, fmt.Sprintf("forbidden: this channel serves a %q Job; only a Plan Job stores a plan", s.cfg.Operation), http.StatusForbidden)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxPlanUploadBytes+1))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxPlanUploadBytes {
		http.Error(w, fmt.Sprintf("the plan upload is larger than %d bytes; a plan Secret holds at most %d bytes", maxPlanUploadBytes, runnerapi.MaxPlanSecretBytes),
			http.StatusRequestEntityTooLarge)
		return
	}
	var up runnerapi.PlanUpload
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&up); err != nil {
		http.Error(w, "the body is not a plan upload: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := checkUpload(up); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	serial, lineage, err := planStateMeta(up.File)
	if err != nil {
		http.Error(w, "not a plan file: "+err.Error(), http.StatusUnprocessableEntity)
		return
	}
	sha := runnerapi.FileSHA256(up.File)
	rec := runnerapi.PlanRecord{
		ID: runnerapi.PlanID(sha, s.cfg.InputsHash, serial, lineage), FileSHA256: sha, InputsHash: s.cfg.InputsHash,
		StateSerial: serial, StateLineage: lineage, CreatedAt: s.now().UTC().Format(time.RFC3339), Job: s.cfg.Job,
		RefreshOnly: s.cfg.RefreshOnly, Destroy: s.cfg.DestroyPlan, Target: s.cfg.Target, PlanSummary: up.Summary.Bounded(runnerapi.MaxRecordAddresses),
	}
	// The plan file is stored gzip'd, as the backend stores a state.
	gz, err := runnerapi.EncodeState(up.File)
	if err != nil {
		s.serverError(ctx, w, "gzip plan", err)
		return
	}
	data, rec, digests, err := planData(gz, rec, up.Text, up.JSON)
	if err != nil {
		log.Info("refused a plan too large for the plan Secret", "gzipBytes", len(gz))
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}

	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	if s.fenced(ctx, w, requestPutPlan) {
		return
	}
	stored := s.update(ctx, w, s.planSecret(), "store the plan", func(sec object) change {
		sec.setAllData(data)
		id := rec.ID
		sec.setStringMap("annotations", map[string]*string{runnerapi.PlanIDAnnotation: &id, runnerapi.PlanConsumedByAnnotation: nil})
		return write
	})
	if stored == nil {
		return
	}
	log.Info("plan stored", "planID", rec.ID, "fileSHA256", rec.FileSHA256, "stateSerial", rec.StateSerial, "refreshOnly", rec.RefreshOnly, "destroy", rec.Destroy, "target", rec.Target, "gzipBytes", len(gz),
		"create", rec.Create, "update", rec.Update, "replace", rec.Replace, "delete", rec.Delete)
	// The digests of what was stored bind every artifact to this plan: the runner reports them
	// in its Result, which the manager trusts and the tenant cannot write.
	writeJSON(w, http.StatusOK, runnerapi.PlanStored{PlanRecord: rec, Digests: digests})
}

// checkUpload bounds what the runner sends besides the file.
func checkUpload(up runnerapi.PlanUpload) error {
	sum := up.Summary
	switch {
	case len(up.File) == 0:
		return errors.New("the upload holds no plan file")
	case len(up.File) > maxPlanFileBytes:
		return fmt.Errorf("the plan file is larger than %d bytes", maxPlanFileBytes)
	case sum.Create < 0 || sum.Update < 0 || sum.Replace < 0 || sum.Delete < 0:
		return errors.New("negative counts")
	case len(sum.Addresses) > runnerapi.MaxRecordAddresses:
		return fmt.Errorf("%d addresses; at most %d", len(sum.Addresses), runnerapi.MaxRecordAddresses)
	case len(up.Text) > runnerapi.MaxPlanTextBytes:
		return fmt.Errorf("the plan text has %d bytes; at most %d", len(up.Text), runnerapi.MaxPlanTextBytes)
	case len(up.JSON) > runnerapi.MaxPlanJSONBytes:
		return fmt.Errorf("the JSON plan has %d bytes; at most %d", len(up.JSON), runnerapi.MaxPlanJSONBytes)
	case len(up.JSON) > 0 && !json.Valid(up.JSON):
		return errors.New("the JSON plan is not JSON")
	}
	return nil
}

// planData lays out the plan Secret's data (base64 values, as the API takes them). The plan file
// and its record must fit runnerapi.MaxPlanSecretBytes; then the JSON plan, which is left out
// (the record and a PlanJSONTruncatedKey document say so) when it does not fit beside them; then
// the text, cut (and the record says so) to the room left. It also returns the digests of the
// artifacts exactly as laid out (runnerapi.PlanDigests).
func planData(gz []byte, rec runnerapi.PlanRecord, text string, planJSON []byte) (map[string]string, runnerapi.PlanRecord, runnerapi.PlanDigests, error) {
	var none runnerapi.PlanDigests
	recJSON, err := json.Marshal(rec)
	if err != nil {
		return nil, rec, none, fmt.Errorf("encode plan record: %w", err)
	}
	// The record grows by the textTruncated and jsonLeftOut fields when they are set: count
	// them up front.
	const flagFields = len(`,"textTruncated":true`) + len(`,"jsonLeftOut":true`)
	fixed := len(gz) + len(recJSON) + flagFields
	if fixed > runnerapi.MaxPlanSecretBytes {
		return nil, rec, none, fmt.Errorf("the saved plan does not fit the plan Secret: its file is %d bytes gzip'd and the Secret holds at most %d bytes; "+
			"split the module or apply without approval", len(gz), runnerapi.MaxPlanSecretBytes)
	}
	if len(planJSON) == 0 || fixed+len(planJSON) > runnerapi.MaxPlanSecretBytes {
		if planJSON, err = leftOutPlanJSON(len(planJSON), rec); err != nil {
			return nil, rec, none, err
		}
		rec.JSONLeftOut = true
	}
	fixed += len(planJSON)
	if room := runnerapi.MaxPlanSecretBytes - fixed; len(text) > room {
		text = runnerapi.CutPlanText(text, room)
		rec.TextTruncated = true
	}
	if recJSON, err = json.Marshal(rec); err != nil {
		return nil, rec, none, fmt.Errorf("encode plan record: %w", err)
	}
	raw := map[string][]byte{
		runnerapi.PlanFileKey:   gz,
		runnerapi.PlanRecordKey: recJSON,
		runnerapi.PlanTextKey:   []byte(text),
		runnerapi.PlanJSONKey:   planJSON,
	}
	data := make(map[string]string, len(raw))
	for k, v := range raw {
		data[k] = base64.StdEncoding.EncodeToString(v)
	}
	return data, rec, runnerapi.DigestPlanArtifacts(raw), nil
}

// leftOutPlanJSON is the JSON plan of a plan whose JSON plan was not uploaded or did not fit
// beside its file: only PlanJSONTruncatedKey, listing none of the plan's changes.
func leftOutPlanJSON(size int, rec runnerapi.PlanRecord) ([]byte, error) {
	reason := "the runner sent no JSON plan"
	if size > 0 {
		reason = fmt.Sprintf("the JSON plan (%d bytes) did not fit the plan Secret beside the plan file; the plan file and plan.txt hold the plan", size)
	}
	b, err := json.Marshal(map[string]any{runnerapi.PlanJSONTruncatedKey: runnerapi.PlanJSONTruncation{
		Reason: reason, Bytes: size, Values: true, ResourceChanges: rec.Changed(),
	}})
	if err != nil {
		return nil, fmt.Errorf("encode the left-out JSON plan: %w", err)
	}
	return b, nil
}

// planStateMeta reads the state serial and lineage a plan file records: Terraform and OpenTofu
// write a plan as a zip whose "tfstate" entry is the state the plan was made against (serial 0
// and no lineage when there was none). Terraform compares the same two with the current state
// before it applies the plan.
func planStateMeta(file []byte) (uint64, string, error) {
	zr, err := zip.NewReader(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		return 0, "", fmt.Errorf("read zip: %w", err)
	}
	var state, plan *zip.File
	for _, f := range zr.File {
		switch f.Name {
		case "tfstate":
			state = f
		case "tfplan":
			plan = f
		}
	}
	if state == nil || plan == nil {
		return 0, "", errors.New("the zip holds no tfplan and tfstate entries")
	}
	rc, err := state.Open()
	if err != nil {
		return 0, "", fmt.Errorf("open tfstate: %w", err)
	}
	defer func() { _ = rc.Close() }()
	raw, err := io.ReadAll(io.LimitReader(rc, runnerapi.MaxStateBytes+1))
	if err != nil {
		return 0, "", fmt.Errorf("read tfstate: %w", err)
	}
	if len(raw) > runnerapi.MaxStateBytes {
		return 0, "", fmt.Errorf("its state is larger than %d bytes", runnerapi.MaxStateBytes)
	}
	var meta struct {
		Serial  *uint64 `json:"serial"`
		Lineage string  `json:"lineage"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil || meta.Serial == nil {
		return 0, "", errors.New("its tfstate entry is not a state with a serial")
	}
	return *meta.Serial, meta.Lineage, nil
}

// getPlan hands the plan of the channel's --plan-id to its Job, at most once: only while the run
// lease names the Job (fencing); only when the plan Secret holds that plan (superseded
// otherwise), untouched (the file's SHA-256 and the record's ID check out), of the Job's kind
// (runnerapi.PlanKindRefusal: a Refresh Job gets only a refresh-only plan, a Destroy Job only a
// destroy plan, an Apply Job only a plan that is neither) and not
// consumed by another Job. The first hand-out marks the Secret consumed by this Job in one conditional
// write (the resourceVersion read), so two racing channels cannot both get it; the same Job may
// fetch it again.
func (s *server) getPlan(ctx context.Context, w http.ResponseWriter) {
	log := logr.FromContextOrDiscard(ctx)
	if s.cfg.PlanID == "" {
		http.Error(w, "forbidden: this Job applies no saved plan", http.StatusForbidden)
		return
	}
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	if s.fenced(ctx, w, requestGetPlan) {
		return
	}
	// A write that meets a conflict reads again: whoever wrote may have consumed or replaced the
	// plan.
	var rec runnerapi.PlanRecord
	var file []byte
	var claimed bool
	sec := s.update(ctx, w, s.planSecret(), "mark plan consumed", func(sec object) change {
		var refusal *runnerapi.PlanRefusal
		rec, file, refusal = s.checkPlan(sec)
		claimed = false
		if refusal != nil {
			code := http.StatusConflict
			if refusal.Reason == runnerapi.PlanRefusedCorrupt {
				code = http.StatusUnprocessableEntity
			}
			log.Info("refused to hand out the plan", "planID", s.cfg.PlanID, "reason", refusal.Reason, "message", refusal.Message)
			writeJSON(w, code, refusal)
			return answered
		}
		if sec.annotations()[runnerapi.PlanConsumedByAnnotation] != "" {
			return unchanged
		}
		if s.beforeClaim != nil {
			s.beforeClaim()
		}
		job := s.cfg.Job
		sec.setStringMap("annotations", map[string]*string{runnerapi.PlanConsumedByAnnotation: &job})
		claimed = true
		return write
	})
	if sec == nil {
		return
	}
	if claimed {
		log.Info("plan handed out and marked consumed", "planID", rec.ID, "fileSHA256", rec.FileSHA256)
	}
	writeJSON(w, http.StatusOK, runnerapi.PlanDownload{Record: rec, File: file})
}

// checkPlan reads the plan the Secret holds and says why it may not be handed to this Job, if
// it may not.
func (s *server) checkPlan(sec object) (runnerapi.PlanRecord, []byte, *runnerapi.PlanRefusal) {
	var rec runnerapi.PlanRecord
	refuse := func(reason, format string, args ...any) (runnerapi.PlanRecord, []byte, *runnerapi.PlanRefusal) {
		return rec, nil, &runnerapi.PlanRefusal{Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	recB64, ok := sec.dataValue(runnerapi.PlanRecordKey)
	if !ok {
		return refuse(runnerapi.PlanRefusedSuperseded, "the plan Secret holds no plan; plan %s is gone", s.cfg.PlanID)
	}
	raw, err := base64.StdEncoding.DecodeString(recB64)
	if err == nil {
		err = json.Unmarshal(raw, &rec)
	}
	if err != nil {
		return refuse(runnerapi.PlanRefusedCorrupt, "the plan Secret's %s cannot be read", runnerapi.PlanRecordKey)
	}
	if rec.ID != s.cfg.PlanID {
		return refuse(runnerapi.PlanRefusedSuperseded, "the plan Secret holds plan %s, not plan %s", rec.ID, s.cfg.PlanID)
	}
	if want := runnerapi.PlanID(rec.FileSHA256, rec.InputsHash, rec.StateSerial, rec.StateLineage); want != rec.ID {
		return refuse(runnerapi.PlanRefusedCorrupt, "the plan record's ID %s is not the hash of its file, inputs and state (%s)", rec.ID, want)
	}
	if why := runnerapi.PlanKindRefusal(rec, s.cfg.Operation); why != "" {
		return refuse(runnerapi.PlanRefusedKind, "%s", why)
	}
	if by := sec.annotations()[runnerapi.PlanConsumedByAnnotation]; by != "" && by != s.cfg.Job {
		return refuse(runnerapi.PlanRefusedConsumed, "plan %s was already handed to Job %s; a plan is applied at most once", rec.ID, by)
	}
	fileB64, ok := sec.dataValue(runnerapi.PlanFileKey)
	if !ok {
		return refuse(runnerapi.PlanRefusedCorrupt, "the plan Secret holds no %s", runnerapi.PlanFileKey)
	}
	file, err := gunzipPlan(fileB64)
	if err != nil {
		return refuse(runnerapi.PlanRefusedCorrupt, "the plan file cannot be read: %v", err)
	}
	if got := runnerapi.FileSHA256(file); got != rec.FileSHA256 {
		return refuse(runnerapi.PlanRefusedCorrupt, "the stored plan file's SHA-256 is %s, its record says %s", got, rec.FileSHA256)
	}
	return rec, file, nil
}

func gunzipPlan(b64 string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	out, err := gunzipBounded(raw, maxPlanFileBytes)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
