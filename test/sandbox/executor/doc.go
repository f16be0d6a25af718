// Package executor is the sandbox's node: it plays the kubelet, and nothing else, so the
// sandbox (cmd/sandbox) and the tests run real Jobs without a kubelet or a container runtime.
// It owns the Node it registers, the Pods bound to it, their containers' processes and logs,
// and the node's kubelet endpoint for those logs.
// The Job controller, the garbage collector, the root CA publisher and the ServiceAccount
// controllers are the real ones of kube-controller-manager, and Pods are bound by the real
// kube-scheduler (package kubecontrollers starts both).
//
// It registers a Node (capacity, addresses, node info, a Ready condition) and keeps it alive as
// a kubelet does: the node's Lease in kube-node-lease renewed every HeartbeatInterval (10 s),
// its status written every minute. PauseHeartbeat stops both; Partition also cuts the node off
// the API server (no Pod status written, no deletion seen) while its containers run on. The node
// lifecycle controller then marks the node not ready and taints it; it evicts the node's Pods
// only while another node of the zone is healthy (with every node lost it evicts nothing).
//
// It watches the Pods bound to its node (a field selector on spec.nodeName, as a kubelet does),
// runs their containers as local processes (the real runner, the real terraform or tofu), and
// writes what a kubelet writes: the Pod's phase and container states (the main container's
// termination message is the runner's result file). A deleted Pod's containers get SIGTERM to
// their first process, then SIGKILL of every process after the grace period; once they ended,
// the node deletes the Pod with no grace period, as a kubelet's last word.
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
// Each run of each container has its own log file (<pod>/logs/<container>/<run>.log) in the CRI
// log format, as a container runtime writes it (stdout and stderr in one pipe, so in order; a
// line longer than 16 KiB in pieces); the output also goes, line by line, to Options.Output
// prefixed with "[<namespace>/<job>] " and to the Pod's containers.log. With Options.Kubelet
// (a KubeletPKI) the node serves the kubelet's container-log endpoint, GET
// /containerLogs/{namespace}/{pod}/{container} with follow, previous, timestamps, tailLines,
// limitBytes, sinceSeconds and sinceTime, over HTTPS on an ephemeral port of 127.0.0.1 that the
// Node advertises (status.daemonEndpoints.kubeletEndpoint, InternalIP 127.0.0.1), so the API
// server's pods/log (kubectl logs [-f]) works as on a cluster; the API server runs with
// KubeletPKI.APIServerFlags.
//
// Invariants:
//   - only Pods bound to this executor's node are ever run, and a Pod runs at most once;
//   - a Pod is reported Succeeded or Failed only after every process of every one of its
//     containers (each whole session, sidecars included) has exited; while it stops, it stays
//     Running with a deletion timestamp;
//   - a Pod that opts out of the automatic token gets no token, kubeconfig or KUBE_CONFIG_PATH
//     from the executor in any container;
//   - a Pod is stopped only when it is deleted (or the executor stops): a Pod the garbage
//     collector orphaned runs on;
//   - the node's heartbeat stops only when asked (PauseHeartbeat, Partition) or when the
//     executor stops;
//   - a container that needs what the host cannot give (a program of its image, an unknown
//     volume type, a probe kind) fails with a message saying so rather than running something
//     else;
//   - an image module's image is pulled only with the credentials of the Pod's own
//     imagePullSecrets (anonymously without any); a failed pull leaves the Pod Pending with its
//     main container Waiting (ErrImagePull, then ImagePullBackOff, the registry's answer as the
//     message), and is retried with the secrets read afresh until it works or the Pod is
//     deleted; an image entry or link that would leave the unpacked image fails the Pod;
//   - the kubelet endpoint serves only the API server's kubelet client (a client certificate
//     of the kubelet CA for KubeletClientUser): 401 without one, 403 for another user; it
//     closes after the containers stopped, so a follower reads a log to its end, and a
//     follower's stream ends once the container's run ended.
package executor
