package setup

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestMemoryLimitFromTheContainer: the soft memory limit is MemoryLimitPercent of the
// container's limit in bytes; none without one, none over GOMEMLIMIT (the runtime applied
// that already), and a value that is no number of bytes is refused.
func TestMemoryLimitFromTheContainer(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want int64
		err  bool
	}{
		{name: "512Mi", env: map[string]string{EnvMemoryLimit: "536870912"}, want: 483183810},
		{name: "unset", env: map[string]string{}, want: 0},
		{name: "GOMEMLIMIT wins", env: map[string]string{EnvMemoryLimit: "536870912", EnvGoMemoryLimit: "300MiB"}, want: 0},
		{name: "a quantity, not bytes", env: map[string]string{EnvMemoryLimit: "512Mi"}, err: true},
		{name: "zero", env: map[string]string{EnvMemoryLimit: "0"}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MemoryLimit(func(k string) string { return tc.env[k] })
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want an error: %v", err, tc.err)
			}
			if got != tc.want {
				t.Errorf("limit = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestSetMemoryLimitSetsTheRuntimes: the manager's start gives the Go runtime the limit from
// the container's, and leaves the runtime's limit alone when there is none.
func TestSetMemoryLimitSetsTheRuntimes(t *testing.T) {
	prev := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(prev)
	if _, err := SetMemoryLimit(func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("without a container limit the runtime's limit became %d, want it left at %d", got, int64(math.MaxInt64))
	}
	limit, err := SetMemoryLimit(func(k string) string {
		if k == EnvMemoryLimit {
			return "1073741824"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != limit || limit != 1073741824/100*MemoryLimitPercent {
		t.Errorf("the runtime's soft memory limit is %d (returned %d), want %d", got, limit, 1073741824/100*MemoryLimitPercent)
	}
}
