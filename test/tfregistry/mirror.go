package tfregistry

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
)

// Provider is one provider release the server's network mirror serves: its address, version,
// platform and the provider's executable.
type Provider struct {
	// Hostname, Namespace and Type are the provider's source address
	// (registry.terraform.io/captf-test/echo).
	Hostname, Namespace, Type string
	Version                   string
	// OS and Arch are the platform (linux, amd64).
	OS, Arch string
	// Executable is the provider binary, packed as terraform-provider-<type>_v<version>.
	Executable []byte
}

// MirrorURL is the base URL of the provider network mirror, for a CLI configuration's
// provider_installation { network_mirror { url = ... } }.
func (s *Server) MirrorURL() string { return s.URL + "/mirror/" }

// AddProvider packs p into a zip archive and lays it out as the provider network mirror
// protocol asks: <hostname>/<namespace>/<type>/index.json listing the versions,
// <version>.json naming each platform's archive with its zh: hash (the SHA-256 of the zip),
// and the archive itself. It returns the zh: hash. Call it before the server is used.
func (s *Server) AddProvider(p Provider) (string, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: fmt.Sprintf("terraform-provider-%s_v%s", p.Type, p.Version), Method: zip.Deflate}
	h.SetMode(0o755)
	w, err := zw.CreateHeader(h)
	if err != nil {
		return "", fmt.Errorf("zip provider: %w", err)
	}
	if _, err := w.Write(p.Executable); err != nil {
		return "", fmt.Errorf("zip provider: %w", err)
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("zip provider: %w", err)
	}
	sum := sha256.Sum256(buf.Bytes())
	zh := "zh:" + hex.EncodeToString(sum[:])
	dir := path.Join(p.Hostname, p.Namespace, p.Type)
	archive := fmt.Sprintf("terraform-provider-%s_%s_%s_%s.zip", p.Type, p.Version, p.OS, p.Arch)
	index, err := json.Marshal(map[string]any{"versions": map[string]any{p.Version: map[string]any{}}})
	if err != nil {
		return "", fmt.Errorf("index.json: %w", err)
	}
	version, err := json.Marshal(map[string]any{"archives": map[string]any{
		p.OS + "_" + p.Arch: map[string]any{"url": archive, "hashes": []string{zh}}}})
	if err != nil {
		return "", fmt.Errorf("%s.json: %w", p.Version, err)
	}
	s.mirror[path.Join(dir, "index.json")] = index
	s.mirror[path.Join(dir, p.Version+".json")] = version
	s.mirror[path.Join(dir, archive)] = buf.Bytes()
	return zh, nil
}

// EchoProviderEnv names the provider binary the mirror tests install; the Makefile exports it
// as bin/terraform-provider-echo.
const EchoProviderEnv = "CAPTF_TEST_ECHO_PROVIDER"

// EchoProvider is the echo provider (testdata/echo-provider) as providers.captf.test/captf-test/echo
// 1.0.0 for this machine's platform, read from $CAPTF_TEST_ECHO_PROVIDER, else from
// $BIN_DIR/terraform-provider-echo. It fails, never skips, when neither names the binary.
func EchoProvider() (Provider, error) {
	p := os.Getenv(EchoProviderEnv)
	if p == "" && os.Getenv("BIN_DIR") != "" {
		p = filepath.Join(os.Getenv("BIN_DIR"), "terraform-provider-echo")
	}
	if p == "" {
		return Provider{}, fmt.Errorf("set %s (or BIN_DIR) to the echo provider; build it with: hack/build-bin.sh echo-provider", EchoProviderEnv)
	}
	exe, err := os.ReadFile(p)
	if err != nil {
		return Provider{}, fmt.Errorf("read the echo provider (build it with: hack/build-bin.sh echo-provider): %w", err)
	}
	return Provider{Hostname: "providers.captf.test", Namespace: "captf-test", Type: "echo", Version: "1.0.0",
		OS: runtime.GOOS, Arch: runtime.GOARCH, Executable: exe}, nil
}
