package setup

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// TestShardsHaveTheirOwnLeader: two managers of different shards must not wait for each
// other's leader election, and a watch filter that is no label value is refused at start.
func TestShardsHaveTheirOwnLeader(t *testing.T) {
	ids := map[string]string{}
	for _, shard := range []string{"", "a", "b"} {
		mo, _, err := managerOptions(Options{WatchFilter: shard})
		if err != nil {
			t.Fatalf("shard %q: %v", shard, err)
		}
		if other, ok := ids[mo.LeaderElectionID]; ok {
			t.Errorf("shards %q and %q share the leader election Lease %s", other, shard, mo.LeaderElectionID)
		}
		ids[mo.LeaderElectionID] = shard
	}
	if _, _, err := managerOptions(Options{WatchFilter: "not a label value"}); err == nil || !strings.Contains(err.Error(), "--watch-filter") {
		t.Errorf("a watch filter that is no label value: err = %v, want a refusal naming --watch-filter", err)
	}
}

// TestCachedJobsKeepNoPodTemplate: the Job cache drops what no reader of it needs, the pod
// template and the managed fields, and keeps what the engine judges a Job by.
func TestCachedJobsKeepNoPodTemplate(t *testing.T) {
	job := objects.Job("ns", "j").Label("l", "v").Annotation("a", "v").Deadline(60).Complete(metav1.Now()).
		With(func(j *batchv1.Job) { j.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m"}} }).Obj()
	out, err := withoutPodTemplate(job)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*batchv1.Job)
	if len(got.Spec.Template.Spec.Containers) != 0 || len(got.ManagedFields) != 0 {
		t.Errorf("the cached Job keeps its pod template or managed fields: %+v", got)
	}
	if got.Labels["l"] != "v" || got.Annotations["a"] != "v" || got.Status.Succeeded != 1 || got.Spec.ActiveDeadlineSeconds == nil {
		t.Errorf("the cached Job lost what the engine judges it by: %+v", got)
	}
}
