package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// version is the plugin's release, set at build time by hack/krew/release.sh
// (-ldflags "-X main.version=TAG"); empty in a build from a checkout, whose version then comes
// from the Go build information.
var version = ""

// VersionView is what version prints; it is its JSON and YAML output.
type VersionView struct {
	Plugin PluginVersion  `json:"plugin"`
	Server *ServerVersion `json:"server,omitempty"`
}

// PluginVersion is the plugin binary's own version.
type PluginVersion struct {
	// Version is the release tag, or the Go module version of the build ("(devel)" from a
	// checkout).
	Version string `json:"version"`
	// Commit is the source revision the binary was built from, when the build recorded it;
	// Modified that the checkout had uncommitted changes.
	Commit    string `json:"commit,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// ServerVersion is what the plugin needs of the cluster: its Kubernetes version and the
// versions of CAPTF's API it serves.
type ServerVersion struct {
	Kubernetes string `json:"kubernetes"`
	// CAPTFAPIVersions are the group versions that serve TerraformCluster, TerraformMachine and
	// TerraformMachinePool; empty when CAPTF is not installed.
	CAPTFAPIVersions []string `json:"captfAPIVersions"`
}

func newVersionCommand(o *options) *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version, and the cluster's Kubernetes version and the CAPTF API versions it serves",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			v := VersionView{Plugin: pluginVersion()}
			var serverErr error
			if !clientOnly {
				v.Server, serverErr = o.serverVersion(cmd.Context())
			}
			if err := o.show(v, func(p *printer) error { return renderVersion(p, v) }); err != nil {
				return err
			}
			if serverErr != nil {
				return fmt.Errorf("read the server's version (--client prints the plugin's alone): %w", serverErr)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print only the plugin's version; reach no cluster")
	o.addOutputFlag(cmd)
	return cmd
}

// pluginVersion reads the binary's version: the release tag, else the Go build information.
func pluginVersion() PluginVersion {
	v := PluginVersion{Version: version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		if v.Version == "" {
			v.Version = "unknown"
		}
		return v
	}
	if v.Version == "" {
		v.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// serverVersion asks the API server's discovery for its version and for the versions of the
// infrastructure group that serve the three CAPTF kinds (discovery is open to every
// authenticated user; the group is shared with other infrastructure providers, so a version
// counts only when it serves all three).
func (o *options) serverVersion(ctx context.Context) (*ServerVersion, error) {
	dc, err := o.flags.ToDiscoveryClient()
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	dc.Invalidate()
	kv, err := dc.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("server version: %w", err)
	}
	s := &ServerVersion{Kubernetes: kv.GitVersion, CAPTFAPIVersions: []string{}}
	groups, err := dc.ServerGroups()
	if err != nil {
		return nil, fmt.Errorf("server groups: %w", err)
	}
	for _, g := range groups.Groups {
		if g.Name != infrav1.GroupVersion.Group {
			continue
		}
		for _, gv := range g.Versions {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			list, err := dc.ServerResourcesForGroupVersion(gv.GroupVersion)
			if err != nil {
				return nil, fmt.Errorf("resources of %s: %w", gv.GroupVersion, err)
			}
			served := 0
			for _, r := range list.APIResources {
				if slices.ContainsFunc(kinds, func(k kindInfo) bool { return k.Kind == r.Kind && !strings.Contains(r.Name, "/") }) {
					served++
				}
			}
			if served == len(kinds) {
				s.CAPTFAPIVersions = append(s.CAPTFAPIVersions, gv.GroupVersion)
			}
		}
	}
	return s, nil
}

func renderVersion(p *printer, v VersionView) error {
	pv := v.Plugin
	build := []string{}
	if pv.Commit != "" {
		c := pv.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		if pv.Modified {
			c += " (modified)"
		}
		build = append(build, "commit "+c)
	}
	build = append(build, pv.GoVersion, pv.Platform)
	p.line("", "kubectl-captf: %s (%s)", pv.Version, strings.Join(build, ", "))
	if s := v.Server; s != nil {
		p.line("", "Kubernetes:    %s", s.Kubernetes)
		apis := "not installed (no version of " + infrav1.GroupVersion.Group + " serves TerraformCluster, TerraformMachine and TerraformMachinePool)"
		if len(s.CAPTFAPIVersions) > 0 {
			apis = strings.Join(s.CAPTFAPIVersions, ", ")
		}
		p.line("", "CAPTF API:     %s", apis)
	}
	return p.err
}
