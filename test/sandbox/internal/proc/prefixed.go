package proc

import (
	"bufio"
	"io"
)

// Prefixed is a writer for a child's output: each line goes to out with prefix before it.
// Close it once the child exited, so the goroutine that copies the lines ends.
func Prefixed(out io.Writer, prefix string) io.WriteCloser {
	pr, pw := io.Pipe()
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			_, _ = io.WriteString(out, prefix+sc.Text()+"\n")
		}
		_ = pr.CloseWithError(sc.Err())
	}()
	return pw
}
