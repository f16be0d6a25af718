package setup

import (
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
)

// EnvMemoryLimit is the variable config/manager fills with the manager container's memory
// limit, in bytes (the downward API's resourceFieldRef limits.memory).
const EnvMemoryLimit = "CAPTF_MEMORY_LIMIT"

// EnvGoMemoryLimit is the Go runtime's own soft memory limit variable. When it is set, the
// runtime has applied it already and MemoryLimit leaves it be.
const EnvGoMemoryLimit = "GOMEMLIMIT"

// MemoryLimitPercent is the share of the container's memory limit the Go runtime's soft memory
// limit takes. The rest is for what the limit does not bound: memory the runtime has not given
// back to the system yet, and memory outside the Go heap.
const MemoryLimitPercent = 90

// MemoryLimit is the soft memory limit the manager gives the Go runtime
// (runtime/debug.SetMemoryLimit), read through getenv: MemoryLimitPercent of the container's
// memory limit in EnvMemoryLimit. It is 0 (set no limit) when EnvGoMemoryLimit is set, or
// when EnvMemoryLimit is unset or empty. Without a limit the garbage collector lets the heap
// grow to twice what it kept at its last collection before collecting again, so a start over a
// large fleet peaks far above the heap it keeps; with one it collects more often as the heap
// nears the limit, and the peak stays under it while what it keeps fits.
func MemoryLimit(getenv func(string) string) (int64, error) {
	if getenv(EnvGoMemoryLimit) != "" {
		return 0, nil
	}
	v := strings.TrimSpace(getenv(EnvMemoryLimit))
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q is not a number of bytes", EnvMemoryLimit, v)
	}
	return n / 100 * MemoryLimitPercent, nil
}

// SetMemoryLimit gives the Go runtime the soft memory limit MemoryLimit reads through getenv,
// when there is one, and returns it (0: the runtime's limit is left as it was).
func SetMemoryLimit(getenv func(string) string) (int64, error) {
	limit, err := MemoryLimit(getenv)
	if err != nil {
		return 0, err
	}
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	return limit, nil
}
