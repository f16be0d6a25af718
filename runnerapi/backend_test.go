package runnerapi_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

func TestBackendNames(t *testing.T) {
	for got, want := range map[string]string{
		runnerapi.StateSecretName("0123456789abcdef"):    "tfstate-default-0123456789abcdef",
		runnerapi.StateLockLeaseName("0123456789abcdef"): "lock-tfstate-default-0123456789abcdef",
		runnerapi.PlanSecretName("0123456789abcdef"):     "captf-plan-0123456789abcdef",
	} {
		if got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
}

func TestStateCodec(t *testing.T) {
	state := []byte(`{"version": 4, "serial": 3, "lineage": "l"}`)
	gz, err := runnerapi.EncodeState(state)
	if err != nil {
		t.Fatal(err)
	}
	back, err := runnerapi.DecodeState(gz)
	if err != nil || !bytes.Equal(back, state) {
		t.Fatalf("round trip: %q, %v", back, err)
	}
	if _, err := runnerapi.DecodeState([]byte("{}")); !isDecodeError(err, func(e *runnerapi.DecodeError) bool { return e.NotGzip }) {
		t.Errorf("not gzip: %v", err)
	}
	_, err = runnerapi.DecodeState(gz[:len(gz)/2])
	if !isDecodeError(err, func(e *runnerapi.DecodeError) bool { return e.Damaged }) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut short: %v", err)
	}
	if _, err := runnerapi.Gunzip(gz, len(state)-1); !isDecodeError(err, (*runnerapi.DecodeError).TooLarge) {
		t.Errorf("over the limit: %v", err)
	}
	if _, err := runnerapi.Gunzip(gz, len(state)); err != nil {
		t.Errorf("at the limit: %v", err)
	}
}

func isDecodeError(err error, kind func(*runnerapi.DecodeError) bool) bool {
	de, ok := runnerapi.AsDecodeError(err)
	return ok && kind(de)
}

func TestPodTerminal(t *testing.T) {
	for phase, want := range map[corev1.PodPhase]bool{
		corev1.PodSucceeded: true, corev1.PodFailed: true,
		corev1.PodPending: false, corev1.PodRunning: false, corev1.PodUnknown: false, "": false,
	} {
		if got := runnerapi.PodTerminal(string(phase)); got != want {
			t.Errorf("%q: %t, want %t", phase, got, want)
		}
	}
}
