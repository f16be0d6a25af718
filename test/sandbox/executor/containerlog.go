package executor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A container's log is kept as a kubelet's runtime keeps it: one file per run of the container
// (<pod>/logs/<container>/<run>.log, run 0 first, as /var/log/pods/.../<container>/<restart>.log),
// one entry a line in the CRI log format: "<RFC3339Nano time> <stream> <P|F> <content>", P for
// a piece of a line longer than maxLogEntry, F for the piece that ends a line. The container's
// stdout and stderr share one pipe (so their order is kept), so every entry is tagged stdout.
const (
	// maxLogEntry is the longest piece of a line one entry holds (containerd's 16 KiB).
	maxLogEntry = 16 * 1024
	// logTimeFormat is the kubelet's timestamp format: RFC3339Nano with a fixed width.
	logTimeFormat = "2006-01-02T15:04:05.000000000Z07:00"
	tagPartial    = 'P'
	tagFull       = 'F'
)

// containerLog holds the runs of one container of a Pod.
type containerLog struct {
	dir  string
	mu   sync.Mutex
	runs []*logRun
}

// newRun starts the log of the container's next run.
func (cl *containerLog) newRun() (*logRun, error) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if err := os.MkdirAll(cl.dir, 0o700); err != nil {
		return nil, fmt.Errorf("create log folder: %w", err)
	}
	path := filepath.Join(cl.dir, strconv.Itoa(len(cl.runs))+".log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create container log: %w", err)
	}
	r := &logRun{path: path, f: f, changed: make(chan struct{})}
	cl.runs = append(cl.runs, r)
	return r, nil
}

// run is the current run (previous false) or the one before it (previous true); nil when there
// is none.
func (cl *containerLog) run(previous bool) *logRun {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	i := len(cl.runs) - 1
	if previous {
		i--
	}
	if i < 0 {
		return nil
	}
	return cl.runs[i]
}

// logRun is the log of one run of a container: written by the copy of its output, read by any
// number of followers, who learn of each write through changed.
type logRun struct {
	path string

	mu    sync.Mutex
	f     *os.File
	ended bool
	// changed is closed and replaced at each write and at the end.
	changed chan struct{}
}

// write appends one entry: a piece of a line (full: the piece that ends it) read at ts.
func (r *logRun) write(ts time.Time, content []byte, full bool) error {
	tag := byte(tagPartial)
	if full {
		tag = tagFull
	}
	entry := make([]byte, 0, len(logTimeFormat)+len(content)+12)
	entry = ts.UTC().AppendFormat(entry, logTimeFormat)
	entry = append(entry, " stdout "...)
	entry = append(entry, tag, ' ')
	entry = append(entry, content...)
	entry = append(entry, '\n')
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return errors.New("write container log: the run ended")
	}
	_, err := r.f.Write(entry)
	r.notify()
	if err != nil {
		return fmt.Errorf("write container log: %w", err)
	}
	return nil
}

// end marks the run over: its file is complete, and followers stop at its end.
func (r *logRun) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return
	}
	if r.f != nil {
		_ = r.f.Close()
		r.f = nil
	}
	r.ended = true
	r.notify()
}

func (r *logRun) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// state says whether the run ended (its file is then complete) and gives the channel closed at
// the next change.
func (r *logRun) state() (bool, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended, r.changed
}

// logEntry is one parsed entry of a container log.
type logEntry struct {
	ts      time.Time
	full    bool
	content []byte
}

// parseLogEntry reads one entry (without its newline).
func parseLogEntry(line []byte) (logEntry, error) {
	parts := bytes.SplitN(line, []byte{' '}, 4)
	if len(parts) < 3 {
		return logEntry{}, fmt.Errorf("parse container log entry %q: too few fields", line)
	}
	ts, err := time.Parse(time.RFC3339Nano, string(parts[0]))
	if err != nil {
		return logEntry{}, fmt.Errorf("parse container log entry: %w", err)
	}
	e := logEntry{ts: ts, full: string(parts[2]) == string(tagFull)}
	if len(parts) == 4 {
		e.content = parts[3]
	}
	return e, nil
}

// logReader reads the complete entries of a run's file as they are appended.
type logReader struct {
	f       *os.File
	pending []byte
}

// next returns the entries completed since the last call.
func (lr *logReader) next() ([]logEntry, error) {
	buf := make([]byte, 32*1024)
	for {
		n, err := lr.f.Read(buf)
		lr.pending = append(lr.pending, buf[:n]...)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read container log: %w", err)
		}
	}
	var out []logEntry
	for {
		i := bytes.IndexByte(lr.pending, '\n')
		if i < 0 {
			break
		}
		e, err := parseLogEntry(lr.pending[:i])
		if err != nil {
			return nil, err
		}
		e.content = bytes.Clone(e.content)
		out = append(out, e)
		lr.pending = lr.pending[i+1:]
	}
	return out, nil
}

// tail keeps the entries of the last n lines (n < 0: all). A line is its pieces up to and
// including the full one; a last line still being written (pieces only) counts as one.
func tail(entries []logEntry, n int64) []logEntry {
	if n < 0 {
		return entries
	}
	start := len(entries)
	for lines := int64(0); start > 0 && lines < n; lines++ {
		start--
		for start > 0 && !entries[start-1].full {
			start--
		}
	}
	return entries[start:]
}

// errLimitReached stops a log stream at its limitBytes.
var errLimitReached = errors.New("limit reached")

// logOutput writes entries as the kubelet does: lines older than since skipped, a timestamp
// before each line when asked, cut at limitBytes.
type logOutput struct {
	w          io.Writer
	since      time.Time
	timestamps bool
	remain     int64
	// atLineStart is true when the next entry begins a line.
	atLineStart bool
}

func (o *logOutput) write(entries []logEntry) error {
	for _, e := range entries {
		starts := o.atLineStart
		o.atLineStart = e.full
		if e.ts.Before(o.since) {
			continue
		}
		var line []byte
		if o.timestamps && starts {
			line = e.ts.UTC().AppendFormat(line, logTimeFormat)
			line = append(line, ' ')
		}
		line = append(line, e.content...)
		if e.full {
			line = append(line, '\n')
		}
		if int64(len(line)) > o.remain {
			line = line[:o.remain]
		}
		n, err := o.w.Write(line)
		o.remain -= int64(n)
		if err != nil {
			return fmt.Errorf("write log stream: %w", err)
		}
		if o.remain <= 0 {
			return errLimitReached
		}
	}
	return nil
}

// lineWriter copies the output of a Pod's containers: each container run's into its own log
// (logRun), and all of them, line by line, to the console (prefixed with the Pod's namespace
// and Job) and to the Pod's log file.
type lineWriter struct {
	prefix  string
	console io.Writer
	file    io.Writer
	mu      sync.Mutex
}

// copyFrom copies one container run's output until its end, then ends the run's log.
func (l *lineWriter) copyFrom(r io.Reader, run *logRun) {
	defer run.end()
	br := bufio.NewReaderSize(r, maxLogEntry)
	atLineStart := true
	for {
		piece, err := br.ReadSlice('\n')
		if len(piece) > 0 {
			full := piece[len(piece)-1] == '\n' || errors.Is(err, io.EOF)
			content := bytes.TrimSuffix(piece, []byte{'\n'})
			now := time.Now()
			l.mu.Lock()
			_ = run.write(now, content, full)
			_, _ = l.file.Write(content)
			if atLineStart {
				_, _ = io.WriteString(l.console, l.prefix)
			}
			_, _ = io.WriteString(l.console, strings.TrimRight(string(content), "\r"))
			if full {
				_, _ = io.WriteString(l.file, "\n")
				_, _ = io.WriteString(l.console, "\n")
			}
			l.mu.Unlock()
			atLineStart = full
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}
