// Package doccmd reads the commands that the user-facing pages show (README.md, docs/sandbox.md,
// docs/flavors.md, docs/cli.md, docs/plans.md, docs/state.md, docs/drift.md) and keeps the fate of each one: the e2e spec that runs it as
// the page shows it, or the reason no test can.
//
// Invariants:
//   - Every command of those pages has a fate, and every fate names a command the page shows
//     (test/docs checks both ways): a command added to a page without a test, or a fate left
//     behind by an edit, fails a test.
//   - A fate that names a spec is kept by that spec: test/e2e runs the command through a shell
//     as the page writes it (read from the page, never copied into the test), records it, and a
//     whole run of the suite fails if a named spec did not run its command.
//   - A command is what a shell runs: a ```sh block's lines, or the lines after "$ " of any other
//     block; continuation lines are joined and a trailing comment is kept apart.
package doccmd
