package executor

import (
	"archive/tar"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// The reasons a kubelet gives a container whose image cannot be pulled.
const (
	// ReasonErrImagePull: the last pull failed; the message is the registry's answer.
	ReasonErrImagePull = "ErrImagePull"
	// ReasonImagePullBackOff: the node waits before it pulls again.
	ReasonImagePullBackOff = "ImagePullBackOff"
	// ReasonInvalidImageName: the reference cannot be parsed; no pull is tried again.
	ReasonInvalidImageName = "InvalidImageName"
)

// DefaultImagePullBackOff is the first wait after a failed pull; it doubles after each failure,
// up to maxImagePullBackOffFactor times itself (a kubelet waits 10 s doubling to 300 s).
const DefaultImagePullBackOff = 2 * time.Second

const maxImagePullBackOffFactor = 16

// moduleImage is the filesystem of an image module, unpacked into the Pod's folder.
type moduleImage struct {
	// root is the image's filesystem.
	root string
	// workingDir is the image config's WorkingDir inside root (root itself when it sets none).
	workingDir string
	// program is the host program that stands for the image's terraform or tofu ("" when the
	// image holds neither or the executor knows no host program of that name).
	program string
}

// imageModuleDir reports whether container c runs the runner on a module that is in its image
// (its --module-dir is in none of c's mounts), and that folder.
func (w *worker) imageModuleDir(c *corev1.Container) (string, bool) {
	argv := append(append([]string{}, c.Command...), c.Args...)
	if len(argv) < 2 || argv[1] != runnerapi.CommandRun {
		return "", false
	}
	for _, a := range argv[2:] {
		v, ok := strings.CutPrefix(a, "--"+runnerapi.FlagModuleDir+"=")
		if !ok {
			continue
		}
		for _, m := range c.VolumeMounts {
			p := strings.TrimRight(m.MountPath, "/")
			if v == p || strings.HasPrefix(v, p+"/") {
				return "", false
			}
		}
		return v, true
	}
	return "", false
}

// pullModuleImage pulls the image of container c as a kubelet does, with the Pod's
// imagePullSecrets, until it succeeds or the Pod stops: after each failure the container is
// Waiting with reason ErrImagePull and the registry's answer, then ImagePullBackOff while the
// node waits (doubling) before it pulls again. The Pod stays Pending meanwhile.
func (w *worker) pullModuleImage(ctx context.Context, c *corev1.Container) (*moduleImage, error) {
	logger := log.FromContext(ctx).WithValues("container", c.Name, "image", c.Image)
	backOff := w.e.opts.ImagePullBackOff
	for {
		img, err := w.pullOnce(ctx, c)
		if err == nil {
			return img, nil
		}
		if errors.Is(err, errUnsupported) {
			return nil, err
		}
		reason, msg := ReasonErrImagePull, err.Error()
		var invalid *name.ErrBadName
		if errors.As(err, &invalid) {
			reason = ReasonInvalidImageName
		}
		logger.Info("image pull failed", "reason", reason, "message", msg, "retryIn", backOff)
		w.reportWaiting(ctx, c, reason, msg)
		if reason == ReasonInvalidImageName {
			// A kubelet never pulls a reference it cannot parse again: the Pod waits until
			// it is deleted.
			backOff = 0
		}
		if err := w.waitOrStop(ctx, time.Second); err != nil {
			return nil, err
		}
		if reason == ReasonErrImagePull {
			w.reportWaiting(ctx, c, ReasonImagePullBackOff, fmt.Sprintf("Back-off pulling image %q: %s: %s", c.Image, ReasonErrImagePull, msg))
		}
		wait := backOff
		if wait == 0 {
			wait = time.Hour
		}
		if err := w.waitOrStop(ctx, wait); err != nil {
			return nil, err
		}
		backOff = min(2*backOff, maxImagePullBackOffFactor*w.e.opts.ImagePullBackOff)
	}
}

// waitOrStop waits for d, or returns errStopped as soon as the Pod is stopping.
func (w *worker) waitOrStop(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		stopping, _, changed := w.stop.state()
		if stopping {
			return errStopped
		}
		select {
		case <-t.C:
			return nil
		case <-changed:
		case <-ctx.Done():
			return errStopped
		}
	}
}

// reportWaiting writes the Pod's status while its main container waits for its image: Pending,
// the init containers as they are (the sidecars run), the main container Waiting.
func (w *worker) reportWaiting(ctx context.Context, c *corev1.Container, reason, msg string) {
	inits := w.initStatuses()
	if err := w.e.updatePodStatus(ctx, w.spec, func(s *corev1.PodStatus) {
		now := metav1.Now()
		s.Phase = corev1.PodPending
		if s.StartTime == nil {
			s.StartTime = &now
		}
		s.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: now,
				Message: fmt.Sprintf("containers with unready status: [%s]", c.Name)},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: now,
				Message: fmt.Sprintf("containers with unready status: [%s]", c.Name)},
		}
		if len(inits) > 0 {
			s.InitContainerStatuses = inits
		}
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: c.Name, Image: c.Image, Started: ptrTo(false),
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
	}); err != nil {
		log.FromContext(ctx).Error(err, "report the image pull")
	}
}

// pullOnce pulls c's image with the Pod's pull secrets and unpacks it into the Pod's folder.
func (w *worker) pullOnce(ctx context.Context, c *corev1.Container) (*moduleImage, error) {
	ref, err := name.ParseReference(c.Image)
	if err != nil {
		return nil, fmt.Errorf("failed to pull image %q: %w", c.Image, err)
	}
	creds, err := w.pullCredentials(ctx, ref.Context().RegistryStr())
	if err != nil {
		return nil, err
	}
	img, err := pull(ctx, ref, creds)
	if err != nil {
		return nil, fmt.Errorf("failed to pull image %q: %w", c.Image, err)
	}
	root := filepath.Join(w.dir, "image", "rootfs")
	if err := os.RemoveAll(filepath.Dir(root)); err != nil {
		return nil, fmt.Errorf("clear image folder: %w", err)
	}
	if err := unpack(img, root); err != nil {
		return nil, fmt.Errorf("failed to unpack image %q: %w", c.Image, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("failed to read the config of image %q: %w", c.Image, err)
	}
	m := &moduleImage{root: root, workingDir: root}
	if wd := cf.Config.WorkingDir; wd != "" {
		m.workingDir = filepath.Join(root, filepath.FromSlash(path.Clean("/"+wd)))
		if err := os.MkdirAll(m.workingDir, 0o755); err != nil {
			return nil, fmt.Errorf("create the image's working directory: %w", err)
		}
	}
	m.program = w.imageProgram(root, cf.Config.Env)
	return m, nil
}

// pull fetches the image with each credential in turn (the first that works wins), or
// anonymously when there is none, as a kubelet tries the pull secrets that match the
// registry.
func pull(ctx context.Context, ref name.Reference, creds []authn.AuthConfig) (v1.Image, error) {
	if len(creds) == 0 {
		return remote.Image(ref, remote.WithContext(ctx), remote.WithAuth(authn.Anonymous))
	}
	var errs []error
	for _, cr := range creds {
		img, err := remote.Image(ref, remote.WithContext(ctx), remote.WithAuth(authn.FromConfig(cr)))
		if err == nil {
			return img, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// pullCredentials lists the credentials the Pod's imagePullSecrets hold for registry, in the
// order of the secrets. A secret that does not exist or holds no credential for registry is
// passed over, as a kubelet passes over a pull secret it cannot use.
func (w *worker) pullCredentials(ctx context.Context, registry string) ([]authn.AuthConfig, error) {
	var out []authn.AuthConfig
	for _, ref := range w.spec.Spec.ImagePullSecrets {
		s := &corev1.Secret{}
		err := w.e.apiReader.Get(ctx, types.NamespacedName{Namespace: w.pod.Namespace, Name: ref.Name}, s)
		if apierrors.IsNotFound(err) {
			log.FromContext(ctx).Info("image pull secret not found; pulling without it", "secret", ref.Name)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read image pull secret %s: %w", ref.Name, err)
		}
		out = append(out, dockerCredentials(s, registry)...)
	}
	return out, nil
}

// dockerEntry is one registry's entry of a docker config.
type dockerEntry struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Auth     string `json:"auth"`
}

// dockerCredentials reads the credentials for registry from a kubernetes.io/dockerconfigjson
// (or the older kubernetes.io/dockercfg) Secret; other Secrets hold none.
func dockerCredentials(s *corev1.Secret, registry string) []authn.AuthConfig {
	var auths map[string]dockerEntry
	switch s.Type {
	case corev1.SecretTypeDockerConfigJson:
		var cfg struct {
			Auths map[string]dockerEntry `json:"auths"`
		}
		if json.Unmarshal(s.Data[corev1.DockerConfigJsonKey], &cfg) != nil {
			return nil
		}
		auths = cfg.Auths
	case corev1.SecretTypeDockercfg:
		if json.Unmarshal(s.Data[corev1.DockerConfigKey], &auths) != nil {
			return nil
		}
	default:
		return nil
	}
	var out []authn.AuthConfig
	for key, e := range auths {
		if registryOfKey(key) != registry {
			continue
		}
		user, pass := e.Username, e.Password
		if e.Auth != "" {
			if b, err := base64.StdEncoding.DecodeString(e.Auth); err == nil {
				if u, p, ok := strings.Cut(string(b), ":"); ok {
					user, pass = u, p
				}
			}
		}
		out = append(out, authn.AuthConfig{Username: user, Password: pass})
	}
	return out
}

// registryOfKey is the registry host:port a docker config key names ("https://host/v1/",
// "host", "http://host").
func registryOfKey(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	host, _, _ := strings.Cut(key, "/")
	return host
}

// imageProgram is the host program standing for the terraform or tofu the image holds: the
// first of tofu and terraform (the runner's own order) found in a folder of the image's PATH
// (default /usr/local/bin:/usr/bin:/bin) for which the executor has a host program.
func (w *worker) imageProgram(root string, env []string) string {
	dirs := "/usr/local/bin:/usr/bin:/bin"
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			dirs = v
		}
	}
	for _, prog := range []string{"tofu", "terraform"} {
		host := w.e.opts.ImagePrograms[prog]
		if host == "" {
			continue
		}
		for _, d := range filepath.SplitList(dirs) {
			if st, err := os.Lstat(filepath.Join(root, filepath.FromSlash(path.Clean("/"+d)), prog)); err == nil && !st.IsDir() {
				return host
			}
		}
	}
	return ""
}

// unpack writes the image's filesystem into root: go-containerregistry flattens the layers
// (an upper layer's whiteout removes what the layers below hold, an opaque folder hides their
// content), and unpack writes folders, regular files, symbolic links and hard links. A path
// or link that would leave root is refused, and so is any other kind of entry (devices,
// fifos), with its name.
func unpack(img v1.Image, root string) error {
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", root, err)
	}
	tr := tar.NewReader(rc)
	var links [][2]string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			for _, l := range links {
				if err := os.Link(l[0], l[1]); err != nil {
					return fmt.Errorf("create hard link: %w", err)
				}
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read layers: %w", err)
		}
		if strings.HasPrefix(path.Base(h.Name), ".wh.") {
			return fmt.Errorf("%w: whiteout %s left after flattening the layers", errUnsupported, h.Name)
		}
		p, err := inRoot(root, h.Name)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(p), err)
		}
		mode := os.FileMode(h.Mode).Perm() | 0o200 // the owner (the sandbox) may clear it
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, mode|0o700); err != nil {
				return fmt.Errorf("create %s: %w", h.Name, err)
			}
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
			if err != nil {
				return fmt.Errorf("create %s: %w", h.Name, err)
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("write %s: %w", h.Name, err)
			}
		case tar.TypeSymlink:
			// An absolute target means a path of the image: point it into root.
			target := h.Linkname
			if path.IsAbs(target) {
				target = filepath.Join(root, filepath.FromSlash(path.Clean(target)))
			} else if _, err := inRoot(root, path.Join(path.Dir(h.Name), target)); err != nil {
				return fmt.Errorf("%w: symbolic link %s -> %s leaves the image", errUnsupported, h.Name, h.Linkname)
			}
			if err := os.Symlink(target, p); err != nil {
				return fmt.Errorf("create link %s: %w", h.Name, err)
			}
		case tar.TypeLink:
			old, err := inRoot(root, h.Linkname)
			if err != nil {
				return err
			}
			// The flattened layers come upper layer first: the file may be written later.
			links = append(links, [2]string{old, p})
		default:
			return fmt.Errorf("%w: %s is a tar entry of type %q (folders, files and links only)", errUnsupported, h.Name, h.Typeflag)
		}
	}
}

// inRoot is the local path of an image path, which must stay inside root.
func inRoot(root, name string) (string, error) {
	clean := path.Clean(strings.TrimPrefix(strings.ReplaceAll(name, "\\", "/"), "/"))
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%w: image path %q leaves the image", errUnsupported, name)
	}
	return filepath.Join(root, filepath.FromSlash(clean)), nil
}
