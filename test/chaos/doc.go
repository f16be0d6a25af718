// Package chaos holds the tests that stop managers mid-write, race two managers without
// leader election, and starve a manager's cache, each against a real API server with an
// invariant monitor that replays what the API server recorded.
package chaos
