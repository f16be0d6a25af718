package executor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// defaultTokenExpiration is what the API server defaults a projected token's
// expirationSeconds to.
const defaultTokenExpiration = int64(3600)

// defaultRefreshFraction: a kubelet replaces a projected token once 80% of its life passed.
const defaultRefreshFraction = 0.8

// tokenRetry is how soon a failed token refresh is tried again.
const tokenRetry = 5 * time.Second

// projectedToken is one serviceAccountToken source of a projected volume.
type projectedToken struct {
	volumeDir string
	source    corev1.ServiceAccountTokenProjection
	mode      os.FileMode
	// expires is when the token in the file expires; next is when to replace it.
	expires, next time.Time
}

// requestToken asks the TokenRequest API for a token of the Pod's ServiceAccount, bound to the
// Pod, with the source's audience (none: the API server's own) and expiration.
func (w *worker) requestToken(ctx context.Context, t *projectedToken) ([]byte, error) {
	sa := w.spec.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	exp := defaultTokenExpiration
	if t.source.ExpirationSeconds != nil {
		exp = *t.source.ExpirationSeconds
	}
	spec := authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: w.pod.Name, UID: w.uid},
	}
	if t.source.Audience != "" {
		spec.Audiences = []string{t.source.Audience}
	}
	tr, err := w.e.clientset.CoreV1().ServiceAccounts(w.pod.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: serviceaccount %q not found", errWaiting, sa)
	}
	if err != nil {
		return nil, fmt.Errorf("request a token of serviceaccount %s: %w", sa, err)
	}
	t.expires = tr.Status.ExpirationTimestamp.Time
	t.next = w.e.refreshAt(time.Now(), t.expires)
	return []byte(tr.Status.Token), nil
}

// refreshAt is when a token issued at issued and expiring at expires is replaced: once the
// executor's refresh fraction of its life passed.
func (e *Executor) refreshAt(issued, expires time.Time) time.Time {
	f := e.refreshFraction
	if f <= 0 || f >= 1 {
		f = defaultRefreshFraction
	}
	return issued.Add(time.Duration(float64(expires.Sub(issued)) * f))
}

// refreshTokens replaces the Pod's projected tokens before they expire, as a kubelet does,
// until done is closed. A failed request is tried again after a few seconds.
func (w *worker) refreshTokens(ctx context.Context, done <-chan struct{}) {
	if len(w.tokens) == 0 {
		return
	}
	for {
		next := time.Time{}
		for _, t := range w.tokens {
			if next.IsZero() || t.next.Before(next) {
				next = t.next
			}
		}
		timer := time.NewTimer(time.Until(next))
		select {
		case <-done:
			timer.Stop()
			return
		case <-timer.C:
		}
		for _, t := range w.tokens {
			if time.Now().Before(t.next) {
				continue
			}
			if err := w.refreshToken(ctx, t); err != nil {
				log.FromContext(ctx).Error(err, "refresh a projected token; trying again shortly", "path", t.source.Path)
				t.next = time.Now().Add(tokenRetry)
			}
		}
	}
}

// refreshToken writes a new token in place of the old one, atomically: a reader sees the old
// file or the new one, never a partial one.
func (w *worker) refreshToken(ctx context.Context, t *projectedToken) error {
	b, err := w.requestToken(ctx, t)
	if err != nil {
		return err
	}
	p, err := fileIn(t.volumeDir, t.source.Path)
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".new")
	if err := os.WriteFile(tmp, b, t.mode.Perm()); err != nil {
		return fmt.Errorf("write token: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("replace token: %w", err)
	}
	log.FromContext(ctx).V(1).Info("projected token refreshed", "path", t.source.Path, "expires", t.expires)
	return nil
}
