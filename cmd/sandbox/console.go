package main

import (
	"bytes"
	"io"
	"sync"
)

// warningsOnly passes the manager's log lines to out except its info and debug records (the
// zap console encoder's level column, "\tINFO\t" or "\tDEBUG\t"). Every other line passes,
// warnings, errors and anything that is no log record (a panic's trace, say), so nothing that
// may matter is hidden. It buffers a line until its end.
type warningsOnly struct {
	out io.Writer

	mu      sync.Mutex
	partial []byte
}

// quiet are the level columns of the records the console does not show.
var quiet = [][]byte{[]byte("\tINFO\t"), []byte("\tDEBUG\t")}

func (w *warningsOnly) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := w.partial[:i+1]
		show := true
		for _, q := range quiet {
			if bytes.Contains(line, q) {
				show = false
				break
			}
		}
		if show {
			// The console may be gone (a closed pipe): the manager keeps running.
			_, _ = w.out.Write(line)
		}
		w.partial = w.partial[i+1:]
	}
}
