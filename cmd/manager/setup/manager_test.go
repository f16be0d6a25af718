package setup

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "j", Labels: map[string]string{"l": "v"}, Annotations: map[string]string{"a": "v"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Spec: batchv1.JobSpec{ActiveDeadlineSeconds: ptr.To[int64](60), Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "terraform", Image: "tofu"}}}}},
		Status: batchv1.JobStatus{Succeeded: 1},
	}
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
