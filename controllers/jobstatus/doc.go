// Package jobstatus is the one definition of "a Job runs", the one live listing of a Job's
// pods, and the one vocabulary of ownership between an object, its Jobs and their pods. The
// engine, the run lease rules (controllers/runlease), the cache-lag checks and both admission
// webhooks decide on it, so they cannot disagree about whether a Job is over or whose it is.
//
// Rules it keeps:
//   - a Job is finished only once it carries a Complete or Failed condition that is True
//     (Finished); it succeeded once Complete is True (Succeeded). The interim conditions
//     SuccessCriteriaMet and FailureTarget are not enough: the Job controller sets them while it
//     still stops the pods. They only decide how the Job ends (Decided), which is what the
//     outcome reader (jobs.OutcomeOf) needs, never whether it is over;
//   - a Job runs while it is not finished, and also while any pod of it is neither Succeeded
//     nor Failed (a Job deleted with --cascade=orphan, or a pod still terminating), whatever
//     the Job says;
//   - a Job's pods are found by either Job-name label (batch.kubernetes.io/job-name and the
//     legacy job-name), read through the API server: pods are never cached. ListPods is a
//     consistent read; ListPodsOf reads a finished Job's pods no older than the Job itself
//     (the Job controller finishes a Job only once its pods are terminal) and confirms with a
//     consistent read any pod that still looks non-terminal there;
//   - ownership has one answer per question: a Job is its object's, any incarnation
//     (SameObject), by the object's owner labels (LabelledForObject) or by its controller owner
//     reference naming the object's CAPTF kind and name (ControlledByObject); it is this
//     incarnation's only when that reference carries the object's UID (SameIncarnation); a
//     pod is a Job's by its controller reference to the Job's UID, else a Job-name label
//     (PodOfJob), or by the Job-name label alone when only the name is known (PodOfJobNamed).
//   - a pod cannot start for want of an image when one of its containers (init containers
//     first) waits with a kubelet's pull reason, ErrImagePull, ImagePullBackOff,
//     InvalidImageName or ErrImageNeverPull (PullFailureOf); a terminal pod never counts, and
//     the kubelet's back-off preamble is dropped so the registry's answer reads the same
//     between a failed pull and the back-off after it;
//   - a running Job's pods that have not started say why (StartBlockOf: a container
//     configuration error, Unschedulable, a scheduled pod with no container started, or no pod),
//     and they prove that terraform never ran only when every pod is Pending and no main
//     container runs, ran, restarted or reports started (NoContainerStarted); init containers
//     (the state channel) may have run.
//
// It imports the API types, naming (the owner labels) and the runner's wire API (the pod
// labels), never the engine, runlease or cachelag, so each of them can use it.
package jobstatus
