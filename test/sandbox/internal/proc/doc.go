// Package proc starts the processes a sandbox owns and makes sure none outlives it.
//
// A container (or the manager child) runs in a session of its own: every process its first
// process starts belongs to that session, even those that make a process group of their own
// (terraform does), so KillSession stops a whole container the way a container runtime does.
//
// Two mechanisms make children die with the sandbox, on every exit path including SIGKILL:
//
//   - Start starts a child with the Linux parent-death signal (SIGKILL) from one goroutine that
//     is locked to its OS thread for the life of the process. The kernel sends the signal when
//     the creating thread ends, not the process: a child started from an ordinary goroutine
//     could be killed as soon as the Go runtime retired that thread.
//   - EnableGuard starts a guard: a second copy of the running binary (re-executed through
//     /proc/self/exe; the init function of this package turns it into the guard) in a process
//     group of its own, reading a pipe from the sandbox. It records every child of the sandbox:
//     those registered by Start, and every other child it finds, such as the etcd and
//     kube-apiserver that envtest starts in process groups of their own (it looks every 100 ms
//     while children come, every 2 s once none came for 10 s). When the pipe closes (the
//     sandbox exited, however it exited), it kills each recorded process that is still the same
//     process (same start time), the process group it leads and the session it leads, then
//     removes the paths registered with RemoveOnExit, and exits.
//     Terminal signals (Ctrl-C, hang-up) do not reach it.
//
// Invariants: a process that is not a child of the sandbox (or a member of a session or process
// group such a child leads) is never signalled; the guard never outlives the sandbox by more
// than the time it takes to kill what is left; StopGuard, called by a binary as it exits
// normally, waits for the guard so no process of the sandbox is left when the binary returns.
package proc
