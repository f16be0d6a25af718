package main

import (
	"bytes"
	"testing"
)

func TestWarningsOnlyHidesInfoAndDebugRecords(t *testing.T) {
	var out bytes.Buffer
	w := &warningsOnly{out: &out}
	in := "[sandbox manager] 2026-12-03T07:36:20Z\tINFO\tcontroller-runtime.webhook\tRegistering webhook\n" +
		"[sandbox manager] 2026-12-03T07:36:20Z\tDEBUG\tevents\tsome event\n" +
		"[sandbox manager] 2026-12-03T07:36:21Z\tWARN\tplans\tno approver group\n" +
		"[sandbox manager] 2026-12-03T07:36:22Z\tERROR\treconcile\tfailed\n" +
		"panic: something\n"
	// Written in pieces that split lines, as a pipe may deliver them.
	for i := 0; i < len(in); i += 7 {
		end := min(i+7, len(in))
		if _, err := w.Write([]byte(in[i:end])); err != nil {
			t.Fatal(err)
		}
	}
	want := "[sandbox manager] 2026-12-03T07:36:21Z\tWARN\tplans\tno approver group\n" +
		"[sandbox manager] 2026-12-03T07:36:22Z\tERROR\treconcile\tfailed\n" +
		"panic: something\n"
	if got := out.String(); got != want {
		t.Errorf("console got\n%q\nwant\n%q", got, want)
	}
}
