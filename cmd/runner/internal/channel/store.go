package channel

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// errNoObject: the state Secret or the lock Lease does not exist. The controller creates both
// before the first Job; the channel cannot (it holds no create permission).
var errNoObject = errors.New("missing")

// errChunked: the state Secret holds the first part of a state Terraform split over several
// Secrets, which the channel does not read.
var errChunked = errors.New("the state Secret holds part of a chunked state")

// store reads and writes one object's state Secret and lock Lease, in the layout of
// Terraform's kubernetes backend, and reads its run lease.
type store struct {
	kube      *kubeClient
	namespace string
	suffix    string
	secret    string
	lockLease string
	runLease  string
	// planSecret is the object's plan Secret (runnerapi.PlanSecretName).
	planSecret string
}

func newStore(kube *kubeClient, namespace, suffix, runLease string) *store {
	return &store{
		kube: kube, namespace: namespace, suffix: suffix, runLease: runLease,
		secret:     runnerapi.StateSecretName(suffix),
		lockLease:  runnerapi.StateLockLeaseName(suffix),
		planSecret: runnerapi.PlanSecretName(suffix),
	}
}

// readState returns the state JSON, or nil when there is none: no Secret, or a Secret without
// the tfstate key (which the controller creates empty), as the kubernetes backend treats both.
func (s *store) readState(ctx context.Context) ([]byte, error) {
	sec, err := s.kube.get(ctx, secretPath(s.namespace, s.secret))
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state secret: %w", err)
	}
	b64, ok := sec.dataValue(runnerapi.StateKey)
	if !ok {
		return nil, nil
	}
	return gunzipState(b64)
}

func gunzipState(b64 string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("decode state secret: %w", err)
	}
	if len(raw) == 0 {
		return nil, nil
	}
	out, err := runnerapi.DecodeState(raw)
	if de, ok := runnerapi.AsDecodeError(err); ok {
		switch {
		case de.Damaged && errors.Is(de.Err, io.ErrUnexpectedEOF):
			return nil, errChunked
		case de.TooLarge():
			return nil, fmt.Errorf("state is larger than %d bytes", runnerapi.MaxStateBytes)
		default:
			return nil, fmt.Errorf("gunzip state: %w", de.Err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("gunzip state: %w", err)
	}
	return out, nil
}

// errTooLarge: the gzip'd state does not fit one Secret (runnerapi.MaxSecretDataBytes).
// Terraform's kubernetes backend splits a larger state over several Secrets
// (tfstate-default-<suffix>-part-<n>); the channel, which may touch only the one Secret,
// refuses it instead. An uncompressed state it accepts or reads back is at most
// runnerapi.MaxStateBytes.
var errTooLarge = fmt.Errorf("the gzip'd state is larger than %d bytes, more than one state Secret holds", runnerapi.MaxSecretDataBytes)

// conflictRetries bounds the read-modify-write retries of a state write that met a conflict
// (the controller may patch the Secret's labels or finalizers meanwhile; nobody else writes
// the tfstate key while the run holds the lock).
const conflictRetries = 5

// writeState stores state in the Secret: gzip'd under tfstate, with the backend's labels and
// encoding annotation, keeping every other field. It never creates the Secret.
func (s *store) writeState(ctx context.Context, state []byte) error {
	gz, err := runnerapi.EncodeState(state)
	if err != nil {
		return fmt.Errorf("gzip state: %w", err)
	}
	if len(gz) > runnerapi.MaxSecretDataBytes {
		return errTooLarge
	}
	b64 := base64.StdEncoding.EncodeToString(gz)
	for attempt := 0; ; attempt++ {
		sec, err := s.kube.get(ctx, secretPath(s.namespace, s.secret))
		if isNotFound(err) {
			return fmt.Errorf("state secret %s/%s: %w", s.namespace, s.secret, errNoObject)
		}
		if err != nil {
			return fmt.Errorf("read state secret: %w", err)
		}
		sec.setData(runnerapi.StateKey, b64)
		sec.setStringMap("labels", s.backendLabels())
		encoding := runnerapi.StateEncodingGzip
		sec.setStringMap("annotations", map[string]*string{runnerapi.StateEncodingAnnotation: &encoding})
		_, err = s.kube.put(ctx, secretPath(s.namespace, s.secret), sec)
		if isConflict(err) && attempt < conflictRetries {
			continue
		}
		if err != nil {
			return fmt.Errorf("write state secret: %w", err)
		}
		return nil
	}
}

// backendLabels are the kubernetes backend's labels, to be set on the state Secret and the
// lock Lease.
func (s *store) backendLabels() map[string]*string {
	out := map[string]*string{}
	for k, v := range runnerapi.StateLabels(s.suffix) {
		out[k] = &v
	}
	return out
}

// getLock reads the lock Lease.
func (s *store) getLock(ctx context.Context) (object, error) {
	l, err := s.kube.get(ctx, leasePath(s.namespace, s.lockLease))
	if isNotFound(err) {
		return nil, fmt.Errorf("lock lease %s/%s: %w", s.namespace, s.lockLease, errNoObject)
	}
	if err != nil {
		return nil, fmt.Errorf("read lock lease: %w", err)
	}
	return l, nil
}

// putLock writes the lock Lease back; a changed resourceVersion makes it fail with a conflict.
func (s *store) putLock(ctx context.Context, l object) error {
	if _, err := s.kube.put(ctx, leasePath(s.namespace, s.lockLease), l); err != nil {
		return fmt.Errorf("write lock lease: %w", err)
	}
	return nil
}

// runLeaseHolder reads the run lease live and returns its holder ("" when it names none or
// does not exist).
func (s *store) runLeaseHolder(ctx context.Context) (string, error) {
	l, err := s.kube.get(ctx, leasePath(s.namespace, s.runLease))
	if isNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read run lease: %w", err)
	}
	return l.holder(), nil
}

// getJob and getPod read a Job or a Pod of the namespace live; a missing one is (nil, nil).
func (s *store) getJob(ctx context.Context, name string) (object, error) {
	return s.getOptional(ctx, jobPath(s.namespace, name))
}

func (s *store) getPod(ctx context.Context, name string) (object, error) {
	return s.getOptional(ctx, podPath(s.namespace, name))
}

func (s *store) getOptional(ctx context.Context, path string) (object, error) {
	o, err := s.kube.get(ctx, path)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return o, nil
}

// getPlanSecret reads the plan Secret; a missing one is errNoObject.
func (s *store) getPlanSecret(ctx context.Context) (object, error) {
	sec, err := s.kube.get(ctx, secretPath(s.namespace, s.planSecret))
	if isNotFound(err) {
		return nil, fmt.Errorf("the plan Secret %s/%s is %w", s.namespace, s.planSecret, errNoObject)
	}
	if err != nil {
		// Worded so the runner's redaction (which masks what follows "secret:") keeps it.
		return nil, fmt.Errorf("read the plan Secret %s: %w", s.planSecret, err)
	}
	return sec, nil
}

// putPlanSecret writes the plan Secret back; a changed resourceVersion makes it fail with a
// conflict.
func (s *store) putPlanSecret(ctx context.Context, sec object) error {
	if _, err := s.kube.put(ctx, secretPath(s.namespace, s.planSecret), sec); err != nil {
		return fmt.Errorf("write the plan Secret %s: %w", s.planSecret, err)
	}
	return nil
}

// gunzipBounded gunzips raw, refusing more than limit bytes of output (runnerapi.Gunzip).
func gunzipBounded(raw []byte, limit int) ([]byte, error) {
	out, err := runnerapi.Gunzip(raw, limit)
	if de, ok := runnerapi.AsDecodeError(err); ok && de.TooLarge() {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", errors.Unwrap(err))
	}
	return out, nil
}
