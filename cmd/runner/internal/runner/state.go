package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// stateHeader is the part of a Terraform state file a restore looks at.
type stateHeader struct {
	Version   int
	Lineage   string
	Serial    uint64
	Resources int
	Outputs   int
}

// empty reports a state with no resources and no outputs: overwriting it loses nothing.
func (h stateHeader) empty() bool { return h.Resources == 0 && h.Outputs == 0 }

func parseStateHeader(b []byte) (stateHeader, error) {
	var s struct {
		Version   *int              `json:"version"`
		Lineage   string            `json:"lineage"`
		Serial    *uint64           `json:"serial"`
		Resources []json.RawMessage `json:"resources"`
		Outputs   map[string]any    `json:"outputs"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return stateHeader{}, errors.New("not a JSON state file")
	}
	if s.Version == nil || s.Serial == nil {
		return stateHeader{}, errors.New("not a state file: version or serial missing")
	}
	if *s.Version != 4 {
		return stateHeader{}, fmt.Errorf("state format version %d is not supported (want 4)", *s.Version)
	}
	return stateHeader{Version: *s.Version, Lineage: s.Lineage, Serial: *s.Serial, Resources: len(s.Resources), Outputs: len(s.Outputs)}, nil
}

// absentState reports that `state pull` found no state snapshot: it printed nothing, or the
// placeholder terraform prints for a remote backend with no state (no lineage, serial 0).
func absentState(pulled []byte) bool {
	if len(bytes.TrimSpace(pulled)) == 0 {
		return true
	}
	h, err := parseStateHeader(pulled)
	return err == nil && h.Lineage == "" && h.Serial == 0
}

// planRestore decides what a restore pushes, given the state in the backend now (the output of
// `state pull`, empty when there is none) and the state to restore. It never uses
// `state push -force`:
//   - an empty current state: push the backup as it is (any lineage); no state at all never
//     reaches planRestore (seedState writes the backup itself, keeping its lineage);
//   - the same lineage: push the backup with its serial raised above the current one, so
//     terraform accepts it as the newer snapshot (rolling back is the point of a restore);
//   - another lineage over a non-empty state: refuse. That backup belongs to other
//     infrastructure, or the state was rebuilt since; pushing it would orphan what the current
//     state tracks.
//
// It returns the bytes to push.
func planRestore(current []byte, backup []byte, h stateHeader) ([]byte, error) {
	if len(bytes.TrimSpace(current)) == 0 {
		return backup, nil
	}
	cur, err := parseStateHeader(current)
	if err != nil {
		return nil, fmt.Errorf("read the current state: %w", err)
	}
	if cur.Lineage != h.Lineage {
		if cur.empty() {
			return backup, nil
		}
		return nil, badInput("refusing to restore: the backup's lineage %s differs from the current state's %s, which still tracks %d resources and %d outputs",
			h.Lineage, cur.Lineage, cur.Resources, cur.Outputs)
	}
	if h.Serial > cur.Serial {
		return backup, nil
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(backup, &doc); err != nil {
		return nil, badInput("restore state is not a JSON object")
	}
	serial, err := json.Marshal(cur.Serial + 1)
	if err != nil {
		return nil, fmt.Errorf("encode serial: %w", err)
	}
	doc["serial"] = serial
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode restore state: %w", err)
	}
	return out, nil
}

func writePrivate(path string, b []byte) error {
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
