// Package executor plays the node, the Job controller, the garbage collector and the root CA
// publisher of a cluster for CAPTF's Jobs only, so the sandbox (cmd/sandbox) and the end-to-end
// tests run real Jobs without a kubelet or a container runtime.
//
// For every Job labelled captf.io/managed=true it creates a Pod bound to the sandbox node, runs
// the Pod's containers as local processes (the real runner, the real terraform or tofu), and
// writes what a cluster would write: the Pod's phase and container states (the main container's
// termination message is the runner's result file) and the Job's start and completion times,
// active/ready/terminating counts and its terminal conditions (SuccessCriteriaMet+Complete, or
// FailureTarget+Failed). It honours activeDeadlineSeconds and deletion the way the Job
// controller and the kubelet do: SIGTERM to the container's first process, then SIGKILL of
// every process of the container after the grace period.
//
// Containers run as a kubelet runs them: init containers in order; an init container with
// restartPolicy Always is a native sidecar, which counts as started once its process runs (or
// once its startup probe, exec, tcpSocket or httpGet, succeeded) and then runs beside the
// next containers, is started again after a back-off (1 s doubling to 30 s) whenever it ends
// on its own, and is stopped (SIGTERM, SIGKILL at the deadline) in the reverse order of the
// sidecars' start once the main container ended. The Pod's phase and termination message come
// from the main container.
//
// A container is a process in its own session with its own folder (working folder, home,
// termination message). Every volume of the Pod is materialised in a private folder whose name
// nobody can guess, inside a folder that cannot be listed: Secret, ConfigMap, downwardAPI,
// emptyDir, and projected volumes (serviceAccountToken sources as real TokenRequest tokens of
// the Pod's ServiceAccount bound to the Pod, with the source's audience and expiration,
// replaced before they expire; configMap, secret and downwardAPI sources). A path into a mount
// in a container's command or env is rewritten to the volume's folder for the containers that
// mount it and for no other. The image is not run: the path the init container copies the
// runner from (runnerapi.RunnerInImage) is the runner binary built into bin/, and terraform or
// tofu come from the host. Every container gets KUBERNETES_SERVICE_HOST/PORT (the sandbox API
// server). Unless the Pod sets automountServiceAccountToken: false, every container also gets
// KUBE_CONFIG_PATH, a kubeconfig with a token of the Pod's ServiceAccount bound to the Pod;
// with it, only projected volumes give tokens, to the containers that mount them.
//
// The garbage collector's part follows the deletion's propagation policy, which the API
// server records as a finalizer on the Job: orphan (the batch/v1 default) leaves the Pods and
// the per-run Secret without their owner reference and running; foreground deletes them and
// lets the Job go once its Pods are gone; background deletes them once the Job is gone. A Job
// whose owner is gone is deleted in the background. The root CA publisher keeps a
// kube-root-ca.crt ConfigMap with the API server's CA in every namespace.
//
// Invariants:
//   - only Pods bound to this executor's node are ever run, and a Pod runs at most once;
//   - a Pod is reported Succeeded or Failed only after every process of every one of its
//     containers (each whole session, sidecars included) has exited; while it stops, it stays
//     Running with a deletion timestamp;
//   - a Job gets Complete or Failed only after its Pod is terminal; FailureTarget (deadline)
//     comes first, while the Pod still terminates, as the Job controller does;
//   - a Pod that opts out of the automatic token gets no token, kubeconfig or KUBE_CONFIG_PATH
//     from the executor in any container;
//   - a Pod orphaned by its Job's deletion is never stopped by the executor's garbage collector;
//   - a container that needs what the host cannot give (an image module, an unknown volume
//     type, a probe kind) fails with a message saying so rather than running something else.
package executor
