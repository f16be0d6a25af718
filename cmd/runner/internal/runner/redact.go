package runner

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// Mask replaces every secret the runner finds in what it reports.
const Mask = "[REDACTED]"

// MinRedactLength is the shortest redact.json value the runner masks: masking one to three
// characters would garble ordinary output (digits, "true") and such a value protects nothing.
const MinRedactLength = 4

// secretPatterns mask text that looks like a credential even when redact.json does not name it.
// Each keeps the context (a key name, "Bearer ") and masks only the secret part.
var secretPatterns = []struct {
	re   *regexp.Regexp
	repl string
}{
	// A whole PEM private key (multi-line; the line filter handles keys split over lines).
	{regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)`), Mask},
	// key = value, key: value, "key": "value" for credential-like keys. A value starting with
	// "(" is terraform's own "(sensitive value)" placeholder and stays.
	{regexp.MustCompile(`(?i)((?:password|passwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|client[_-]?secret|credentials?)["']?\s*[:=]\s*["']?)([^\s"',;(][^\s"',;]{3,})`), "${1}" + Mask},
	// Authorization: Bearer <token>.
	{regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9\-._~+/]{8,}=*`), "${1}" + Mask},
	// user:password@ in URLs.
	{regexp.MustCompile(`(://[^/\s:@]+:)[^/\s@]+@`), "${1}" + Mask + "@"},
	// JSON Web Tokens (service account tokens among them).
	{regexp.MustCompile(`eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`), Mask},
	// AWS access key ids, GitHub, Slack and Google API tokens.
	{regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), Mask},
	{regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{36,}\b`), Mask},
	{regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9-]{10,}\b`), Mask},
	{regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}\b`), Mask},
}

var (
	pemBegin = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----`)
	pemEnd   = regexp.MustCompile(`-----END [A-Z0-9 ]*PRIVATE KEY-----`)
)

// Redactor masks the values of redact.json and secret-looking patterns.
type Redactor struct {
	literals *strings.Replacer
}

// NewRedactor masks each value of at least MinRedactLength characters, its JSON-escaped form,
// and each line of a multi-line value, the longest first.
func NewRedactor(values []string) *Redactor {
	set := map[string]struct{}{}
	add := func(s string) {
		if len(s) >= MinRedactLength {
			set[s] = struct{}{}
		}
	}
	for _, v := range values {
		add(v)
		if b, err := json.Marshal(v); err == nil {
			add(strings.Trim(string(b), `"`))
		}
		if strings.ContainsAny(v, "\r\n") {
			for _, line := range strings.FieldsFunc(v, func(r rune) bool { return r == '\n' || r == '\r' }) {
				add(strings.TrimSpace(line))
			}
		}
	}
	// strings.Replacer tries the old strings in argument order at each position: longest
	// first, so a secret that contains another is masked whole.
	lits := runnerapi.LongestFirst(set)
	pairs := make([]string, 0, 2*len(lits))
	for _, s := range lits {
		pairs = append(pairs, s, Mask)
	}
	return &Redactor{literals: strings.NewReplacer(pairs...)}
}

// Redact masks secrets in s.
func (r *Redactor) Redact(s string) string {
	if r != nil && r.literals != nil {
		s = r.literals.Replace(s)
	}
	for _, p := range secretPatterns {
		s = p.re.ReplaceAllString(s, p.repl)
	}
	return s
}

// TokenEnvPrefix starts the variables terraform and tofu read a registry host's token from
// (jobs.TokenEnvName builds them from spec.job.cliConfig.credentials).
const TokenEnvPrefix = "TF_TOKEN_"

// registryTokens are the values of the TF_TOKEN_* variables of environ: registry tokens the
// runner masks whether or not redact.json lists them (the controller lists them too), so a
// module that prints one shows it masked in the log, the result and every message made of it.
func registryTokens(environ []string) []string {
	var out []string
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, TokenEnvPrefix) && v != "" {
			out = append(out, v)
		}
	}
	return out
}
