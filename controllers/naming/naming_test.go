package naming

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestNamesFitTheAPIServerWhateverTheObjectName(t *testing.T) {
	long := strings.Repeat("a", 253)
	for _, name := range []string{"m", "machine-0", long} {
		suffix := StateSuffix("some-namespace", "TerraformMachine", name)
		if len(suffix) != SuffixLength {
			t.Fatalf("suffix %q has length %d", suffix, len(suffix))
		}
		job := JobName(suffix, 9999999)
		for what, n := range map[string]string{
			"job": job, "run secret": RunSecretName(job), "state": StateSecretName(suffix),
			"lock": StateLockLeaseName(suffix), "run lease": RunLeaseName(suffix),
			"cluster lease": ClusterLeaseName("ns", long), "inputs": InputsSecretName(suffix),
			"outputs": OutputsSecretName(suffix), "runner service account": RunnerServiceAccountName(suffix),
			"plan": PlanSecretName(suffix), "inventory": InventorySecretName(suffix),
		} {
			// Job names become pod label values, so they must also be valid label values.
			if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
				t.Errorf("%s name %q: %v", what, n, errs)
			}
		}
		if errs := validation.IsValidLabelValue(LabelValue(name)); len(errs) > 0 {
			t.Errorf("label value for %d-char name: %v", len(name), errs)
		}
	}
}

func TestSuffixIsDeterministicAndDistinct(t *testing.T) {
	a := StateSuffix("ns", "TerraformMachine", "m1")
	if a != StateSuffix("ns", "TerraformMachine", "m1") {
		t.Fatal("suffix is not deterministic")
	}
	for _, other := range []string{
		StateSuffix("ns2", "TerraformMachine", "m1"),
		StateSuffix("ns", "TerraformCluster", "m1"),
		StateSuffix("ns", "TerraformMachine", "m2"),
	} {
		if other == a {
			t.Fatalf("suffix collision: %s", a)
		}
	}
}

func TestLongNamesGetDistinctLabelValues(t *testing.T) {
	a := strings.Repeat("x", 70) + "-a"
	b := strings.Repeat("x", 70) + "-b"
	if LabelValue(a) == LabelValue(b) {
		t.Fatal("two long names share a label value")
	}
	if !OwnedBy(OwnerLabels("TerraformMachine", a, "", ""), "TerraformMachine", a) {
		t.Fatal("OwnedBy does not recognise its own labels")
	}
	if OwnedBy(OwnerLabels("TerraformMachine", a, "", ""), "TerraformMachine", b) {
		t.Fatal("OwnedBy confuses two long names")
	}
}

func TestParseJobSeq(t *testing.T) {
	s := StateSuffix("ns", "TerraformCluster", "c")
	got, err := ParseJobSeq(s, JobName(s, 42))
	if err != nil || got != 42 {
		t.Fatalf("ParseJobSeq = %d, %v", got, err)
	}
	if _, err := ParseJobSeq(s, JobName(StateSuffix("ns", "TerraformCluster", "d"), 42)); err == nil {
		t.Fatal("a job of another suffix parsed")
	}
}
