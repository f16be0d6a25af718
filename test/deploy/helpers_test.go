package deploy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// tool returns bin/<name>, built by `make test-bins`.
func tool(name string) (string, error) {
	root, err := envtest.RepoRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "bin", name)
	if fi, err := os.Stat(p); err != nil || fi.IsDir() {
		return "", fmt.Errorf("%s not found: run 'make test-bins' to build it from source", p)
	}
	return p, nil
}

// run runs a command and returns its stdout; a failure carries its stderr.
func run(dir string, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = env
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// cleanEnv is the environment without make's variables, so a nested make runs on its own.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES":
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// decode splits a multi-document YAML stream into objects.
func decode(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decode yaml: %w", err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// kustomizeBuild renders a folder of config/ with bin/kustomize.
func kustomizeBuild(dir string) ([]*unstructured.Unstructured, error) {
	kz, err := tool("kustomize")
	if err != nil {
		return nil, err
	}
	root, err := envtest.RepoRoot()
	if err != nil {
		return nil, err
	}
	out, err := run(root, nil, kz, "build", dir)
	if err != nil {
		return nil, err
	}
	return decode(out)
}

// objects indexes rendered objects by kind.
type objects []*unstructured.Unstructured

func (o objects) ofKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range o {
		if u.GetKind() == kind {
			out = append(out, u)
		}
	}
	return out
}

func (o objects) find(kind, namespace, name string) *unstructured.Unstructured {
	for _, u := range o {
		if u.GetKind() == kind && u.GetNamespace() == namespace && u.GetName() == name {
			return u
		}
	}
	return nil
}

// named returns the object of kind and name in any namespace (clusterctl gives cluster-scoped
// kinds it does not know, such as admission policies, the provider's namespace), or nil.
func (o objects) named(kind, name string) *unstructured.Unstructured {
	for _, u := range o {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}

// one returns the only object of kind, or an error.
func (o objects) one(kind string) (*unstructured.Unstructured, error) {
	all := o.ofKind(kind)
	if len(all) != 1 {
		return nil, fmt.Errorf("want exactly one %s, found %d", kind, len(all))
	}
	return all[0], nil
}

// as converts an object to a typed one.
func as[T any](u *unstructured.Unstructured) (*T, error) {
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("convert %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return out, nil
}

// freePort returns a TCP port nothing listens on right now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// argValue returns the value of --name=value in args.
func argValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func contextWithCancel() (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }

// managerIdentity is the identity the manager takes for itself when it runs from the
// Deployment: --manager-service-account when set, else the Pod's namespace and ServiceAccount,
// which the container's POD_NAMESPACE and POD_SERVICE_ACCOUNT must carry from the downward API
// (webhooks.ServiceAccountFromEnv), resolved here as the kubelet would.
func managerIdentity(d *appsv1.Deployment, c *corev1.Container) (string, error) {
	if v, ok := argValue(c.Args, "manager-service-account"); ok {
		return v, nil
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil {
			continue
		}
		switch e.ValueFrom.FieldRef.FieldPath {
		case "metadata.namespace":
			env[e.Name] = d.Namespace
		case "spec.serviceAccountName":
			env[e.Name] = d.Spec.Template.Spec.ServiceAccountName
		}
	}
	id := webhooks.ServiceAccountFromEnv(func(k string) string { return env[k] })
	if id == "" {
		return "", fmt.Errorf("the manager container sets neither --manager-service-account nor %s and %s from the downward API",
			webhooks.EnvPodNamespace, webhooks.EnvPodServiceAccount)
	}
	return id, nil
}

// memoryLimit is the soft memory limit the manager sets itself when it runs from the
// Deployment: setup.MemoryLimit of the container's environment, resolved as the kubelet would
// resolve a resourceFieldRef of the container's own limits.memory (in bytes, divisor 1).
func memoryLimit(c *corev1.Container) (int64, error) {
	env := map[string]string{}
	for _, e := range c.Env {
		if r := e.ValueFrom; r != nil && r.ResourceFieldRef != nil && r.ResourceFieldRef.ContainerName == c.Name &&
			r.ResourceFieldRef.Resource == "limits.memory" && (r.ResourceFieldRef.Divisor.IsZero() || r.ResourceFieldRef.Divisor.Value() == 1) {
			env[e.Name] = strconv.FormatInt(c.Resources.Limits.Memory().Value(), 10)
		}
	}
	return setup.MemoryLimit(func(k string) string { return env[k] })
}

// templateRef is a template a ClusterClass names.
type templateRef struct{ kind, name string }

// templateRefs lists every templateRef under a ClusterClass's spec (infrastructure, control
// plane, its machine infrastructure, and each worker class's bootstrap and infrastructure).
func templateRefs(class *unstructured.Unstructured) []templateRef {
	var out []templateRef
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["templateRef"].(map[string]any); ok {
				kind, _ := ref["kind"].(string)
				name, _ := ref["name"].(string)
				out = append(out, templateRef{kind, name})
			}
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(class.Object["spec"])
	return out
}
