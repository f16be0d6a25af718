package inputs

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// VariablesLabel, set to VariablesLabelValue, opts a Secret or ConfigMap in as a variablesFrom
// source. CAPTF reads no other: an object's author can only name a source, and without the
// opt-in anyone allowed to create a TerraformMachine could feed another workload's Secret (a
// database password, a token) into a module, whose outputs and logs they read.
const (
	VariablesLabel      = infrav1.VariablesLabel
	VariablesLabelValue = "true"
)

// optedIn reports whether a source carries VariablesLabel=VariablesLabelValue.
func optedIn(o metav1.Object) bool {
	return o.GetLabels()[VariablesLabel] == VariablesLabelValue
}

// notOptedIn is the error for a source that exists but does not carry the opt-in label. It is
// refused whether or not the entry is optional: optional means the source may be missing, not
// that it may belong to someone else. The message names the source and the command that opts
// it in (with --overwrite when the label is there with another value).
func notOptedIn(where, kind, namespace, name string, o metav1.Object) *InputsError {
	overwrite := ""
	if _, ok := o.GetLabels()[VariablesLabel]; ok {
		overwrite = " --overwrite"
	}
	return &InputsError{
		Reason: infrav1.VariablesSourceNotOptedInReason,
		Message: fmt.Sprintf("%s is not labelled %s=%s, so CAPTF does not read it: a variables source must opt in, "+
			"so that an object cannot pass another workload's data to a module. If it is meant for Terraform, run: "+
			"kubectl label %s %s -n %s %s=%s%s",
			where, VariablesLabel, VariablesLabelValue, strings.ToLower(kind), name, namespace, VariablesLabel, VariablesLabelValue, overwrite),
	}
}
