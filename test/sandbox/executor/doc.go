// Package executor plays the node, the Job controller and the garbage collector of a cluster
// for CAPTF's Jobs only, so the sandbox (cmd/sandbox) and the end-to-end tests run real Jobs
// without a kubelet or a container runtime.
//
// For every Job labelled captf.io/managed=true it creates a Pod bound to the sandbox node, runs
// the Pod's init containers and main container as local processes (the real runner, the real
// terraform or tofu), and writes what a cluster would write: the Pod's phase and container
// states (the main container's termination message is the runner's result file) and the Job's
// start and completion times, active/ready/terminating counts and its terminal conditions
// (SuccessCriteriaMet+Complete, or FailureTarget+Failed). It honours activeDeadlineSeconds and
// deletion the way the Job controller and the kubelet do: SIGTERM to the container's first
// process, then SIGKILL of every process of the container after the grace period. Jobs whose
// owner is gone are deleted, with their Pods and their per-run Secret.
//
// A container is a process in its own session with a private folder: every volume of the Pod
// (Secret, ConfigMap, emptyDir) is written into that folder and every path of the container's
// command that points into a mount, or at the termination message path, is rewritten to the
// local copy. The image is not run: the path the init container copies the runner from
// (runnerapi.RunnerInImage) is the runner binary built into bin/, and terraform/tofu come from
// the host. The runner gets KUBE_CONFIG_PATH pointing at a kubeconfig holding a token of the
// Job's ServiceAccount bound to the Pod, so the Terraform state lands in the sandbox API
// server under the runner's own RBAC, as in a cluster.
//
// Invariants:
//   - only Pods bound to this executor's node are ever run, and a Pod runs at most once;
//   - a Pod is reported Succeeded or Failed only after every process of its container (the
//     whole session) has exited; while it stops, it stays Running with a deletion timestamp;
//   - a Job gets Complete or Failed only after its Pod is terminal; FailureTarget (deadline)
//     comes first, while the Pod still terminates, as the Job controller does;
//   - a container that needs what the host cannot give (an image module, an unknown volume
//     type) fails with a message saying so rather than running something else.
package executor
