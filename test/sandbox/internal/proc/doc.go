// Package proc starts processes the sandbox owns in a session of their own and kills whole
// sessions: a session stands for a container (every process the container's first process
// starts, even those that make their own process group) or for a child the sandbox runs.
//
// Invariant: a process started with SessionAttrs dies when the Go process that started it
// dies (Pdeathsig on Linux), so a crashed sandbox leaves no runner or manager behind.
package proc
