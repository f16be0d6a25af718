package runner

import (
	"bytes"
	"io"
	"strings"
	"sync"
)

// maxLine bounds how much of a line without a newline the filter holds before it writes it.
const maxLine = 1 << 20

// syncWriter serialises writes from the child's stdout and stderr copiers.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// lineFilter redacts a stream line by line before passing it on. It also drops the body of a
// PEM private key that spans lines, which a per-line pattern cannot see whole.
type lineFilter struct {
	redactor *Redactor
	out      []io.Writer
	buf      []byte
	inPEM    bool
}

func newLineFilter(r *Redactor, out ...io.Writer) *lineFilter {
	return &lineFilter{redactor: r, out: out}
}

func (f *lineFilter) Write(p []byte) (int, error) {
	f.buf = append(f.buf, p...)
	for {
		i := bytes.IndexByte(f.buf, '\n')
		if i < 0 {
			break
		}
		f.emit(string(f.buf[:i+1]))
		f.buf = f.buf[i+1:]
	}
	if len(f.buf) > maxLine {
		f.emit(string(f.buf))
		f.buf = nil
	}
	return len(p), nil
}

// Flush writes a last line that has no newline.
func (f *lineFilter) Flush() {
	if len(f.buf) > 0 {
		f.emit(string(f.buf))
		f.buf = nil
	}
}

func (f *lineFilter) emit(line string) {
	switch {
	case f.inPEM:
		if loc := pemEnd.FindStringIndex(line); loc != nil {
			f.inPEM = false
			line = Mask + line[loc[1]:]
		} else {
			return
		}
	case pemBegin.MatchString(line) && !pemEnd.MatchString(line):
		f.inPEM = true
		line = line[:pemBegin.FindStringIndex(line)[0]] + Mask + "\n"
	}
	line = f.redactor.Redact(line)
	for _, w := range f.out {
		_, _ = io.WriteString(w, line)
	}
}

// tailBuffer keeps the last lines written to it (already redacted by a lineFilter).
type tailBuffer struct {
	mu       sync.Mutex
	lines    []string
	maxLines int
	partial  strings.Builder
}

func newTailBuffer(maxLines int) *tailBuffer {
	return &tailBuffer{maxLines: maxLines}
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range string(p) {
		if c == '\n' {
			t.push(t.partial.String())
			t.partial.Reset()
			continue
		}
		t.partial.WriteRune(c)
	}
	return len(p), nil
}

func (t *tailBuffer) push(line string) {
	t.lines = append(t.lines, line)
	if len(t.lines) > t.maxLines {
		t.lines = t.lines[len(t.lines)-t.maxLines:]
	}
}

// String returns the kept lines, without blank lines at either end.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := t.lines
	if t.partial.Len() > 0 {
		lines = append(append([]string(nil), lines...), t.partial.String())
	}
	if len(lines) > t.maxLines {
		lines = lines[len(lines)-t.maxLines:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}
