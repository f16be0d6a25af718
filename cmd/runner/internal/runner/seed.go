package runner

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// Why a restore onto no state bypasses `terraform state push`: Terraform's remote state manager,
// when the backend holds no state yet, gives the state it persists a fresh lineage (it cannot
// tell a first write from an import). A backup pushed onto an absent state would come back
// under a lineage of its own, and the next restore of an older backup of the same
// infrastructure would be refused as foreign. The runner therefore writes such a backup to the
// state channel itself, as it is, under the state lock; the channel applies the same fencing
// and lock checks it applies to terraform's writes.

// errSeedNeedsChannel: the kubernetes backend (a local run) has no way to write the state as
// it is.
var errSeedNeedsChannel = badInput("restoring onto an absent state needs the state channel (a Job's run): terraform would give the backup a new lineage")

// seedRequestTimeout bounds one request of the seed to the channel.
const seedRequestTimeout = 30 * time.Second

// seedLockInfo is the lock info document the seed holds the state lock with, in the fields
// Terraform's own lock info has, so `terraform force-unlock` and the channel read it alike.
type seedLockInfo struct {
	ID        string `json:"ID"`
	Operation string `json:"Operation"`
	Info      string `json:"Info"`
	Who       string `json:"Who"`
	Version   string `json:"Version"`
	Created   string `json:"Created"`
	Path      string `json:"Path"`
}

// seedState writes state (a restore's backup) to an absent state through the channel: LOCK,
// read the state again under the lock (it must still be absent), POST, UNLOCK. The lock is
// released on every path after it was taken.
func (s *session) seedState(ctx context.Context, c ChannelBackend, state []byte) (err error) {
	log := logr.FromContextOrDiscard(ctx).WithValues("step", StepStatePush)
	id, err := lockID()
	if err != nil {
		return err
	}
	info, err := json.Marshal(seedLockInfo{ID: id, Operation: "OperationTypeRestore", Info: "captf restore onto an absent state",
		Who: "captf-runner", Version: "captf", Created: time.Now().UTC().Format(time.RFC3339Nano), Path: c.URL})
	if err != nil {
		return fmt.Errorf("encode lock info: %w", err)
	}
	code, body, err := seedRequest(ctx, c, methodLock, c.URL, info)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return s.seedRefused("LOCK", code, body)
	}
	defer func() {
		code, body, uerr := seedRequest(context.WithoutCancel(ctx), c, methodUnlock, c.URL, info)
		switch {
		case uerr != nil:
			err = errors.Join(err, fmt.Errorf("release the state lock %s: %w", id, uerr))
		case code != http.StatusOK:
			err = errors.Join(err, fmt.Errorf("release the state lock %s: the state channel answered %d: %s", id, code, strings.TrimSpace(string(body))))
		}
	}()
	code, body, err = seedRequest(ctx, c, http.MethodGet, c.URL, nil)
	if err != nil {
		return err
	}
	switch code {
	case http.StatusOK:
		if len(bytes.TrimSpace(body)) > 0 {
			return errors.New("the state appeared while the restore took the lock: run the restore again, which then restores onto that state")
		}
	case http.StatusNoContent, http.StatusNotFound:
	default:
		return s.seedRefused("GET", code, body)
	}
	code, body, err = seedRequest(ctx, c, http.MethodPost, c.URL+"?ID="+id, state)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return s.seedRefused("POST", code, body)
	}
	log.Info("restored the backup onto the absent state through the state channel, lineage kept", "lockID", id, "bytes", len(state))
	return nil
}

// seedRefused turns a refusal of the channel into the run's error: fenced when the channel
// recorded that it fenced this request, else the channel's answer.
func (s *session) seedRefused(request string, code int, body []byte) error {
	if code == http.StatusForbidden {
		return s.forbidden(request, body)
	}
	return fmt.Errorf("restore onto the absent state: the state channel answered %s with %d: %s", request, code, strings.TrimSpace(s.redactor.Redact(string(body))))
}

// seedRequest sends one request to the channel's state address.
func seedRequest(ctx context.Context, c ChannelBackend, method, url string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, seedRequestTimeout)
	defer cancel()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return 0, nil, fmt.Errorf("build %s request: %w", method, err)
	}
	req.SetBasicAuth(runnerapi.ChannelUsername, c.Password)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s the state through the state channel: %w", method, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxSeedAnswerBytes))
	if err != nil {
		return 0, nil, fmt.Errorf("read the state channel's answer to %s: %w", method, err)
	}
	return resp.StatusCode, b, nil
}

// maxSeedAnswerBytes bounds what the seed reads of an answer (a state, or a lock info).
const maxSeedAnswerBytes = 64 << 20

// methodLock and methodUnlock are the http backend's lock methods.
const (
	methodLock   = "LOCK"
	methodUnlock = "UNLOCK"
)

// lockID is a random lock ID in the UUID form Terraform's lock IDs have.
func lockID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate a lock ID: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}
