package channel

import (
	"context"
	"crypto/md5" // Terraform's http backend protocol uses Content-MD5 as a checksum, not for security.
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// HTTP methods of Terraform's http backend besides GET and POST.
const (
	methodLock   = "LOCK"
	methodUnlock = "UNLOCK"
)

// StatePathPrefix starts the path of the one state the channel serves:
// /state/<namespace>/<suffix>.
const StatePathPrefix = "/state/"

// maxLockInfoBytes bounds a lock info document (Terraform's are a few hundred bytes).
const maxLockInfoBytes = 16 << 10

// lockInfo is the part of Terraform's lock info the channel reads. The document itself is
// stored as sent, in the lock-info annotation, as the kubernetes backend does.
type lockInfo struct {
	ID        string `json:"ID"`
	Operation string `json:"Operation"`
	Who       string `json:"Who"`
	Created   string `json:"Created"`
}

// server answers Terraform's http backend for one object's state.
type server struct {
	cfg   Config
	store *store
	// credential is the per-run password of the basic auth.
	credential string
	// ownerNameLabel is the owner-name label value of the object's Jobs.
	ownerNameLabel string
	// records writes the files the runner reads.
	records *records
	// lockMu serialises LOCK, UNLOCK and POST: terraform sends one at a time, and a second
	// client (a module misusing the credential) must not interleave with the first.
	lockMu sync.Mutex
	// pinned is the lineage of the first state write this channel accepted in this run (see
	// writeLineage); every later write must carry it. Guarded by lockMu.
	pinned string
	// beforeBreak, when set (tests only), runs after the I8 evidence was read and before the
	// write that breaks the lock.
	beforeBreak func()
	// beforeClaim, when set (tests only), runs after a plan was checked and before the write
	// that marks it consumed.
	beforeClaim func()
	// now stamps stored plans.
	now func() time.Time
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := logr.NewContext(r.Context(), logr.FromContextOrDiscard(r.Context()).WithValues("method", r.Method))
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Basic realm="captf-state-channel"`)
		http.Error(w, "wrong or missing credential", http.StatusUnauthorized)
		return
	}
	if strings.HasPrefix(r.URL.Path, runnerapi.PlanPathPrefix) {
		s.servePlan(ctx, w, r)
		return
	}
	if !s.ownPath(ctx, w, r, StatePathPrefix, "state", s.statePath()+" and "+s.planPath()) {
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.getState(ctx, w)
	case http.MethodPost:
		s.postState(ctx, w, r)
	case methodLock:
		s.lock(ctx, w, r)
	case methodUnlock:
		s.unlock(ctx, w, r)
	default:
		w.Header().Set("Allow", "GET, POST, LOCK, UNLOCK")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (s *server) statePath() string { return s.path(StatePathPrefix) }

// path is the path under prefix of the one object the channel serves.
func (s *server) path(prefix string) string {
	return prefix + s.cfg.Namespace + "/" + s.cfg.Suffix
}

// ownPath checks that the request's path is <prefix><namespace>/<suffix> of the channel's own
// object (what names the resource): it answers 404 for another path (naming the paths served)
// and 403 for another object's, and then returns false.
func (s *server) ownPath(ctx context.Context, w http.ResponseWriter, r *http.Request, prefix, what, served string) bool {
	ns, suffix, ok := parsePath(prefix, r.URL.Path)
	if !ok {
		http.Error(w, "not found: the channel serves "+served, http.StatusNotFound)
		return false
	}
	if ns != s.cfg.Namespace || suffix != s.cfg.Suffix {
		logr.FromContextOrDiscard(ctx).Info("refused a request for another object's "+what, "path", r.URL.Path)
		http.Error(w, "forbidden: this channel serves only "+s.path(prefix), http.StatusForbidden)
		return false
	}
	return true
}

// parsePath splits <prefix><namespace>/<suffix>.
func parsePath(prefix, p string) (string, string, bool) {
	rest, ok := strings.CutPrefix(p, prefix)
	if !ok {
		return "", "", false
	}
	ns, suffix, ok := strings.Cut(rest, "/")
	if !ok || ns == "" || suffix == "" || strings.Contains(suffix, "/") {
		return "", "", false
	}
	return ns, suffix, true
}

// authorized checks the basic auth credential in constant time (of the hashes).
func (s *server) authorized(r *http.Request) bool {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return false
	}
	got := sha256.Sum256([]byte(user + "\x00" + pass))
	want := sha256.Sum256([]byte(runnerapi.ChannelUsername + "\x00" + s.credential))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

func (s *server) getState(ctx context.Context, w http.ResponseWriter) {
	state, err := s.store.readState(ctx)
	if err != nil {
		s.serverError(ctx, w, "read state", err)
		return
	}
	if s.unexpectedState(ctx, w, state) {
		return
	}
	if state == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	sum := md5.Sum(state)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(state)
}

// unexpectedState refuses (409, and a StateRefused record) a state that is not the one the
// controller read before it created the Job (--state-lineage): the state Secret holds no state
// or another lineage. The run then stops at init, before it reads or writes anything else.
func (s *server) unexpectedState(ctx context.Context, w http.ResponseWriter, state []byte) bool {
	want := s.cfg.StateLineage
	if want == "" {
		return false
	}
	found := ""
	if state != nil {
		lineage, err := stateLineage(state)
		if err != nil {
			s.refuseState(ctx, w, StateRefusal{StateRefused: runnerapi.StateRefused{Expected: want}},
				"conflict: the state Secret does not hold a state document: "+err.Error())
			return true
		}
		found = lineage
	}
	if found == want {
		return false
	}
	what := "holds no state"
	if found != "" {
		what = "holds lineage " + found
	}
	s.refuseState(ctx, w, StateRefusal{StateRefused: runnerapi.StateRefused{Expected: want, Found: found}},
		fmt.Sprintf("conflict: the controller started this Job for state lineage %s, but the state Secret now %s; nothing is served, so the run changes nothing",
			want, what))
	return true
}

// refuseState is the one way the channel refuses a state that is not this run's, on a read
// (GET) or a write (POST): it records the refusal in state-refused.json, which the runner
// reports as the outcome Failed with its message, and answers 409 with msg. The state Secret
// is left as it is.
func (s *server) refuseState(ctx context.Context, w http.ResponseWriter, rec StateRefusal, msg string) {
	s.records.stateRefused(rec)
	logr.FromContextOrDiscard(ctx).Info("refused a state that is not this run's", "request", rec.Request,
		"expected", rec.Expected, "found", rec.Found, "sent", rec.Sent)
	http.Error(w, msg, http.StatusConflict)
}

// stateLineage reads the lineage of a state document; an error when it is not a JSON object.
// "" when the object carries no lineage.
func stateLineage(state []byte) (string, error) {
	var meta struct {
		Lineage string `json:"lineage"`
	}
	if err := json.Unmarshal(state, &meta); err != nil {
		return "", fmt.Errorf("parse state: %w", err)
	}
	return meta.Lineage, nil
}

// writeLineage is the lineage a state write must carry, and where it comes from, in this order:
//   - --state-lineage: the state the controller read, which the run's terraform writes back;
//   - the lineage pinned by this channel's first accepted write in this run (s.pinned);
//   - at the first write of a run given no lineage (the controller read no state: a first apply),
//     the lineage of the state the Secret holds now, when it holds one: a state that appeared
//     since the controller read none is the one terraform read and writes back;
//   - else "": the first write pins its own lineage. So does a Restore Job's first write,
//     whatever the Secret holds: a restore replaces the state (the runner never pushes over a
//     non-empty state of another lineage), and its channel takes no --state-lineage.
//
// The caller holds lockMu.
func (s *server) writeLineage(ctx context.Context) (string, string, error) {
	if s.cfg.StateLineage != "" {
		return s.cfg.StateLineage, "the lineage the controller read", nil
	}
	if s.pinned != "" {
		return s.pinned, "the lineage this run wrote first", nil
	}
	if s.cfg.Operation == runnerapi.OperationRestore {
		return "", "", nil
	}
	state, err := s.store.readState(ctx)
	if err != nil {
		return "", "", err
	}
	if state == nil {
		return "", "", nil
	}
	if lineage, err := stateLineage(state); err == nil && lineage != "" {
		return lineage, "the lineage of the state the Secret held at the run's first write", nil
	}
	return "", "", nil
}

// foreignWrite refuses (409, and a StateRefused record of the POST) a state write that is not
// a state document with a lineage, or whose lineage is not the one writeLineage pins. It
// returns the lineage an accepted write pins, and whether it refused. An error reading the
// state Secret answers as serverError does. The caller holds lockMu.
func (s *server) foreignWrite(ctx context.Context, w http.ResponseWriter, body []byte) (string, bool) {
	want, why, err := s.writeLineage(ctx)
	if err != nil {
		s.serverError(ctx, w, "read state", err)
		return "", true
	}
	sent, err := stateLineage(body)
	if err != nil {
		err = fmt.Errorf("the body is not a state document (%w)", err)
	} else if sent == "" {
		err = errors.New("the state document has no lineage")
	}
	rec := StateRefusal{StateRefused: runnerapi.StateRefused{Expected: want}, Request: http.MethodPost, Sent: sent}
	if err != nil {
		s.refuseState(ctx, w, rec, fmt.Sprintf("conflict: state write refused: %v; nothing was written, the state Secret is unchanged", err))
		return "", true
	}
	if want == "" {
		return sent, false
	}
	if sent != want {
		s.refuseState(ctx, w, rec, fmt.Sprintf("conflict: state write refused: this run's state is lineage %s (%s), the write sent lineage %s; nothing was written, the state Secret is unchanged",
			want, why, sent))
		return "", true
	}
	return want, false
}

// postState writes the state. It needs the lock (?ID=), held by this pod's channel as the lock
// Lease says live, and the object's run lease naming this Job (fencing), both read just
// before the write, and a state document of this run's lineage (foreignWrite).
func (s *server) postState(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	log := logr.FromContextOrDiscard(ctx)
	id := r.URL.Query().Get("ID")
	body, err := io.ReadAll(io.LimitReader(r.Body, runnerapi.MaxStateBytes+1))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > runnerapi.MaxStateBytes {
		http.Error(w, "state too large", http.StatusRequestEntityTooLarge)
		return
	}
	if want := r.Header.Get("Content-MD5"); want != "" {
		sum := md5.Sum(body)
		if base64.StdEncoding.EncodeToString(sum[:]) != want {
			http.Error(w, "Content-MD5 does not match the body", http.StatusBadRequest)
			return
		}
	}
	if id == "" {
		http.Error(w, "conflict: a state write needs the lock (?ID=<lock id>)", http.StatusConflict)
		return
	}
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	if s.fenced(ctx, w, "POST") {
		return
	}
	lock, err := s.store.getLock(ctx)
	if err != nil {
		s.serverError(ctx, w, "read lock", err)
		return
	}
	if lock.holder() != id || lock.annotations()[runnerapi.LockPodAnnotation] != s.cfg.Pod {
		log.Info("refused a state write without the lock", "lockID", id, "holder", lock.holder())
		writeLockInfo(w, http.StatusConflict, lock)
		return
	}
	lineage, refused := s.foreignWrite(ctx, w, body)
	if refused {
		return
	}
	if err := s.store.writeState(ctx, body); err != nil {
		if errors.Is(err, errTooLarge) {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		s.serverError(ctx, w, "write state", err)
		return
	}
	s.pinned = lineage
	log.Info("state written", "lockID", id, "bytes", len(body), "sha256", shortHash(body), "lineage", lineage)
	w.WriteHeader(http.StatusOK)
}

// lockRetries bounds the read-modify-write retries of LOCK and UNLOCK after a conflict.
const lockRetries = 3

// lock takes the lock for the lock info in the body: when the lock is free (and this Job holds
// the run lease), when it is already this ID's, or when it is stale by I8 (break and take in
// one conditional write). Otherwise it answers 423 with the holder's lock info.
func (s *server) lock(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	s.updateLock(ctx, w, r, "take lock", func(lock object, raw []byte, info lockInfo) change {
		switch held := lock.holder(); {
		case held != "" && held != info.ID:
			s.heldByOther(ctx, w, lock, raw, info)
			return answered
		case s.fenced(ctx, w, methodLock):
			return answered
		case held == info.ID:
			w.WriteHeader(http.StatusOK)
			return answered
		}
		s.take(lock, raw, info)
		return write
	}, func(info lockInfo) {
		s.records.clearHolder()
		logr.FromContextOrDiscard(ctx).Info("lock taken", "lockID", info.ID, "who", info.Who, "operation", info.Operation)
	})
}

// heldByOther answers a LOCK that found another holder: break the lock when I8 allows it,
// else refuse (403 when this Job is fenced, 423 with the holder's lock info otherwise).
func (s *server) heldByOther(ctx context.Context, w http.ResponseWriter, lock object, raw []byte, info lockInfo) {
	log := logr.FromContextOrDiscard(ctx)
	old := holderOf(lock)
	v, err := s.judgeStale(ctx, lock)
	if err != nil {
		s.serverError(ctx, w, "read the lock holder's evidence", err)
		return
	}
	if v.breakable {
		if s.beforeBreak != nil {
			s.beforeBreak()
		}
		// (d) the lock is still the one read: the write carries the resourceVersion read.
		s.take(lock, raw, info)
		err := s.store.putLock(ctx, lock)
		if err == nil {
			s.records.lockBroken(runnerapi.LockBroken{LockID: old.ID, Who: old.Who, Pod: v.pod, Job: v.job})
			s.records.clearHolder()
			log.Info("broke a stale lock and took it", "brokenLockID", old.ID, "brokenWho", old.Who, "pod", v.pod, "job", v.job, "lockID", info.ID)
			w.WriteHeader(http.StatusOK)
			return
		}
		if !isConflict(err) {
			s.serverError(ctx, w, "break lock", err)
			return
		}
		log.Info("did not break the lock: it changed since it was read", "lockID", old.ID)
		if lock, err = s.store.getLock(ctx); err != nil {
			s.serverError(ctx, w, "read lock", err)
			return
		}
		old = holderOf(lock)
	} else {
		log.Info("lock held; not breaking it", "holder", old.ID, "who", old.Who, "reason", v.why)
	}
	if s.fenced(ctx, w, methodLock) {
		return
	}
	s.records.lockHolder(old)
	writeLockInfo(w, http.StatusLocked, lock)
}

// take sets the lock to info, recording this pod and Job, and the backend's labels.
func (s *server) take(lock object, raw []byte, info lockInfo) {
	lock.setHolder(info.ID)
	rawInfo, pod, job := string(raw), s.cfg.Pod, s.cfg.Job
	lock.setStringMap("annotations", map[string]*string{
		runnerapi.StateLockInfoAnnotation: &rawInfo,
		runnerapi.LockPodAnnotation:       &pod,
		runnerapi.LockJobAnnotation:       &job,
	})
	lock.setStringMap("labels", s.store.backendLabels())
}

// unlock releases the lock named by the body's ID. It is not fenced: a run whose lease moved
// on still releases the lock it holds.
func (s *server) unlock(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	log := logr.FromContextOrDiscard(ctx)
	s.updateLock(ctx, w, r, "release lock", func(lock object, _ []byte, info lockInfo) change {
		if lock.holder() != info.ID {
			log.Info("refused to unlock a lock this ID does not hold", "lockID", info.ID, "holder", lock.holder())
			writeLockInfo(w, http.StatusConflict, lock)
			return answered
		}
		lock.setHolder("")
		lock.setStringMap("annotations", map[string]*string{
			runnerapi.StateLockInfoAnnotation: nil,
			runnerapi.LockPodAnnotation:       nil,
			runnerapi.LockJobAnnotation:       nil,
		})
		return write
	}, func(info lockInfo) { log.Info("lock released", "lockID", info.ID) })
}

// updateLock answers a LOCK or UNLOCK: under lockMu, the update of the lock Lease that judge
// makes for the body's lock info (raw as sent); once it is written (writeStep names the write
// for serverError), done runs and the answer is 200.
func (s *server) updateLock(ctx context.Context, w http.ResponseWriter, r *http.Request, writeStep string,
	judge func(lock object, raw []byte, info lockInfo) change, done func(info lockInfo)) {
	raw, info, ok := readLockInfo(w, r)
	if !ok {
		return
	}
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	if s.update(ctx, w, s.lockLease(), writeStep, func(lock object) change { return judge(lock, raw, info) }) == nil {
		return
	}
	done(info)
	w.WriteHeader(http.StatusOK)
}

// A change is what an update's judge does with the object it read.
type change int

const (
	// answered: the judge answered the request (a refusal, or nothing to do); nothing is written.
	answered change = iota
	// unchanged: nothing to write; the request goes on with the object as read.
	unchanged
	// write: the judge changed the object; the request goes on once it is written.
	write
)

// kept is an object the channel reads and writes (the lock Lease, the plan Secret): how, how often
// a write is tried again after a conflict, and the step serverError names when a read fails.
type kept struct {
	read     func(context.Context) (object, error)
	write    func(context.Context, object) error
	retries  int
	readStep string
}

func (s *server) lockLease() kept {
	return kept{read: s.store.getLock, write: s.store.putLock, retries: lockRetries, readStep: "read lock"}
}

func (s *server) planSecret() kept {
	return kept{read: s.store.getPlanSecret, write: s.store.putPlanSecret, retries: conflictRetries, readStep: "read the plan"}
}

// update is the read-modify-write of a kept object; the caller holds lockMu. It reads the object
// live and hands it to judge; when judge changed it, it writes it, and after a conflict reads
// and judges again (at most o.retries times). It returns the object as written, or as read when
// judge left it unchanged, once the request may go on; nil once the request was answered: by
// judge, or by serverError when the read or the write (writeStep) failed.
func (s *server) update(ctx context.Context, w http.ResponseWriter, o kept, writeStep string, judge func(object) change) object {
	for attempt := 0; ; attempt++ {
		obj, err := o.read(ctx)
		if err != nil {
			s.serverError(ctx, w, o.readStep, err)
			return nil
		}
		switch judge(obj) {
		case answered:
			return nil
		case unchanged:
			return obj
		}
		err = o.write(ctx, obj)
		if isConflict(err) && attempt < o.retries {
			continue
		}
		if err != nil {
			s.serverError(ctx, w, writeStep, err)
			return nil
		}
		return obj
	}
}

// fenced checks the run lease live; when it names another Job it records the refusal,
// answers 403 and returns true. An error reading the lease answers 503 and returns true.
func (s *server) fenced(ctx context.Context, w http.ResponseWriter, request string) bool {
	holder, err := s.store.runLeaseHolder(ctx)
	if err != nil {
		s.serverError(ctx, w, "read run lease", err)
		return true
	}
	if holder == s.cfg.Job {
		return false
	}
	s.records.fenced(runnerapi.Fenced{Request: request, RunLeaseHolder: holder})
	logr.FromContextOrDiscard(ctx).Info("fenced: the run lease names another Job; refusing", "request", request, "runLeaseHolder", holder, "job", s.cfg.Job)
	http.Error(w, fmt.Sprintf("fenced: the run lease %s names %q, not Job %s; this run may no longer lock or write the state",
		s.cfg.RunLease, holder, s.cfg.Job), http.StatusForbidden)
	return true
}

// serverError answers 412 for a missing state Secret or lock Lease (the controller creates
// both; retrying does not help), 422 for a chunked state, and 503 otherwise (Terraform's
// client retries those).
func (s *server) serverError(ctx context.Context, w http.ResponseWriter, what string, err error) {
	logr.FromContextOrDiscard(ctx).Error(err, "state channel request failed", "step", what)
	switch {
	case errors.Is(err, errNoObject):
		http.Error(w, what+": "+err.Error()+" (the controller creates it before the first Job)", http.StatusPreconditionFailed)
	case errors.Is(err, errChunked):
		http.Error(w, what+": "+err.Error(), http.StatusUnprocessableEntity)
	default:
		http.Error(w, what+": "+err.Error(), http.StatusServiceUnavailable)
	}
}

// readLockInfo reads and checks a LOCK or UNLOCK body.
func readLockInfo(w http.ResponseWriter, r *http.Request) ([]byte, lockInfo, bool) {
	var info lockInfo
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxLockInfoBytes+1))
	if err != nil || len(raw) > maxLockInfoBytes {
		http.Error(w, "lock info missing or too large", http.StatusBadRequest)
		return nil, info, false
	}
	if err := json.Unmarshal(raw, &info); err != nil || info.ID == "" {
		http.Error(w, "the body is not a lock info document with an ID", http.StatusBadRequest)
		return nil, info, false
	}
	return raw, info, true
}

// holderOf reads the lock info of the Lease's holder (only the ID when the annotation is
// missing or unreadable, as with a Lease whose holder was set by hand).
func holderOf(lock object) runnerapi.LockHolder {
	h := runnerapi.LockHolder{ID: lock.holder()}
	var info lockInfo
	if err := json.Unmarshal([]byte(lock.annotations()[runnerapi.StateLockInfoAnnotation]), &info); err == nil && info.ID == h.ID {
		h.Who, h.Operation, h.Created = info.Who, info.Operation, info.Created
	}
	return h
}

// writeLockInfo answers with the current holder's lock info, which Terraform prints.
func writeLockInfo(w http.ResponseWriter, code int, lock object) {
	body := lock.annotations()[runnerapi.StateLockInfoAnnotation]
	var info lockInfo
	if json.Unmarshal([]byte(body), &info) != nil || info.ID != lock.holder() {
		b, _ := json.Marshal(map[string]string{"ID": lock.holder()})
		body = string(b)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}

func shortHash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}
