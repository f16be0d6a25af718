package registry

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// File is one entry of an image layer.
type File struct {
	// Path is relative to the image's root, slash separated ("workspace/main.tf"). A base
	// name starting with ".wh." is a whiteout: it deletes that name of the layers below
	// (".wh..wh..opq" hides everything the layers below hold in its folder).
	Path string
	// Mode is the file's permission bits (default 0644).
	Mode int64
	Data []byte
	// Link, when set, makes the entry a symbolic link to Link.
	Link string
}

// epoch is every entry's modification time, so the same files make the same layer digest.
var epoch = time.Unix(0, 0).UTC()

// Layer is an uncompressed-tar layer of files, with the folders they need, in path order.
func Layer(files ...File) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	sorted := append([]File(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	for _, f := range sorted {
		p := strings.TrimPrefix(path.Clean("/"+f.Path), "/")
		if p == "" {
			return nil, fmt.Errorf("layer: empty path")
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{Name: p, Mode: mode, Size: int64(len(f.Data)), Typeflag: tar.TypeReg, ModTime: epoch, Format: tar.FormatPAX}
		if f.Link != "" {
			h = &tar.Header{Name: p, Mode: 0o777, Typeflag: tar.TypeSymlink, Linkname: f.Link, ModTime: epoch, Format: tar.FormatPAX}
		}
		if err := writeDirs(tw, p, dirs); err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer: %s: %w", p, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.Data); err != nil {
				return nil, fmt.Errorf("layer: %s: %w", p, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return l, nil
}

// writeDirs writes the folders above p that this layer has not written yet, outermost first.
func writeDirs(tw *tar.Writer, p string, written map[string]bool) error {
	var missing []string
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if written[d+"/"] {
			break
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		d := missing[i]
		written[d+"/"] = true
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return fmt.Errorf("layer: %s: %w", d, err)
		}
	}
	return nil
}

// ModuleImage describes an image that ships a Terraform module, as a platform team builds one
// FROM a terraform or tofu image.
type ModuleImage struct {
	// WorkingDir is the image's WORKDIR (absolute). Empty: none ("/").
	WorkingDir string
	// Files are the module's files, by path relative to WorkingDir.
	Files map[string]string
	// Program is the terraform or tofu the image holds, "tofu" or "terraform": the image gets
	// an executable placeholder at /usr/local/bin/<Program> and PATH names that folder. The
	// sandbox runs no program of an image; its node runs the host's program of that name
	// instead (executor.Options.ImagePrograms). Empty: the image holds neither.
	Program string
	// Layers go on top of the module's layer, in order (a provider cache, whiteouts).
	Layers []v1.Layer
}

// Build makes the image: the program's layer, the module's layer, then Layers; its config
// sets WorkingDir and PATH.
func (m ModuleImage) Build() (v1.Image, error) {
	var layers []v1.Layer
	if m.Program != "" {
		l, err := Layer(File{Path: "usr/local/bin/" + m.Program, Mode: 0o755,
			Data: []byte("#!/bin/sh\necho 'a placeholder: the sandbox runs the host " + m.Program + "' >&2\nexit 127\n")})
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	var files []File
	for p, data := range m.Files {
		files = append(files, File{Path: path.Join(m.WorkingDir, p), Data: []byte(data)})
	}
	if len(files) > 0 {
		l, err := Layer(files...)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	layers = append(layers, m.Layers...)
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, fmt.Errorf("build image: %w", err)
	}
	img, err = mutate.Config(img, v1.Config{WorkingDir: m.WorkingDir, Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"}})
	if err != nil {
		return nil, fmt.Errorf("build image config: %w", err)
	}
	return img, nil
}
