package runner_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
	"github.com/captf/cluster-api-provider-terraform/test/sim/apiserver"
	"github.com/captf/cluster-api-provider-terraform/test/sim/kcm"
	"github.com/captf/cluster-api-provider-terraform/test/sim/runner"
)

func applyJob(name, uid string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid),
			Labels:          map[string]string{infrav1.OperationLabel: string(infrav1.OperationApply), infrav1.OwnerKindLabel: infrav1.TerraformClusterKind},
			OwnerReferences: []metav1.OwnerReference{{Name: "c1", Kind: infrav1.TerraformClusterKind}}},
		Spec: batchv1.JobSpec{ActiveDeadlineSeconds: ptr.To(int64(120))},
	}
}

// TestDrawIsPure: a run's plan depends on the seed and the Job's identity only, and the shares
// are honoured.
func TestDrawIsPure(t *testing.T) {
	m := runner.New(runner.Options{Seed: 9, CrashPercent: 30, KillPercent: 30, OverrunPercent: 30})
	seen := map[runner.Outcome]int{}
	for i := range 400 {
		j := applyJob("j", string(rune('a'+i%26))+string(rune('a'+i/26)))
		p := m.Draw(j)
		if m.Draw(j.DeepCopy()) != p {
			t.Fatalf("two draws of one Job differ")
		}
		seen[p.Outcome]++
		if p.Outcome == runner.Overran && p.Duration <= 120*time.Second {
			t.Errorf("an overrun of %v does not pass the deadline", p.Duration)
		}
	}
	for _, o := range []runner.Outcome{runner.Succeeded, runner.Crashed, runner.Killed, runner.Overran} {
		if seen[o] == 0 {
			t.Errorf("no run of 400 %s", o)
		}
	}
}

// TestEndWritesTheNextSerialAndHonoursTheLineage: a successful apply writes serial 1, then 2
// in the same lineage; a Job that names another lineage writes nothing and fails.
func TestEndWritesTheNextSerialAndHonoursTheLineage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		scheme, err := setup.NewScheme()
		if err != nil {
			t.Fatal(err)
		}
		store, err := apiserver.New(scheme, apiserver.Options{})
		if err != nil {
			t.Fatal(err)
		}
		api := store.Client()
		if err := api.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}); err != nil {
			t.Fatal(err)
		}
		m := runner.New(runner.Options{Seed: 1, State: api})
		ctx := context.Background()
		for want, uid := range []string{"u1", "u2"} {
			if run := m.End(ctx, applyJob("j", uid), kcm.Run{}); run.Fail {
				t.Fatalf("run %s failed", uid)
			}
			if got := serial(t, api); got != uint64(want+1) {
				t.Errorf("serial %d after run %s, want %d", got, uid, want+1)
			}
		}
		j := applyJob("j", "u3")
		j.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: jobs.ChannelContainer, Command: []string{"--state-lineage=other"}}}
		if jobs.StateLineageOf(j) != "other" {
			t.Fatalf("the test Job names lineage %q", jobs.StateLineageOf(j))
		}
		if run := m.End(ctx, j, kcm.Run{}); !run.Fail {
			t.Error("a run against another lineage did not fail")
		}
		if got := serial(t, api); got != 2 {
			t.Errorf("serial %d after a refused run, want 2", got)
		}
	})
}

func serial(t *testing.T, c client.Client) uint64 {
	t.Helper()
	sec := &corev1.Secret{}
	name := naming.StateSecretName(naming.StateSuffix("ns", infrav1.TerraformClusterKind, "c1"))
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: name}, sec); err != nil {
		t.Fatal(err)
	}
	st, err := state.FromSecret(sec)
	if err != nil {
		t.Fatal(err)
	}
	return st.Serial
}
