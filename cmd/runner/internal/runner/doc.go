// Package runner is the logic of the runner binary that runs inside each CAPTF Job: it reads
// the per-run inputs, picks the terraform/tofu binary, copies the module (resolving ConfigMap
// symlinks) into a work folder, writes the backend override (the http backend on the state
// channel in a Job, else the kubernetes backend), runs the operation's commands (Steps is the
// one mapping from operation to commands), forwards signals and writes the result document
// (runnerapi.Result), including what the state channel recorded (fenced, a lock broken, a lock
// holder). Plan, Drift and Refresh save their plan and report its bounded summary; a Plan
// through the channel also uploads it (a refresh-only plan with --refresh-only); a Refresh
// applies its own refresh-only plan, so the state records what changed outside terraform and
// no infrastructure changes; an Apply or a Refresh with --plan-id applies the saved plan it
// fetches from the channel (an Apply only a plan that is not refresh-only, a Refresh only a
// refresh-only one). An Apply or a Plan with --target (runnerapi.ParseTarget) carries out one
// targeted operation: a replace adds `-replace=ADDR` to the apply or the plan (not to an
// apply of a saved plan, whose file carries it), an import writes its import block and a forget its removed
// block into the module copy (runnerapi.TargetBlockFile; a module that ships that file is
// refused). The
// three phases of a run are prepare (prepare.go: flags, inputs, binary, channel, work folder,
// steps), runSteps (each command between the hooks beforeStep, a restore's push, and
// afterStep, what a command leaves for the result) and interpret.
//
// Invariants:
//   - the state goes only where backend.json says: with the channel, every setting of the http
//     backend comes from TF_HTTP_* (never recorded in .terraform or in a saved plan, so a plan
//     holds no channel address or credential), the override's empty http block replaces the
//     module's backend, and init's record must show no setting from the configuration; without
//     it, the override pins the
//     kubernetes backend's connection settings. KUBE_* (all of them with the channel, all but
//     KUBE_CONFIG_PATH without), TF_HTTP_*, TF_WORKSPACE, TF_DATA_DIR and TF_CLI_ARGS* are
//     removed from terraform's environment, the workspace is forced to default, and the backend
//     init recorded is checked before any command that touches state;
//   - the runner waits for the state channel a bounded time, and reports a run the channel
//     fenced as Fenced (exit 15) only when a command failed;
//   - a SIGTERM/SIGINT is forwarded to the running command exactly once and the runner waits
//     for it, so terraform stops gracefully and releases the state lock; no later step starts;
//   - nothing the runner prints or reports carries a redact.json value or an obvious credential;
//     `state pull` output is never printed;
//   - a restore never uses `state push -force` and never replaces a non-empty state of another
//     lineage;
//   - an apply of a saved plan applies only the file the channel handed out, after checking its
//     ID, its SHA-256, that the ID is the hash of its record and that the record's kind
//     (refresh-only or not) is the Job's; a refused or stale plan is reported (planRefused,
//     planStale, exit 16), never replaced by a fresh apply;
//   - `show -json` output (every variable's value) is never printed; the plan text is redacted;
//   - the result document is at most 4 KiB and is written on every path that has a result file.
package runner
