package envtest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// APIServerAudiences returns the audiences the API server puts into a ServiceAccount token
// that asks for none: its own (--api-audiences, by default the issuer; envtest's issuer is
// https://<its address>/). The token is requested for account, which must exist.
func APIServerAudiences(ctx context.Context, c client.Client, account types.NamespacedName) ([]string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: account.Namespace, Name: account.Name}}
	req := &authenticationv1.TokenRequest{}
	if err := c.SubResource("token").Create(ctx, sa, req); err != nil {
		return nil, fmt.Errorf("request a token for %s: %w", account, err)
	}
	parts := strings.Split(req.Status.Token, ".")
	if len(parts) != 3 {
		return nil, errors.New("the token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("decode the token's claims: %w", err)
	}
	var claims struct {
		Aud []string `json:"aud"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return nil, fmt.Errorf("parse the token's claims: %w", err)
	}
	if len(claims.Aud) == 0 {
		return nil, errors.New("the token names no audience")
	}
	return claims.Aud, nil
}
