package channel

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// kubeClient is the smallest client of the Kubernetes API the channel needs: GET and PUT of
// single named objects as JSON. It keeps the runner binary free of client-go. The bearer token
// is read from its file on every request, so a token the kubelet rotated is used at once.
type kubeClient struct {
	base      string
	tokenFile string
	http      *http.Client
}

// requestTimeout bounds one API request.
const requestTimeout = 15 * time.Second

// maxObjectBytes bounds a response body (a Secret is at most 1 MiB, plus its metadata).
const maxObjectBytes = 4 << 20

func newKubeClient(server, caFile, tokenFile string) (*kubeClient, error) {
	u, err := url.Parse(server)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("api server %q is not an https URL", server)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read ca file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ca file %s holds no PEM certificate", caFile)
	}
	if _, err := readToken(tokenFile); err != nil {
		return nil, err
	}
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	return &kubeClient{base: strings.TrimRight(server, "/"), tokenFile: tokenFile, http: &http.Client{Transport: tr, Timeout: requestTimeout}}, nil
}

func readToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", file)
	}
	return tok, nil
}

// apiError is a non-2xx answer of the API server.
type apiError struct {
	Code    int
	Reason  string
	Message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("api server answered %d %s: %s", e.Code, e.Reason, e.Message)
}

func isStatus(err error, code int) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Code == code
}

func isNotFound(err error) bool { return isStatus(err, http.StatusNotFound) }
func isConflict(err error) bool { return isStatus(err, http.StatusConflict) }

// object is a Kubernetes object as decoded JSON. Updating through it keeps every field the
// channel does not know (finalizers, owner references, managed fields), which a typed subset
// would drop.
type object map[string]any

// get reads one object. path is the object's API path, e.g. /api/v1/namespaces/ns/secrets/x.
func (c *kubeClient) get(ctx context.Context, path string) (object, error) {
	return c.do(ctx, http.MethodGet, path, nil)
}

// put replaces one object; its metadata.resourceVersion makes the write conditional.
func (c *kubeClient) put(ctx context.Context, path string, o object) (object, error) {
	return c.do(ctx, http.MethodPut, path, o)
}

func (c *kubeClient) do(ctx context.Context, method, path string, body object) (object, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	tok, err := readToken(c.tokenFile)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "captf-state-channel")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxObjectBytes))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var st struct {
			Reason  string `json:"reason"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(raw, &st)
		return nil, &apiError{Code: resp.StatusCode, Reason: st.Reason, Message: st.Message}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out object
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	return out, nil
}

func (o object) meta() map[string]any { return o.child("metadata") }

// child returns the map under key, creating it when absent.
func (o object) child(key string) map[string]any {
	m, _ := o[key].(map[string]any)
	if m == nil {
		m = map[string]any{}
		o[key] = m
	}
	return m
}

func strOf(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func (o object) name() string { return strOf(o.meta(), "name") }
func (o object) uid() string  { return strOf(o.meta(), "uid") }

func (o object) stringMap(key string) map[string]string {
	out := map[string]string{}
	m, _ := o.meta()[key].(map[string]any)
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

func (o object) labels() map[string]string      { return o.stringMap("labels") }
func (o object) annotations() map[string]string { return o.stringMap("annotations") }

// setStringMap sets (value non-nil) or removes (nil) entries of labels or annotations.
func (o object) setStringMap(key string, set map[string]*string) {
	meta := o.meta()
	m, _ := meta[key].(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	for k, v := range set {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = *v
		}
	}
	if len(m) == 0 {
		delete(meta, key)
		return
	}
	meta[key] = m
}

// controllerUID returns the UID of the object's controller owner reference, if any.
func (o object) controllerUID() string {
	refs, _ := o.meta()["ownerReferences"].([]any)
	for _, r := range refs {
		ref, _ := r.(map[string]any)
		if c, _ := ref["controller"].(bool); c {
			s, _ := ref["uid"].(string)
			return s
		}
	}
	return ""
}

// spec returns the object's spec, creating it when absent.
func (o object) spec() map[string]any { return o.child("spec") }

// holder is a Lease's spec.holderIdentity ("" when unset).
func (o object) holder() string {
	m, _ := o["spec"].(map[string]any)
	s, _ := m["holderIdentity"].(string)
	return s
}

// setHolder sets a Lease's holderIdentity, or clears it for "".
func (o object) setHolder(id string) {
	if id == "" {
		delete(o.spec(), "holderIdentity")
		return
	}
	o.spec()["holderIdentity"] = id
}

// phase is a Pod's status.phase.
func (o object) phase() string {
	m, _ := o["status"].(map[string]any)
	s, _ := m["phase"].(string)
	return s
}

// dataValue returns a Secret's data[key] (base64 as the API sends it) and whether it is set.
func (o object) dataValue(key string) (string, bool) {
	m, _ := o["data"].(map[string]any)
	v, ok := m[key].(string)
	return v, ok
}

// setAllData replaces a Secret's data with exactly these keys (base64 values).
func (o object) setAllData(data map[string]string) {
	m := make(map[string]any, len(data))
	for k, v := range data {
		m[k] = v
	}
	o["data"] = m
	delete(o, "stringData")
}

func (o object) setData(key, b64 string) {
	m, _ := o["data"].(map[string]any)
	if m == nil {
		m = map[string]any{}
		o["data"] = m
	}
	m[key] = b64
}

// API paths of the objects the channel reads and writes.
func secretPath(ns, name string) string {
	return "/api/v1/namespaces/" + url.PathEscape(ns) + "/secrets/" + url.PathEscape(name)
}

func leasePath(ns, name string) string {
	return "/apis/coordination.k8s.io/v1/namespaces/" + url.PathEscape(ns) + "/leases/" + url.PathEscape(name)
}

func jobPath(ns, name string) string {
	return "/apis/batch/v1/namespaces/" + url.PathEscape(ns) + "/jobs/" + url.PathEscape(name)
}

func podPath(ns, name string) string {
	return "/api/v1/namespaces/" + url.PathEscape(ns) + "/pods/" + url.PathEscape(name)
}
