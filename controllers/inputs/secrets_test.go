package inputs

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

const suffix = "0123456789abcdef"

func testInputs(t *testing.T) *Inputs {
	t.Helper()
	r := fakeReader(t, secret("creds", map[string]string{"token": "tok-123"}))
	return mustAssemble(t, r, infrav1.TerraformSpec{VariablesFrom: []infrav1.VariablesSource{fromSecret("creds", false)}}, contractFor("m1"))
}

func testMachine() *infrav1.TerraformMachine {
	return objects.Machine(ns, "m1").Cluster("c1").UID("uid-m1").Obj()
}

func testJob() *batchv1.Job {
	return objects.Job(ns, naming.JobName(suffix, 3)).UID("uid-job").
		Of(infrav1.TerraformMachineKind, "m1", "c1").Label(infrav1.WatchFilterLabel, "blue").Obj()
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestDurableSecret(t *testing.T) {
	in := testInputs(t)
	gvk := infrav1.GroupVersion.WithKind(infrav1.TerraformMachineKind)
	s, err := DurableSecret(testMachine(), gvk, suffix, in)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != naming.InputsSecretName(suffix) || s.Namespace != ns {
		t.Errorf("name %s/%s, want %s/%s", s.Namespace, s.Name, ns, naming.InputsSecretName(suffix))
	}
	if len(s.OwnerReferences) != 1 {
		t.Fatalf("owner references: %v", s.OwnerReferences)
	}
	o := s.OwnerReferences[0]
	if o.APIVersion != infrav1.GroupVersion.String() || o.Kind != infrav1.TerraformMachineKind || o.Name != "m1" || o.UID != "uid-m1" || o.Controller == nil || !*o.Controller {
		t.Errorf("owner reference %+v does not point at the machine", o)
	}
	if v, ok := s.Labels[MoveLabel]; !ok || v != "" {
		t.Errorf("the move label is missing: %v", s.Labels)
	}
	for k, v := range naming.OwnerLabels(infrav1.TerraformMachineKind, "m1", "c1", "") {
		if s.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, s.Labels[k], v)
		}
	}
	if got := strings.Join(keys(s.Data), ","); got != "hash,module,redact.json,variables.tfvars.json" {
		t.Errorf("keys %s", got)
	}
	if string(s.Data[HashKey]) != in.Hash || s.Annotations[infrav1.InputsHashAnnotation] != in.Hash {
		t.Errorf("hash not recorded")
	}

	back, err := FromDurableSecret(s)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	if string(back.Variables) != string(in.Variables) || string(back.Module) != string(in.Module) || back.Hash != in.Hash || strings.Join(back.Redact, "\x00") != strings.Join(in.Redact, "\x00") {
		t.Errorf("round trip changed the inputs")
	}

	// The module is part of what the hash vouches for: a Secret naming another module is
	// refused as one with other variables is.
	otherModule := s.DeepCopy()
	otherModule.Data[ModuleKey] = []byte(`{"image":"registry.example/other:1"}`)
	if _, err := FromDurableSecret(otherModule); err == nil {
		t.Fatal("a durable Secret whose module was edited was accepted")
	} else {
		expectReason(t, err, infrav1.InvalidInputsReason)
	}
	// Nor does removing the module make a hash of this scheme read as an earlier manager's.
	noModule := s.DeepCopy()
	delete(noModule.Data, ModuleKey)
	if _, err := FromDurableSecret(noModule); err == nil {
		t.Fatal("a durable Secret whose module was removed was accepted")
	}

	tampered := s.DeepCopy()
	tampered.Data[VariablesKey] = []byte(strings.Replace(string(in.Variables), "tok-123", "tok-999", 1))
	if _, err := FromDurableSecret(tampered); err == nil {
		t.Fatal("a durable Secret whose variables were edited was accepted")
	} else {
		expectReason(t, err, infrav1.InvalidInputsReason)
	}

	noUID := testMachine()
	noUID.UID = ""
	if _, err := DurableSecret(noUID, gvk, suffix, in); err == nil {
		t.Error("an owner without uid was accepted (the ownerReference would be invalid)")
	}
}

// A durable inputs Secret an earlier manager wrote (the variables hashed alone, no module key)
// is still read: a destroy after an upgrade runs with the inputs of the last apply. Edited, it
// is refused as any other.
func TestDurableSecretOfAnEarlierManager(t *testing.T) {
	in := testInputs(t)
	s, err := DurableSecret(testMachine(), infrav1.GroupVersion.WithKind(infrav1.TerraformMachineKind), suffix, in)
	if err != nil {
		t.Fatal(err)
	}
	delete(s.Data, ModuleKey)
	s.Data[HashKey] = []byte(LegacyHash(in.Variables))
	back, err := FromDurableSecret(s)
	if err != nil {
		t.Fatalf("read back a Secret of the earlier scheme: %v", err)
	}
	if back.Hash != LegacyHash(in.Variables) || string(back.Variables) != string(in.Variables) {
		t.Errorf("read back %s, want the earlier manager's hash %s and its variables", back, LegacyHash(in.Variables))
	}
	s.Data[VariablesKey] = []byte(strings.Replace(string(in.Variables), "tok-123", "tok-999", 1))
	if _, err := FromDurableSecret(s); err == nil {
		t.Fatal("an edited Secret of the earlier scheme was accepted")
	}
}

func TestRunSecret(t *testing.T) {
	in := testInputs(t)
	job := testJob()
	s, err := RunSecret(job, ns, suffix, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != naming.RunSecretName(job.Name) || s.Namespace != ns {
		t.Errorf("name %s/%s", s.Namespace, s.Name)
	}
	if len(s.OwnerReferences) != 1 {
		t.Fatalf("owner references: %v", s.OwnerReferences)
	}
	o := s.OwnerReferences[0]
	if o.APIVersion != "batch/v1" || o.Kind != "Job" || o.Name != job.Name || o.UID != job.UID {
		t.Errorf("owner reference %+v does not point at the Job", o)
	}
	if _, ok := s.Labels[MoveLabel]; ok {
		t.Errorf("a per-run Secret must not move: %v", s.Labels)
	}
	if s.Labels[infrav1.OwnerNameLabel] != "m1" || s.Labels[infrav1.ManagedLabel] != "true" || s.Labels[infrav1.WatchFilterLabel] != "blue" {
		t.Errorf("owner labels (and the shard) not copied from the Job: %v", s.Labels)
	}
	if got := strings.Join(keys(s.Data), ","); got != "backend.json,redact.json,variables.tfvars.json" {
		t.Errorf("keys %s", got)
	}
	if string(s.Data[VariablesKey]) != string(in.Variables) {
		t.Errorf("variables differ")
	}
	if got := string(s.Data[BackendKey]); got != `{"namespace":"team-a","secret_suffix":"0123456789abcdef"}` {
		t.Errorf("backend.json = %s", got)
	}
	var redact []string
	if err := json.Unmarshal(s.Data[RedactKey], &redact); err != nil || len(redact) == 0 || redact[0] != "tok-123" {
		t.Errorf("redact.json = %s (%v)", s.Data[RedactKey], err)
	}

	restore := []byte(`{"version":4}`)
	s, err = RunSecret(job, ns, suffix, in, restore)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(keys(s.Data), ","); got != "backend.json,redact.json,restore.tfstate,variables.tfvars.json" || string(s.Data[RestoreKey]) != string(restore) {
		t.Errorf("restore: keys %s", got)
	}

	if _, err := RunSecret(job, ns, suffix, in, []byte{}); err == nil {
		t.Error("an empty restore state was accepted")
	}
	created := job.DeepCopy()
	created.UID = ""
	if _, err := RunSecret(created, ns, suffix, in, nil); err == nil {
		t.Error("a Job without uid was accepted")
	}
	_, err = RunSecret(job, ns, suffix, in, []byte(strings.Repeat("{", MaxRunSecretBytes)))
	msg := expectReason(t, err, infrav1.InputsTooLargeReason)
	if !strings.Contains(msg, "state to restore") {
		t.Errorf("message does not mention the restore state: %s", msg)
	}
}

func TestEmptyRedactListIsAnArray(t *testing.T) {
	in := mustAssemble(t, fakeReader(t), infrav1.TerraformSpec{}, contractFor("m"))
	s, err := RunSecret(testJob(), ns, suffix, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(s.Data[RedactKey]) != "[]" {
		t.Errorf("redact.json = %s, want []", s.Data[RedactKey])
	}
}
