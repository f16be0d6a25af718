package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// runPlan runs `args...` (plan show, approve) in namespace prod against a fake client holding
// objs, and returns what it printed and the error it ended with.
func runPlan(t *testing.T, objs []client.Object, args ...string) (string, error) {
	t.Helper()
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	s, err := scheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	var out, errOut bytes.Buffer
	o := &options{flags: genericclioptions.NewConfigFlags(true), streams: genericiooptions.IOStreams{In: os.Stdin, Out: &out, ErrOut: &errOut}}
	o.flags.ClusterName = nil
	o.newClient = func() (client.WithWatch, error) { return c, nil }
	root := &cobra.Command{Use: "kubectl-captf", SilenceUsage: true, SilenceErrors: true}
	o.flags.AddFlags(root.PersistentFlags())
	root.AddCommand(newPlanCommand(o), newApproveCommand(o))
	root.SetArgs(append([]string{"-n", "prod"}, args...))
	err = root.Execute()
	return out.String(), err
}

// boundPlan is a cluster whose pending plan's record keeps the digests of its plan Secret, and
// that Secret as the channel stored it.
func boundPlan() (*infrav1.TerraformCluster, *corev1.Secret) {
	o := waitingCluster()
	rec := infrav1.ParsePlanRecord(o.Annotations[infrav1.PendingPlanAnnotation])
	data := map[string][]byte{
		runnerapi.PlanFileKey:   []byte("\x1f\x8bplan file"),
		runnerapi.PlanRecordKey: []byte(`{"id":"` + rec.ID + `","fileSHA256":"f","replace":1,"create":1}`),
		runnerapi.PlanJSONKey:   []byte(`{"resource_changes":[{"address":"terraform_data.node","change":{"actions":["delete","create"]}}]}`),
		runnerapi.PlanTextKey:   []byte("  # terraform_data.node must be replaced\nPlan: 2 to add, 0 to change, 1 to destroy.\n"),
	}
	d := runnerapi.DigestPlanArtifacts(data)
	rec.Digests = &infrav1.PlanDigests{File: d.File, Record: d.Record, JSON: d.JSON, Text: d.Text}
	o.Annotations[infrav1.PendingPlanAnnotation] = rec.Annotation()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: rec.Secret,
		Annotations: map[string]string{runnerapi.PlanIDAnnotation: rec.ID}}, Data: data}
	return o, sec
}

func TestPlanShowShowsABoundPlan(t *testing.T) {
	o, sec := boundPlan()
	out, err := runPlan(t, []client.Object{o, sec}, "plan", "show", "terraformcluster/prod")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "terraform_data.node must be replaced") {
		t.Fatalf("the plan text is not shown:\n%s", out)
	}
}

// TestPlanShowRefusesATamperedArtifact: each artifact rewritten after the Plan Job stored it
// (and a record without digests) makes plan show refuse to show the plan, say it is corrupt
// and exit non-zero; approve refuses too.
func TestPlanShowRefusesATamperedArtifact(t *testing.T) {
	for _, key := range runnerapi.PlanArtifactKeys {
		t.Run(key, func(t *testing.T) {
			o, sec := boundPlan()
			sec.Data[key] = []byte(`{"harmless":true}`)
			for _, args := range [][]string{{"plan", "show", "terraformcluster/prod"}, {"plan", "show", "terraformcluster/prod", "-o", "json"}, {"approve", "terraformcluster/prod", "--yes"}} {
				out, err := runPlan(t, []client.Object{o, sec}, args...)
				var ex *exitError
				if !errors.As(err, &ex) || ex.code == 0 || !strings.Contains(ex.msg, "corrupt") || !strings.Contains(ex.msg, key) {
					t.Fatalf("%v: %v, want a non-zero exit saying the plan is corrupt and naming %s", args, err, key)
				}
				if strings.Contains(out, "harmless") || strings.Contains(out, "must be replaced") {
					t.Fatalf("%v showed an artifact of a corrupt plan:\n%s", args, out)
				}
				if strings.Contains(out, "approved plan") {
					t.Fatalf("%v approved a corrupt plan", args)
				}
			}
		})
	}
	t.Run("a record without digests", func(t *testing.T) {
		o, sec := boundPlan()
		rec := infrav1.ParsePlanRecord(o.Annotations[infrav1.PendingPlanAnnotation])
		rec.Digests = nil
		o.Annotations[infrav1.PendingPlanAnnotation] = rec.Annotation()
		_, err := runPlan(t, []client.Object{o, sec}, "plan", "show", "terraformcluster/prod")
		var ex *exitError
		if !errors.As(err, &ex) || ex.code == 0 || !strings.Contains(ex.msg, "no digests") {
			t.Fatalf("%v, want a refusal", err)
		}
	})
	t.Run("held as corrupt by the controller", func(t *testing.T) {
		o, sec := boundPlan()
		rec := infrav1.ParsePlanRecord(o.Annotations[infrav1.PendingPlanAnnotation])
		rec.Reason, rec.Corrupt = infrav1.PlanWaitCorrupt, "the plan Secret's plan.json do not match"
		o.Annotations[infrav1.PendingPlanAnnotation] = rec.Annotation()
		_, err := runPlan(t, []client.Object{o, sec}, "plan", "show", "terraformcluster/prod")
		var ex *exitError
		if !errors.As(err, &ex) || ex.code == 0 || !strings.Contains(ex.msg, "holds it as corrupt") {
			t.Fatalf("%v, want a refusal", err)
		}
	})
}
