package channel

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/go-logr/logr"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// records writes the channel's files in the shared folder. A failure to write one is logged:
// the HTTP answer Terraform gets is what keeps the state safe; the files only explain it.
type records struct {
	dir string
	log logr.Logger
	mu  sync.Mutex
	// broken: a lock-broken record was written (the first break of a run is the one reported).
	broken bool
}

func (r *records) fenced(f runnerapi.Fenced) {
	r.write(runnerapi.ChannelFencedFile, f)
}

func (r *records) stateRefused(f StateRefusal) {
	r.write(runnerapi.ChannelStateRefusedFile, f)
}

// StateRefusal is what state-refused.json holds: runnerapi.StateRefused, and which request
// the channel refused. One file, one rule: the state a run reads and the state it writes are
// both this run's lineage.
//   - a read (Request "" or GET): Expected is --state-lineage, Found the lineage the Secret
//     holds now ("" for none); nothing was served;
//   - a write (Request POST): Expected is the lineage the write had to carry ("" when none was
//     pinned yet), Sent the lineage it carried ("" when the body was not a state document with
//     a lineage), Found is unused; nothing was written.
type StateRefusal struct {
	runnerapi.StateRefused
	// Request is the refused request: "" (a read, as before writes were checked) or POST.
	Request string `json:"request,omitempty"`
	// Sent is the lineage a refused write carried.
	Sent string `json:"sent,omitempty"`
}

// Write reports a refused state write (POST), as opposed to a refused read.
func (r StateRefusal) Write() bool { return r.Request == http.MethodPost }

func (r *records) lockBroken(b runnerapi.LockBroken) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.broken {
		return
	}
	r.broken = true
	r.writeLocked(runnerapi.ChannelLockBrokenFile, b.Bounded())
}

func (r *records) lockHolder(h runnerapi.LockHolder) {
	r.write(runnerapi.ChannelLockHolderFile, h.Bounded())
}

func (r *records) clearHolder() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := os.Remove(filepath.Join(r.dir, runnerapi.ChannelLockHolderFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.log.Error(err, "remove channel record", "file", runnerapi.ChannelLockHolderFile)
	}
}

func (r *records) write(name string, v any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writeLocked(name, v)
}

func (r *records) writeLocked(name string, v any) {
	b, err := json.Marshal(v)
	if err == nil {
		err = writeAtomic(filepath.Join(r.dir, name), b, 0o644)
	}
	if err != nil {
		r.log.Error(err, "write channel record", "file", name)
	}
}

// writeAtomic writes through a temporary file and a rename, so a reader sees the whole file
// or none.
func writeAtomic(path string, b []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("chmod %s: %w", tmp.Name(), err)
	}
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename to %s: %w", path, err)
	}
	return nil
}

// Records are what a channel recorded in its folder during a run, as the runner reads them.
type Records struct {
	Fenced       *runnerapi.Fenced
	StateRefused *StateRefusal
	LockBroken   *runnerapi.LockBroken
	LockHolder   *runnerapi.LockHolder
}

// ReadRecords reads the channel's records in dir. A missing file is no record; an unreadable
// one is an error.
func ReadRecords(dir string) (Records, error) {
	var r Records
	var errs []error
	read := func(name string, into any) bool {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			return false
		}
		if err == nil {
			err = json.Unmarshal(b, into)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("read channel record %s: %w", name, err))
			return false
		}
		return true
	}
	var f runnerapi.Fenced
	if read(runnerapi.ChannelFencedFile, &f) {
		r.Fenced = &f
	}
	var sr StateRefusal
	if read(runnerapi.ChannelStateRefusedFile, &sr) {
		r.StateRefused = &sr
	}
	var b runnerapi.LockBroken
	if read(runnerapi.ChannelLockBrokenFile, &b) {
		b = b.Bounded()
		r.LockBroken = &b
	}
	var h runnerapi.LockHolder
	if read(runnerapi.ChannelLockHolderFile, &h) {
		h = h.Bounded()
		r.LockHolder = &h
	}
	return r, errors.Join(errs...)
}
