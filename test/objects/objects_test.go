package objects_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// The builders must build what the controller recognises: a Job built as an object's is that
// object's by the product's own reading, and a finished one is finished by it.
func TestBuiltJobsReadAsTheProductReadsThem(t *testing.T) {
	m := objects.Machine("ns", "m").Cluster("prod").UID("uid-1").Obj()
	now := metav1.Now()
	job := objects.Job("ns", "run-1").Of(infrav1.TerraformMachineKind, "m", "prod").Owner(m).Started(now).Obj()
	if !naming.OwnedBy(job.Labels, infrav1.TerraformMachineKind, "m") {
		t.Fatalf("labels %v do not make the Job the TerraformMachine's", job.Labels)
	}
	if ref := metav1.GetControllerOf(job); ref == nil || ref.UID != "uid-1" || ref.Kind != infrav1.TerraformMachineKind {
		t.Fatalf("controller reference %+v does not name the incarnation", ref)
	}
	if jobstatus.Finished(job) {
		t.Fatal("a started Job reads as finished")
	}
	for name, b := range map[string]*objects.JobBuilder{
		"complete": objects.Job("ns", "a").Complete(now),
		"failed":   objects.Job("ns", "b").Failed(now),
	} {
		if !jobstatus.Finished(b.Obj()) {
			t.Errorf("a %s Job does not read as finished", name)
		}
	}
	pod := objects.PodOf(job, "run-1-x").Phase(corev1.PodSucceeded).Obj()
	if pod.Labels["job-name"] != "run-1" || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Fatalf("the pod is not the Job's: %+v", pod.ObjectMeta)
	}
	job.UID = "job-uid"
	other := objects.Job("ns", "run-1").UID("earlier-job").Obj()
	if !jobstatus.PodOfJob(objects.PodOf(job, "p").ControlledBy(job).Obj(), job) ||
		jobstatus.PodOfJob(objects.PodOf(job, "p").ControlledBy(other).Obj(), job) {
		t.Fatal("ControlledBy does not make the pod the controlled pod of that Job, and only of it")
	}
	if !jobstatus.RunsTemplate(objects.PodOf(job, "p").AsBuilt().Obj(), job) {
		t.Fatal("a pod AsBuilt does not run its Job's template")
	}
	legacy := objects.PodOf(job, "p").JobLabel(jobstatus.LegacyJobNameLabel).Obj()
	if _, ok := legacy.Labels[jobstatus.JobNameLabel]; ok || !jobstatus.PodOfJobNamed(legacy, job.Name) {
		t.Fatalf("JobLabel keeps both labels, or neither: %v", legacy.Labels)
	}
}

func TestTerraformBuildersSetOnlyWhatTheyAreAskedFor(t *testing.T) {
	for _, kind := range []string{infrav1.TerraformClusterKind, infrav1.TerraformMachineKind, infrav1.TerraformMachinePoolKind} {
		plain := objects.OfKind(kind, "ns", "x").Obj()
		if len(plain.GetFinalizers()) != 0 || len(plain.GetAnnotations()) != 0 || plain.GetTerraformStatus().ActiveJob != nil {
			t.Errorf("%s: a plain object carries marks: %v %v", kind, plain.GetFinalizers(), plain.GetAnnotations())
		}
		if plain.GetLabels()[infrav1.ClusterNameLabel] != "x" || plain.GetTerraformSpec().Module.Image != objects.DefaultModule {
			t.Errorf("%s: defaults missing: %v %+v", kind, plain.GetLabels(), plain.GetTerraformSpec().Module)
		}
		if _, ok := objects.OfKind(kind, "ns", "z").NoCluster().Obj().GetLabels()[infrav1.ClusterNameLabel]; ok {
			t.Errorf("%s: NoCluster keeps the cluster-name label", kind)
		}
		marked := objects.OfKind(kind, "ns", "y").Finalizer().BlockMove().Paused().ActiveJob("j", infrav1.OperationApply).Obj()
		if _, ok := marked.GetAnnotations()[infrav1.BlockMoveAnnotation]; !ok || len(marked.GetFinalizers()) != 1 ||
			marked.GetTerraformStatus().ActiveJob.Name != "j" {
			t.Errorf("%s: marks not set: %v %v", kind, marked.GetAnnotations(), marked.GetFinalizers())
		}
	}
}
