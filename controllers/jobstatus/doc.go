// Package jobstatus is the one definition of "a Job runs" and the one live listing of a Job's
// pods. The engine, the run lease rules (controllers/runlease), the cache-lag checks and both
// admission webhooks decide on it, so they cannot disagree about whether a Job is over.
//
// Rules it keeps:
//   - a Job is finished only once it carries a Complete or Failed condition that is True. The
//     interim conditions SuccessCriteriaMet and FailureTarget are not enough: the Job
//     controller sets them while it still stops the pods;
//   - a Job runs while it is not finished, and also while any pod of it is neither Succeeded
//     nor Failed (a Job deleted with --cascade=orphan, or a pod still terminating), whatever
//     the Job says;
//   - a Job's pods are found by either Job-name label (batch.kubernetes.io/job-name and the
//     legacy job-name), read through the API server: pods are never cached. ListPods is a
//     consistent read; ListPodsOf reads a finished Job's pods no older than the Job itself
//     (the Job controller finishes a Job only once its pods are terminal) and confirms with a
//     consistent read any pod that still looks non-terminal there.
package jobstatus
