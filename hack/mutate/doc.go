// Command mutate runs CAPTF's mutation proofs (`make mutate`): each proof is a small source
// rewrite that breaks one safety rule, and the test it names must then fail.
//
// It reads every list hack/mutations/*.txt. A list holds one mutation per line:
//
//	file|old text|new text|test command
//
// file is a path relative to the repository root; old text must occur exactly once in it and
// is replaced by new text; the test command runs with bash in the root of the copy. Fields are
// separated by '|'; a literal '|' inside a field is written \| (Go conditions are full of ||,
// and a -run pattern may need one), which no line without it can mean otherwise. In old and
// new text, \n is a newline, \t a tab and \\ a backslash (any other backslash stays as
// written), so a mutation can span lines. Old and new text are taken verbatim (no trimming);
// file and command are trimmed. Lines whose first
// non-blank character is '#' are comments, and the comment "# name: <short-name>" names the
// next mutation (otherwise it is named <list>:<line>); names are unique over all lists. Blank
// lines are ignored. A `go test` command must carry -count=1: a cached result proves nothing.
//
// For each selected mutation, one at a time, in one scratch copy of the repository (HEAD, from
// git archive; or, with -from=worktree, the tracked and untracked-but-not-ignored files as they
// are in the working tree), it:
//
//  1. checks that old text occurs exactly once in the file, else the mutation is STALE;
//  2. applies it;
//  3. runs the test command with KUBEBUILDER_ASSETS, CAPTF_TEST_TOFU, CAPTF_TEST_TERRAFORM and
//     KUBEBUILDER_CONTROLPLANE_START_TIMEOUT defaulted as the Makefile exports them;
//  4. records INVALID when go test reports a package "[build failed]" or "[setup failed]" (the
//     mutated code does not compile: go test builds the mutated package as a dependency of the
//     package it tests, so no separate compile check is needed, and a kill by a build failure
//     would prove nothing); else KILLED with the names of the failing tests (go test's
//     "--- FAIL:" lines, Ginkgo's "[FAIL]" summary lines, the tests running when go test timed
//     out), SURVIVED when the command passed, UNPROVEN when it failed without naming a test
//     (a setup failure proves nothing), or TIMEOUT when it outlived -timeout;
//  5. restores the file.
//
// Before the mutations, each distinct test command runs once on the unmutated copy (-baseline,
// on by default): a mutation whose command fails without it is reported BASELINE and not run,
// since its kill would prove nothing.
//
// It prints a table (name, file, killed by or status, seconds) and, with -report, writes it as
// Markdown with the date, commit, command, totals, the mutations the selection left out (and
// the command that runs them) and how to add a mutation. It exits 1 when any mutation
// was not KILLED, 2 on a usage or list error, 130 when interrupted. -list prints the selected
// mutations and whether each still applies, and runs nothing. -only (or the MUTATIONS
// environment variable) selects mutations by comma-separated shell globs matched against the
// name and against "<list>/<name>" (for example "decide/*").
//
// Invariants:
//   - The repository's working tree is never written: everything happens in the scratch copy,
//     except the -report file when one is asked for. bin/ in the copy holds links to the
//     repository's bin/ entries, so the tests find the source-built tools; a new file there
//     stays in the copy, but a command that rewrote an existing entry would write through the
//     link, so test commands build into temporary folders (as go test does), never into bin/.
//   - The scratch copy, and the process group of every command it started, are removed on
//     every exit path, including SIGINT, SIGTERM and SIGHUP. A copy left by a run that could
//     not clean up (SIGKILL) is removed by the next run: each copy records its owner's PID in
//     owner.pid, and a copy whose owner no longer exists is deleted before a run starts.
//   - One mutation is applied at a time, and the file is restored before the next.
package main
