// Package channel is the runner's state channel (`runner channel`): a native sidecar of every
// CAPTF Job that speaks Terraform's http backend on loopback and stores the state in exactly
// the layout of Terraform's kubernetes backend (Secret tfstate-default-<suffix>, gzip'd JSON
// under key tfstate, the backend's labels; lock Lease lock-tfstate-default-<suffix> whose
// holderIdentity is the lock ID, with the lock info annotation; names, key, codec and limits
// from runnerapi, which the controller's packages use too). It alone holds the pod's
// Kubernetes credential; terraform and the module reach the state only through it, with a
// per-run password. It also stores a Plan Job's saved plan in the object's plan Secret
// (captf-plan-<suffix>) and hands that plan to the one Apply or Refresh Job given its ID.
//
// Invariants:
//   - it serves one state, named by its flags: a request for another namespace or suffix is
//     refused (403), a request without the per-run credential is refused (401);
//   - it reads and writes only the state Secret, the lock Lease and the plan Secret of its
//     suffix, and reads only the run lease, Jobs and Pods of its namespace; it never creates
//     or deletes;
//   - fencing: a LOCK or a state write (POST) happens only when the object's run lease, read
//     live just before, names the channel's Job; otherwise it is refused (403) and recorded in
//     fenced.json, which the runner reports as the outcome Fenced;
//   - a state write needs the lock: its ?ID= must be the lock Lease's holder, taken by this
//     pod's channel (read live);
//   - one lineage per run, on reads and on writes: with --state-lineage (the lineage of the
//     state the controller read) the channel serves only a state of that lineage and accepts
//     only writes of it. Without it (the controller read no state: a first apply) the first
//     write the channel accepts pins the lineage: the lineage of the state the Secret holds at
//     that moment when it holds one (a state that appeared since is what terraform read and
//     writes back), else the lineage that write carries; every later write must carry the
//     pin. A Restore Job (which takes no --state-lineage) replaces the state: its first
//     accepted write pins its own lineage whatever the Secret holds, and the runner, not the
//     channel, decides whether that replacement is safe (never over a non-empty state of
//     another lineage). A write that is not a state document with a lineage, or carries
//     another lineage, is refused (409) before anything is written, after the fencing and
//     lock checks, and recorded in state-refused.json with "request": "POST", which the runner
//     reports as the outcome Failed (even when terraform finished), like a refused read. The
//     pin lives in the channel's memory: a restarted channel without --state-lineage pins
//     again at its next write, from the Secret, which holds the run's last accepted write (a
//     restarted Restore channel, from that write). The pin checks the lineage only: a client
//     holding the credential and the lock can still write a state of the run's own lineage;
//   - a held lock is broken only under ARCHITECTURE.md I8: its holder is a pod of one of this
//     object's own Jobs (Job read live, controlled by the object's UID), that pod is gone or
//     terminal, this Job holds the run lease, and the write that breaks it carries the
//     resourceVersion it read (a conflict means no break). A break is recorded in
//     lock-broken.json; any other holder gets 423 and is named in lock-holder.json;
//   - a plan is stored (PUT /plan) only by a Plan Job's channel and only while the run lease
//     names its Job; the channel binds it itself: the ID is runnerapi.PlanID of the SHA-256 of
//     the file it received, its own --inputs-hash, and the state serial and lineage the plan
//     file records; the record says RefreshOnly when the channel's own --refresh-only says so
//     (a Plan Job's refresh-only plan), Destroy when its own --destroy-plan does (a
//     deleting object's destroy plan), and Target from its own --target (the replace or
//     import the plan carries out), never from what the runner uploads. A plan and its
//     record must fit one Secret (about 1 MiB) or are refused;
//   - a plan is handed out (GET /plan) only by a channel given its --plan-id, only while the
//     run lease names its Job, only if the Secret holds that plan, its file matches its record's
//     SHA-256, the record's ID is the hash of its fields and the plan is of the Job's kind
//     (runnerapi.PlanKindRefusal: a Refresh Job gets only a refresh-only plan, a Destroy Job
//     only a destroy plan, an Apply Job only one that is neither: refused with reason Kind
//     otherwise, so an approved refresh-only plan never runs as an Apply, an approved plan
//     never runs under a Refresh, and a destroy plan never runs as an Apply), and at most once: the first
//     hand-out marks the Secret consumed by the Job in a write conditional on the
//     resourceVersion read, and no other Job gets it afterwards (I9);
//   - the API token is read from its file on every request (the kubelet rotates it);
//   - updates go through the object as read, so fields the channel does not know (finalizers,
//     owner references, labels) are kept.
package channel
