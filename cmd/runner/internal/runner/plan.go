package runner

// Plans: the summary of a plan read back with `show -json`, its text, and the state channel's
// plan endpoint (saving a Plan Job's plan, fetching the plan an Apply was given).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/captf/cluster-api-provider-terraform/cmd/runner/internal/channel"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// PlanFileName is the saved plan in the work folder.
const PlanFileName = "plan.tfplan"

// planJSON is the part of `show -json <plan>` the summary reads.
type planJSON struct {
	ResourceChanges []resourceChange `json:"resource_changes"`
	ResourceDrift   []resourceChange `json:"resource_drift"`
	// OutputChanges are the root module's output changes, by output name.
	OutputChanges map[string]struct {
		Actions []string `json:"actions"`
	} `json:"output_changes"`
}

type resourceChange struct {
	Address string `json:"address"`
	Change  struct {
		Actions []string `json:"actions"`
		// Importing is set on a resource the plan imports (an import block).
		Importing json.RawMessage `json:"importing"`
	} `json:"change"`
}

// Summarize counts a plan's resource changes from its `show -json` document: the changes an
// apply would make, or, for a refresh-only plan, the resources that changed outside terraform
// (resource_drift, which is where such a plan lists them) and the root outputs whose value the
// refresh changes (output_changes, listed as output.<name>): an output that follows a data
// source read from outside is a change of its own, and applying the plan writes it to the
// state (terraform's -detailed-exitcode says 2 for it). The addresses are not bounded yet
// (runnerapi.PlanSummary.Bounded).
func Summarize(showJSON []byte, refreshOnly bool) (runnerapi.PlanSummary, error) {
	var doc planJSON
	if err := json.Unmarshal(showJSON, &doc); err != nil {
		return runnerapi.PlanSummary{}, fmt.Errorf("read the plan's JSON: %w", err)
	}
	changes := doc.ResourceChanges
	if refreshOnly {
		changes = doc.ResourceDrift
	}
	var sum runnerapi.PlanSummary
	for _, c := range changes {
		sum.Add(c.Address, c.Change.Actions)
		if len(c.Change.Importing) > 0 && string(c.Change.Importing) != "null" {
			sum.AddImport(c.Address)
		}
	}
	if refreshOnly {
		for _, name := range slices.Sorted(maps.Keys(doc.OutputChanges)) {
			// Add counts create, update and delete, and skips no-op.
			sum.Add("output."+name, doc.OutputChanges[name].Actions)
		}
	}
	return sum, nil
}

// staleMessages are how Terraform and OpenTofu refuse a saved plan whose state moved on (another
// serial, or another lineage).
var staleMessages = regexp.MustCompile(`Saved plan is stale|Saved plan does not match the given state`)

// planRefusedError: the saved plan was refused before terraform ran (runnerapi.PlanRefused*).
type planRefusedError struct {
	reason, message string
}

func (e planRefusedError) Error() string {
	return fmt.Sprintf("the saved plan was refused (%s): %s; nothing was applied", e.reason, e.message)
}

// fencedError: the channel refused a plan request because the run lease names another Job.
type fencedError struct{ request, holder string }

func (e fencedError) Error() string {
	holder := e.holder
	if holder == "" {
		holder = "no Job"
	}
	return fmt.Sprintf("fenced: the object's run lease names %s, not this Job, so the state channel refused %s", holder, e.request)
}

// planRequestTimeout bounds one request to the channel's plan endpoint.
const planRequestTimeout = 60 * time.Second

// planAttempts bounds the tries of a plan request that met a transient error (the channel
// answered 503 or could not be reached).
const planAttempts = 3

// planRequest sends one request to the channel's plan endpoint, retrying transient failures,
// and returns the status and the body.
func planRequest(ctx context.Context, c ChannelBackend, method string, body []byte) (int, []byte, error) {
	client := &http.Client{Timeout: planRequestTimeout}
	var lastErr error
	for attempt := 1; attempt <= planAttempts; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, c.PlanURL, bytes.NewReader(body))
		if err != nil {
			return 0, nil, fmt.Errorf("build plan request: %w", err)
		}
		req.SetBasicAuth(runnerapi.ChannelUsername, c.Password)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err == nil {
			b, rerr := io.ReadAll(io.LimitReader(resp.Body, channelPlanAnswerBytes))
			_ = resp.Body.Close()
			if rerr == nil && resp.StatusCode != http.StatusServiceUnavailable {
				return resp.StatusCode, b, nil
			}
			if rerr != nil {
				err = rerr
			} else {
				err = fmt.Errorf("the state channel answered %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
			}
		}
		lastErr = err
		if attempt < planAttempts {
			select {
			case <-ctx.Done():
				return 0, nil, fmt.Errorf("%s the plan: %w", method, ctx.Err())
			case <-time.After(time.Duration(attempt) * 500 * time.Millisecond):
			}
		}
	}
	return 0, nil, fmt.Errorf("%s the plan through the state channel: %w", method, lastErr)
}

// channelPlanAnswerBytes bounds what the runner reads of the channel's answer: a plan file of a
// full Secret, base64'd in JSON, and its record, with room to spare.
const channelPlanAnswerBytes = 8 << 20

// savePlan uploads the plan to the channel, which stores it in the plan Secret, and returns the
// record the channel wrote and the digests of every artifact as it stored them (the runner
// reports those in its Result: the manager checks the plan Secret against them).
func (s *session) savePlan(ctx context.Context, c ChannelBackend, up runnerapi.PlanUpload) (runnerapi.PlanStored, error) {
	var stored runnerapi.PlanStored
	body, err := json.Marshal(up)
	if err != nil {
		return stored, fmt.Errorf("encode plan upload: %w", err)
	}
	code, answer, err := s.askPlan(ctx, c, http.MethodPut, body)
	if err != nil {
		return stored, err
	}
	switch code {
	case http.StatusOK:
	case http.StatusRequestEntityTooLarge:
		return stored, badInput("%s", strings.TrimSpace(string(answer)))
	default:
		return stored, fmt.Errorf("the state channel did not store the plan: %d %s", code, strings.TrimSpace(string(answer)))
	}
	if err := json.Unmarshal(answer, &stored); err != nil {
		return stored, fmt.Errorf("read the stored plan's record: %w", err)
	}
	if want := runnerapi.FileSHA256(up.File); stored.FileSHA256 != want {
		return stored, fmt.Errorf("the state channel stored a plan file of SHA-256 %s, not the one sent (%s)", stored.FileSHA256, want)
	}
	if !stored.Digests.Complete() {
		return stored, errors.New("the state channel did not report the digests of the stored plan's artifacts; the manager would hold the plan as corrupt")
	}
	return stored, nil
}

// fetchPlan gets the saved plan planID from the channel (which marks it consumed by this Job)
// and checks it: the record is that plan, the file is the one the record names, the ID is the
// hash of what the record says, and the plan is of the Job's kind (runnerapi.PlanKindRefusal).
func (s *session) fetchPlan(ctx context.Context, c ChannelBackend, planID string) (runnerapi.PlanDownload, error) {
	var dl runnerapi.PlanDownload
	code, answer, err := s.askPlan(ctx, c, http.MethodGet, nil)
	if err != nil {
		return dl, err
	}
	switch code {
	case http.StatusOK:
	case http.StatusConflict, http.StatusUnprocessableEntity:
		var refusal runnerapi.PlanRefusal
		if err := json.Unmarshal(answer, &refusal); err != nil || refusal.Reason == "" {
			return dl, fmt.Errorf("the state channel refused the plan: %d %s", code, strings.TrimSpace(string(answer)))
		}
		return dl, planRefusedError{reason: refusal.Reason, message: refusal.Message}
	default:
		return dl, fmt.Errorf("the state channel did not hand out the plan: %d %s", code, strings.TrimSpace(string(answer)))
	}
	if err := json.Unmarshal(answer, &dl); err != nil {
		return dl, fmt.Errorf("read the plan from the state channel: %w", err)
	}
	rec := dl.Record
	if rec.ID != planID {
		return dl, planRefusedError{reason: runnerapi.PlanRefusedSuperseded, message: fmt.Sprintf("the state channel handed out plan %s, not plan %s", rec.ID, planID)}
	}
	if got := runnerapi.FileSHA256(dl.File); got != rec.FileSHA256 {
		return dl, planRefusedError{reason: runnerapi.PlanRefusedCorrupt, message: fmt.Sprintf("the plan file's SHA-256 is %s, its record says %s", got, rec.FileSHA256)}
	}
	if want := runnerapi.PlanID(rec.FileSHA256, rec.InputsHash, rec.StateSerial, rec.StateLineage); want != rec.ID {
		return dl, planRefusedError{reason: runnerapi.PlanRefusedCorrupt, message: fmt.Sprintf("plan %s is not the hash of its file, inputs and state (%s)", rec.ID, want)}
	}
	if why := runnerapi.PlanKindRefusal(rec, s.cfg.Operation); why != "" {
		return dl, planRefusedError{reason: runnerapi.PlanRefusedKind, message: why}
	}
	return dl, nil
}

// askPlan sends method (with body) to the channel's plan endpoint (planRequest) and returns the
// answer's code and body; a 403 is an error (forbidden).
func (s *session) askPlan(ctx context.Context, c ChannelBackend, method string, body []byte) (int, []byte, error) {
	code, answer, err := planRequest(ctx, c, method, body)
	if err == nil && code == http.StatusForbidden {
		return code, answer, s.forbidden(method+" /plan", answer)
	}
	return code, answer, err
}

// forbidden turns a 403 of the plan endpoint into a fencing (when the channel recorded one) or
// an error naming the channel's reason.
func (s *session) forbidden(request string, answer []byte) error {
	if rec, err := channel.ReadRecords(s.cfg.ChannelDir); err == nil && rec.Fenced != nil && rec.Fenced.Request == request {
		return fencedError{request: request, holder: rec.Fenced.RunLeaseHolder}
	}
	return fmt.Errorf("the state channel refused %s: %s", request, strings.TrimSpace(string(answer)))
}

// planText redacts the captured `show` text as the runner's own output is (line by line, PEM
// bodies dropped) and bounds it to runnerapi.MaxPlanTextBytes.
func (s *session) planText(captured []byte) string {
	var buf bytes.Buffer
	f := newLineFilter(s.redactor, &buf)
	_, _ = f.Write(captured)
	f.Flush()
	return runnerapi.CutPlanText(buf.String(), runnerapi.MaxPlanTextBytes)
}

// redactSummary masks redact.json values in the addresses (a for_each key may carry one).
func (s *session) redactSummary(sum runnerapi.PlanSummary) runnerapi.PlanSummary {
	out := sum
	out.Addresses = make([]string, len(sum.Addresses))
	for i, a := range sum.Addresses {
		out.Addresses[i] = s.redactor.Redact(a)
	}
	return out
}

var errNoChannelForPlan = errors.New("a saved plan needs the state channel (--channel-dir)")

// internalStep runs StepFetchPlan (an apply of a saved plan: fetch it, check it, write it where
// the apply reads it) or StepSavePlan (a plan: upload file, summary and text to the channel).
func (s *session) internalStep(ctx context.Context, st Step, p prepared, res *runnerapi.Result) error {
	log := logr.FromContextOrDiscard(ctx).WithValues("step", st.Name)
	if p.channel == nil {
		return errNoChannelForPlan
	}
	switch st.Name {
	case StepFetchPlan:
		dl, err := s.fetchPlan(ctx, *p.channel, s.cfg.PlanID)
		if err != nil {
			return err
		}
		if err := writePrivate(p.planFile, dl.File); err != nil {
			return err
		}
		ref := dl.Record.Ref()
		s.plan.fetched = &ref
		log.Info("fetched the saved plan", "planID", ref.ID, "fileSHA256", ref.FileSHA256, "stateSerial", dl.Record.StateSerial,
			"create", dl.Record.Create, "update", dl.Record.Update, "replace", dl.Record.Replace, "delete", dl.Record.Delete)
		return nil
	case StepSavePlan:
		file, err := os.ReadFile(p.planFile)
		if err != nil {
			return fmt.Errorf("read the saved plan: %w", err)
		}
		var sum runnerapi.PlanSummary
		if s.plan.summary != nil {
			sum = s.plan.summary.Bounded(runnerapi.MaxRecordAddresses)
		}
		stored, err := s.savePlan(ctx, *p.channel, runnerapi.PlanUpload{File: file, Summary: sum, Text: s.plan.text, JSON: s.plan.json})
		if err != nil {
			return err
		}
		rec, digests := stored.PlanRecord, stored.Digests
		ref := rec.Ref()
		ref.Digests = &digests
		res.SavedPlan = &ref
		log.Info("saved the plan", "planID", rec.ID, "fileSHA256", rec.FileSHA256, "stateSerial", rec.StateSerial, "textTruncated", rec.TextTruncated)
		return nil
	}
	return fmt.Errorf("unknown internal step %q", st.Name)
}
