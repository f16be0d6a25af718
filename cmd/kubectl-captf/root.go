package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// Exit codes (docs/cli.md, "Exit codes").
const (
	// exitOK: the command did what it was asked; for status, every object is Ready and nothing
	// waits for a person.
	exitOK = 0
	// exitFailed: the command failed or was refused (bad arguments, an API error, an admission
	// denial, a stale plan, a declined confirmation).
	exitFailed = 1
	// exitNotReady: status found an object that is not Ready (or reports no Ready yet).
	exitNotReady = 2
	// exitAttention: status found every object Ready, but a plan waits for approval or drift
	// was found.
	exitAttention = 3
)

// exitError ends the plugin with a code of its own; msg (when set) goes to stderr.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return fmt.Sprintf("exit %d: %s", e.code, e.msg) }

// refused is the error of a request the plugin refuses before writing anything.
func refused(format string, args ...any) error {
	return &exitError{code: exitFailed, msg: "refused: " + fmt.Sprintf(format, args...)}
}

// options are the flags every verb shares.
type options struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	output  string
	// newClient is how a verb reaches the API server (a test may replace it); status --watch
	// watches through it.
	newClient func() (client.WithWatch, error)
	// now is the clock the reports' ages are measured by; nil is time.Now (a test sets its own).
	now func() time.Time
}

// clock is the time now by o's clock.
func (o *options) clock() time.Time {
	if o.now == nil {
		return time.Now()
	}
	return o.now()
}

func newRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{flags: genericclioptions.NewConfigFlags(true), streams: streams}
	// status --cluster names a Cluster API Cluster; the kubeconfig's cluster is chosen with
	// --context instead of kubectl's --cluster.
	o.flags.ClusterName = nil
	o.newClient = o.client
	return newRoot(o)
}

// newRoot is the plugin's command tree on o (a test builds o with its own client).
func newRoot(o *options) *cobra.Command {
	root := &cobra.Command{
		Use:           "kubectl-captf",
		Short:         "Day-2 operations on CAPTF objects: status, plans, approvals, refresh, drift checks, retry, restore, replace, import, abandon, locks",
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl captf"},
		// kubectl completes a plugin through kubectl_complete-captf (hack/krew), which runs
		// cobra's __complete; cobra's own "completion" scripts would complete kubectl-captf
		// as a program of its own, so they are not offered.
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: true},
	}
	o.flags.AddFlags(root.PersistentFlags())
	root.AddCommand(
		newStatusCommand(o),
		newPlanCommand(o),
		newApproveCommand(o),
		newRefreshCommand(o),
		newDriftCommand(o),
		newRetryCommand(o),
		newRestoreCommand(o),
		newReplaceCommand(o),
		newImportCommand(o),
		newForgetCommand(o),
		newAbandonCommand(o),
		newUnlockCommand(o),
		newLogsCommand(o),
		newVersionCommand(o),
		newTraceCommand(o),
	)
	return root
}

// addOutputFlag adds -o json|yaml to a verb whose output is data.
func (o *options) addOutputFlag(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: json or yaml (default: text)")
}

// scheme holds the kinds the plugin reads.
func scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, infrav1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	return s, nil
}

func (o *options) client() (client.WithWatch, error) {
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	s, err := scheme()
	if err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("build client: %w", err)
	}
	return c, nil
}

// namespace is the namespace of the flags or the kubeconfig's context.
func (o *options) namespace() (string, error) {
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("namespace: %w", err)
	}
	return ns, nil
}

// checkOutput refuses an output format the plugin does not print.
func (o *options) checkOutput() error {
	switch o.output {
	case "", "json", "yaml":
		return nil
	}
	return &exitError{code: exitFailed, msg: fmt.Sprintf("error: unknown output format %q: use json or yaml", o.output)}
}

// printData prints v as JSON or YAML; it reports false when the output is text.
func (o *options) printData(v any) (bool, error) {
	switch o.output {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return true, fmt.Errorf("encode json: %w", err)
		}
		_, err = fmt.Fprintf(o.streams.Out, "%s\n", b)
		return true, err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return true, fmt.Errorf("encode yaml: %w", err)
		}
		_, err = o.streams.Out.Write(b)
		return true, err
	}
	return false, nil
}

// target is one TerraformCluster, TerraformMachine or TerraformMachinePool.
type target struct {
	kind kindInfo
	obj  terraformObject
}

// objectID names the object a verb's data is about: its fields lead that data's JSON and YAML.
type objectID struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func (t target) id() objectID {
	return objectID{Kind: t.kind.Kind, Namespace: t.obj.GetNamespace(), Name: t.obj.GetName()}
}

// ref is how the plugin names an object in messages: TerraformCluster ns/name.
func (t target) ref() string {
	return t.kind.Kind + " " + t.obj.GetNamespace() + "/" + t.obj.GetName()
}

// getTarget parses KIND/NAME and reads the object.
func (o *options) getTarget(ctx context.Context, c client.Client, arg string) (target, error) {
	k, name, err := parseKindName(arg)
	if err != nil {
		return target{}, err
	}
	ns, err := o.namespace()
	if err != nil {
		return target{}, err
	}
	obj, err := k.newObject(c)
	if err != nil {
		return target{}, err
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
		return target{}, fmt.Errorf("get %s %s/%s: %w", k.Kind, ns, name, err)
	}
	return target{kind: k, obj: obj}, nil
}

// getIfExists reads one object into obj and reports whether it exists; another error than
// NotFound says what it could not read ("get WHAT NS/NAME").
func getIfExists(ctx context.Context, c client.Client, what string, key types.NamespacedName, obj client.Object) (bool, error) {
	err := c.Get(ctx, key, obj)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("get %s %s: %w", what, key, err)
	}
	return true, nil
}

// getIfReadable is getIfExists that also reports false, with no error, when the caller may not
// read the object: status then shows the rest.
func getIfReadable(ctx context.Context, c client.Client, what string, key types.NamespacedName, obj client.Object) (bool, error) {
	found, err := getIfExists(ctx, c, what, key, obj)
	if apierrors.IsForbidden(err) {
		return false, nil
	}
	return found, err
}

// setAnnotation writes one annotation the way `kubectl annotate --overwrite` does: a merge
// patch of metadata.annotations under the caller's credentials, judged by admission like it.
func setAnnotation(ctx context.Context, c client.Client, t target, key, value string) error {
	return patchAnnotation(ctx, c, t, key, &value)
}

// removeAnnotation removes one annotation, like `kubectl annotate KEY-`.
func removeAnnotation(ctx context.Context, c client.Client, t target, key string) error {
	return patchAnnotation(ctx, c, t, key, nil)
}

func patchAnnotation(ctx context.Context, c client.Client, t target, key string, value *string) error {
	patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}}
	raw, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	if err := c.Patch(ctx, t.obj, client.RawPatch(types.MergePatchType, raw)); err != nil {
		return fmt.Errorf("annotate %s: %w", t.ref(), err)
	}
	return nil
}

// confirm asks a yes/no question on the streams unless yes (--yes) answered it already: nil
// for a yes ("y" or "yes"), else the error that ends the verb with nothing written.
func (o *options) confirm(yes bool, question string) error {
	if yes {
		return nil
	}
	if _, err := fmt.Fprintf(o.streams.Out, "%s [y/N]: ", question); err != nil {
		return fmt.Errorf("ask: %w", err)
	}
	line, err := bufio.NewReader(o.streams.In).ReadString('\n')
	if err != nil && err != io.EOF {
		return fmt.Errorf("read answer: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return &exitError{code: exitFailed, msg: "not confirmed: nothing was written"}
}
