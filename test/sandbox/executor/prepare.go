package executor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// errWaiting marks something the Pod waits for (a Secret, a ConfigMap, a ServiceAccount), as
// a kubelet keeps a Pod in ContainerCreating until its volumes can be mounted.
var errWaiting = errors.New("waiting")

// prepare writes the Pod's volumes (and, unless the Pod opts out of an automatic token, its
// ServiceAccount kubeconfig), waiting for what does not exist yet, and returns the environment
// the executor gives every container.
func (w *worker) prepare(ctx context.Context) ([]string, error) {
	reported := ""
	for {
		env, err := w.tryPrepare(ctx)
		if err == nil {
			return env, nil
		}
		if !errors.Is(err, errWaiting) {
			return nil, err
		}
		if msg := err.Error(); msg != reported {
			reported = msg
			log.FromContext(ctx).Info("pod waits", "for", msg)
			_ = w.e.updatePodStatus(ctx, w.spec, func(s *corev1.PodStatus) {
				s.Phase = corev1.PodPending
				s.ContainerStatuses = nil
				for _, c := range w.spec.Spec.Containers {
					s.ContainerStatuses = append(s.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
						State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating", Message: msg}}})
				}
			})
		}
		stopping, _, changed := w.stop.state()
		if stopping {
			return nil, errStopped
		}
		select {
		case <-changed:
			return nil, errStopped
		case <-ctx.Done():
			return nil, errStopped
		case <-time.After(time.Second):
		}
	}
}

func (w *worker) tryPrepare(ctx context.Context) ([]string, error) {
	// Listing is refused: a container finds a volume only through its own mounts.
	vols := filepath.Join(w.dir, "volumes")
	if err := os.MkdirAll(vols, 0o700); err != nil {
		return nil, fmt.Errorf("create volumes folder: %w", err)
	}
	if err := os.Chmod(vols, 0o711); err != nil {
		return nil, fmt.Errorf("protect volumes folder: %w", err)
	}
	w.tokens = nil
	for _, v := range w.spec.Spec.Volumes {
		if err := w.writeVolume(ctx, v); err != nil {
			return nil, err
		}
	}
	tf := w.e.opts.TerraformBinary
	env := []string{
		"PATH=" + filepath.Dir(tf) + string(os.PathListSeparator) + hostPath(),
		runnerapi.EnvBinary + "=" + tf,
	}
	if automount(w.spec) {
		kc, err := w.writeKubeconfig(ctx)
		if err != nil {
			return nil, err
		}
		env = append(env, runnerapi.EnvKubeConfigPath+"="+kc)
	}
	return env, nil
}

// automount reports whether the Pod's containers get a token from the executor without a
// volume asking for one: unless the Pod says automountServiceAccountToken: false.
func automount(pod *corev1.Pod) bool {
	return pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken
}

func hostPath() string {
	if p := os.Getenv("PATH"); p != "" {
		return p
	}
	return "/usr/local/bin:/usr/bin:/bin"
}

// volumeDir is the private folder of a volume.
func (w *worker) volumeDir(name string) string {
	if d, ok := w.vols[name]; ok {
		return d
	}
	return filepath.Join(w.dir, "volumes", name)
}

// file is one file of a volume.
type file struct {
	path string
	mode os.FileMode
	data []byte
}

// writeVolume materialises one volume into its folder.
func (w *worker) writeVolume(ctx context.Context, v corev1.Volume) error {
	dir := w.volumeDir(v.Name)
	switch {
	case v.EmptyDir != nil:
		return mkdir(dir)
	case v.Secret != nil:
		files, err := w.secretFiles(ctx, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, v.Secret.DefaultMode)
		if err != nil {
			return err
		}
		return writeFiles(dir, files)
	case v.ConfigMap != nil:
		files, err := w.configMapFiles(ctx, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, v.ConfigMap.DefaultMode)
		if err != nil {
			return err
		}
		return writeFiles(dir, files)
	case v.DownwardAPI != nil:
		files, err := w.downwardFiles(v.DownwardAPI.Items, v.DownwardAPI.DefaultMode)
		if err != nil {
			return err
		}
		return writeFiles(dir, files)
	case v.Projected != nil:
		return w.writeProjected(ctx, dir, v.Projected)
	}
	return fmt.Errorf("%w: volume %q is not a Secret, ConfigMap, downwardAPI, projected or emptyDir volume", errUnsupported, v.Name)
}

// writeProjected materialises a projected volume: every source into the one folder, a
// serviceAccountToken source as a real token of the Pod's ServiceAccount bound to the Pod.
func (w *worker) writeProjected(ctx context.Context, dir string, p *corev1.ProjectedVolumeSource) error {
	var files []file
	var tokens []*projectedToken
	for i, src := range p.Sources {
		switch {
		case src.ServiceAccountToken != nil:
			t := &projectedToken{volumeDir: dir, source: *src.ServiceAccountToken, mode: defaultMode(p.DefaultMode)}
			b, err := w.requestToken(ctx, t)
			if err != nil {
				return err
			}
			files = append(files, file{t.source.Path, t.mode, b})
			tokens = append(tokens, t)
		case src.ConfigMap != nil:
			mode := p.DefaultMode
			f, err := w.configMapFiles(ctx, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, mode)
			if err != nil {
				return err
			}
			files = append(files, f...)
		case src.Secret != nil:
			f, err := w.secretFiles(ctx, src.Secret.Name, src.Secret.Items, src.Secret.Optional, p.DefaultMode)
			if err != nil {
				return err
			}
			files = append(files, f...)
		case src.DownwardAPI != nil:
			f, err := w.downwardFiles(src.DownwardAPI.Items, p.DefaultMode)
			if err != nil {
				return err
			}
			files = append(files, f...)
		default:
			return fmt.Errorf("%w: source %d of a projected volume (serviceAccountToken, configMap, secret and downwardAPI sources only)", errUnsupported, i)
		}
	}
	if err := writeFiles(dir, files); err != nil {
		return err
	}
	w.tokens = append(w.tokens, tokens...)
	return nil
}

func defaultMode(m *int32) os.FileMode {
	if m != nil {
		return os.FileMode(*m)
	}
	return 0o644
}

func (w *worker) secretFiles(ctx context.Context, name string, items []corev1.KeyToPath, optional *bool, mode *int32) ([]file, error) {
	s := &corev1.Secret{}
	err := w.e.apiReader.Get(ctx, types.NamespacedName{Namespace: w.pod.Namespace, Name: name}, s)
	if apierrors.IsNotFound(err) {
		if optional != nil && *optional {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: secret %q not found", errWaiting, name)
	}
	if err != nil {
		return nil, fmt.Errorf("read secret %s: %w", name, err)
	}
	return keyFiles(s.Data, items, mode, optional != nil && *optional)
}

func (w *worker) configMapFiles(ctx context.Context, name string, items []corev1.KeyToPath, optional *bool, mode *int32) ([]file, error) {
	cm := &corev1.ConfigMap{}
	err := w.e.apiReader.Get(ctx, types.NamespacedName{Namespace: w.pod.Namespace, Name: name}, cm)
	if apierrors.IsNotFound(err) {
		if optional != nil && *optional {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: configmap %q not found", errWaiting, name)
	}
	if err != nil {
		return nil, fmt.Errorf("read configmap %s: %w", name, err)
	}
	data := map[string][]byte{}
	for k, s := range cm.Data {
		data[k] = []byte(s)
	}
	for k, b := range cm.BinaryData {
		data[k] = b
	}
	return keyFiles(data, items, mode, optional != nil && *optional)
}

// downwardFiles renders a downward API projection of the Pod's metadata.
func (w *worker) downwardFiles(items []corev1.DownwardAPIVolumeFile, mode *int32) ([]file, error) {
	var files []file
	for _, it := range items {
		if it.FieldRef == nil {
			return nil, fmt.Errorf("%w: downward API item %q (fieldRef items only)", errUnsupported, it.Path)
		}
		var v string
		switch f := it.FieldRef.FieldPath; f {
		case "metadata.labels":
			v = formatMap(w.spec.Labels)
		case "metadata.annotations":
			v = formatMap(w.spec.Annotations)
		default:
			var err error
			if v, err = w.fieldValue(f); err != nil {
				return nil, err
			}
		}
		m := defaultMode(mode)
		if it.Mode != nil {
			m = os.FileMode(*it.Mode)
		}
		files = append(files, file{it.Path, m, []byte(v)})
	}
	return files, nil
}

// formatMap renders labels or annotations as the kubelet does: key="value" lines, sorted.
func formatMap(m map[string]string) string {
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(k + "=" + strconv.Quote(m[k]))
	}
	return b.String()
}

func mkdir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return nil
}

// writeKeys writes a Secret's or ConfigMap's keys as files, as the kubelet projects them.
func writeKeys(dir string, data map[string][]byte, items []corev1.KeyToPath, defaultMode *int32) error {
	files, err := keyFiles(data, items, defaultMode, false)
	if err != nil {
		return err
	}
	return writeFiles(dir, files)
}

// keyFiles lists the files of a Secret's or ConfigMap's keys: every key, or only the items. A
// missing key waits, unless the source is optional.
func keyFiles(data map[string][]byte, items []corev1.KeyToPath, mode *int32, optional bool) ([]file, error) {
	var files []file
	if len(items) == 0 {
		for k, b := range data {
			files = append(files, file{k, defaultMode(mode), b})
		}
	}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("%w: key %q not found", errWaiting, it.Key)
		}
		m := defaultMode(mode)
		if it.Mode != nil {
			m = os.FileMode(*it.Mode)
		}
		files = append(files, file{it.Path, m, b})
	}
	return files, nil
}

// writeFiles replaces the content of a volume's folder with files.
func writeFiles(dir string, files []file) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clear %s: %w", dir, err)
	}
	if err := mkdir(dir); err != nil {
		return err
	}
	for _, f := range files {
		p, err := fileIn(dir, f.path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(p), err)
		}
		if err := os.WriteFile(p, f.data, f.mode.Perm()); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
	}
	return nil
}

// fileIn is the path of a volume file, which must stay inside the volume's folder.
func fileIn(dir, path string) (string, error) {
	p := filepath.Join(dir, filepath.FromSlash(path))
	if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
		return "", fmt.Errorf("%w: key path %q leaves the volume", errUnsupported, path)
	}
	return p, nil
}

// writeKubeconfig writes a kubeconfig with a token of the Pod's ServiceAccount, bound to the
// Pod (it stops working when the Pod is deleted), the way a projected token volume does.
func (w *worker) writeKubeconfig(ctx context.Context) (string, error) {
	sa := w.spec.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	// The token must outlive the run: the Job's deadline plus the termination grace.
	expiry := int64(3600)
	if ref := metav1.GetControllerOf(w.spec); ref != nil && ref.Kind == "Job" {
		job := &batchv1.Job{}
		if err := w.e.apiReader.Get(ctx, types.NamespacedName{Namespace: w.pod.Namespace, Name: ref.Name}, job); err == nil && job.Spec.ActiveDeadlineSeconds != nil {
			expiry = max(expiry, *job.Spec.ActiveDeadlineSeconds)
		}
	}
	if g := w.spec.Spec.TerminationGracePeriodSeconds; g != nil {
		expiry += *g
	}
	expiry += 600
	tr, err := w.e.clientset.CoreV1().ServiceAccounts(w.pod.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: &expiry,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: w.pod.Name, UID: w.uid},
		},
	}, metav1.CreateOptions{})
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("%w: serviceaccount %q not found", errWaiting, sa)
	}
	if err != nil {
		return "", fmt.Errorf("request a token of serviceaccount %s: %w", sa, err)
	}
	ca := w.e.restCfg.CAData
	if len(ca) == 0 && w.e.restCfg.CAFile != "" {
		if ca, err = os.ReadFile(w.e.restCfg.CAFile); err != nil {
			return "", fmt.Errorf("read api server ca: %w", err)
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["sandbox"] = &clientcmdapi.Cluster{Server: w.e.restCfg.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["sandbox"] = &clientcmdapi.Context{Cluster: "sandbox", AuthInfo: sa, Namespace: w.pod.Namespace}
	cfg.CurrentContext = "sandbox"
	path := filepath.Join(w.dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("write kubeconfig: %w", err)
	}
	return path, nil
}

// mount is a container path the executor maps to a local folder.
type mount struct{ path, local string }

// rewriter maps a value of container c (an argument, an environment value) that is a path
// into one of c's mounts to the volume's folder, the termination message path to c's
// termination file, and the runner inside the manager image to the runner binary. Paths into
// volumes c does not mount stay as they are: each container sees only its own volumes.
func (w *worker) rewriter(c *corev1.Container) (func(string) string, error) {
	var mounts []mount
	for _, m := range c.VolumeMounts {
		if m.SubPath != "" || m.SubPathExpr != "" {
			return nil, fmt.Errorf("%w: subPath mounts", errUnsupported)
		}
		mounts = append(mounts, mount{strings.TrimRight(m.MountPath, "/"), w.volumeDir(m.Name)})
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i].path) > len(mounts[j].path) })
	termPath := c.TerminationMessagePath
	if termPath == "" {
		termPath = corev1.TerminationMessagePathDefault
	}
	return func(v string) string {
		switch v {
		case runnerapi.RunnerInImage:
			return w.e.opts.RunnerBinary
		case termPath:
			return w.terminationFile(c)
		}
		for _, m := range mounts {
			if v == m.path || strings.HasPrefix(v, m.path+"/") {
				return m.local + strings.TrimPrefix(v, m.path)
			}
		}
		return v
	}, nil
}

// command is the container's command line with every path into one of its mounts (and the
// termination message path) rewritten to the Pod's folder, and the runner the manager image
// would hold replaced by the runner binary.
func (w *worker) command(c *corev1.Container) ([]string, error) {
	argv := append(append([]string{}, c.Command...), c.Args...)
	if len(argv) == 0 {
		return nil, fmt.Errorf("%w: container %s has no command (an image entrypoint needs a container runtime)", errUnsupported, c.Name)
	}
	rewrite, err := w.rewriter(c)
	if err != nil {
		return nil, err
	}
	for i, a := range argv {
		if name, value, ok := strings.Cut(a, "="); ok && strings.HasPrefix(name, "-") {
			argv[i] = name + "=" + rewrite(value)
			continue
		}
		argv[i] = rewrite(a)
	}
	// A runner whose module is not in a mount runs a module of its image: a relative folder is
	// relative to the image's working directory (the container's), an absolute one is in the
	// image's filesystem.
	if dir, ok := w.imageModuleDir(c); ok {
		if w.image == nil || !w.isMain(c) {
			return nil, fmt.Errorf("%w: the module is in the image %s, which was not pulled for container %s", errUnsupported, c.Image, c.Name)
		}
		for i, a := range argv {
			if _, ok := strings.CutPrefix(a, "--"+runnerapi.FlagModuleDir+"="); ok && filepath.IsAbs(dir) {
				argv[i] = "--" + runnerapi.FlagModuleDir + "=" + filepath.Join(w.image.root, filepath.Clean(dir))
			}
		}
	}
	if inPod := strings.HasPrefix(argv[0], w.dir+"/"); !inPod && argv[0] != w.e.opts.RunnerBinary {
		return nil, fmt.Errorf("%w: %s is a program of the image %s", errUnsupported, c.Command[0], c.Image)
	}
	return argv, nil
}

// containerEnv resolves the container's env and envFrom; a value that is a path into one of
// its mounts is rewritten as its arguments are.
func (w *worker) containerEnv(ctx context.Context, c *corev1.Container) ([]string, error) {
	rewrite, err := w.rewriter(c)
	if err != nil {
		return nil, err
	}
	var env []string
	for _, from := range c.EnvFrom {
		data, err := w.source(ctx, from.SecretRef, from.ConfigMapRef)
		if err != nil {
			return nil, err
		}
		for k, v := range data {
			env = append(env, from.Prefix+k+"="+v)
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+rewrite(e.Value))
			continue
		}
		v, err := w.valueFrom(ctx, e.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		env = append(env, e.Name+"="+v)
	}
	return env, nil
}

func (w *worker) source(ctx context.Context, s *corev1.SecretEnvSource, cm *corev1.ConfigMapEnvSource) (map[string]string, error) {
	out := map[string]string{}
	switch {
	case s != nil:
		sec := &corev1.Secret{}
		err := w.e.apiReader.Get(ctx, types.NamespacedName{Namespace: w.pod.Namespace, Name: s.Name}, sec)
		if apierrors.IsNotFound(err) && s.Optional != nil && *s.Optional {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read secret %s: %w", s.Name, err)
		}
		for k, b := range sec.Data {
			out[k] = string(b)
		}
	case cm != nil:
		m := &corev1.ConfigMap{}
		err := w.e.apiReader.Get(ctx, types.NamespacedName{Namespace: w.pod.Namespace, Name: cm.Name}, m)
		if apierrors.IsNotFound(err) && cm.Optional != nil && *cm.Optional {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read configmap %s: %w", cm.Name, err)
		}
		for k, v := range m.Data {
			out[k] = v
		}
	}
	return out, nil
}

func (w *worker) valueFrom(ctx context.Context, vf *corev1.EnvVarSource) (string, error) {
	switch {
	case vf.FieldRef != nil:
		return w.fieldValue(vf.FieldRef.FieldPath)
	case vf.SecretKeyRef != nil:
		r := vf.SecretKeyRef
		data, err := w.source(ctx, &corev1.SecretEnvSource{LocalObjectReference: r.LocalObjectReference, Optional: r.Optional}, nil)
		if err != nil {
			return "", err
		}
		return data[r.Key], nil
	case vf.ConfigMapKeyRef != nil:
		r := vf.ConfigMapKeyRef
		data, err := w.source(ctx, nil, &corev1.ConfigMapEnvSource{LocalObjectReference: r.LocalObjectReference, Optional: r.Optional})
		if err != nil {
			return "", err
		}
		return data[r.Key], nil
	}
	return "", fmt.Errorf("%w: this kind of env source", errUnsupported)
}

// fieldValue resolves a field of the Pod, as env valueFrom.fieldRef and the downward API do.
func (w *worker) fieldValue(f string) (string, error) {
	p := w.spec
	switch {
	case f == "metadata.name":
		return p.Name, nil
	case f == "metadata.namespace":
		return p.Namespace, nil
	case f == "metadata.uid":
		return string(p.UID), nil
	case f == "spec.nodeName":
		return w.e.opts.NodeName, nil
	case f == "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, nil
	case f == "status.podIP", f == "status.hostIP":
		return "127.0.0.1", nil
	case strings.HasPrefix(f, "metadata.labels['") && strings.HasSuffix(f, "']"):
		return p.Labels[strings.TrimSuffix(strings.TrimPrefix(f, "metadata.labels['"), "']")], nil
	case strings.HasPrefix(f, "metadata.annotations['") && strings.HasSuffix(f, "']"):
		return p.Annotations[strings.TrimSuffix(strings.TrimPrefix(f, "metadata.annotations['"), "']")], nil
	}
	return "", fmt.Errorf("%w: field %s", errUnsupported, f)
}
