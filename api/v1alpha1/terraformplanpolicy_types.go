package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TerraformPlanPolicySpec says which objects' plans a policy judges and the rules a plan must
// keep (docs/plans.md, "Plan policies").
type TerraformPlanPolicySpec struct {
	// namespaceSelector selects the namespaces whose TerraformClusters, TerraformMachines and
	// TerraformMachinePools the policy judges, by the namespaces' labels. Empty or absent
	// selects every namespace. An object a policy selects applies only through a saved plan,
	// the first apply included (engine test "a plan policy holds a plan that deletes a database
	// and lets a create-only plan apply").
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// rules are CEL expressions a plan must keep, each evaluated with the variables `plan`,
	// `changes`, `summary`, `object` and `namespaceObject` (docs/plans.md lists them) and
	// returning a bool: true keeps the rule. A rule that returns false, fails when it runs, or
	// runs over its 2-second budget holds the plan with the reason PlanPolicyViolated and the
	// rule's message (controllers/planpolicy TestJudgeFailsClosed).
	// The admission webhook refuses a rule that does not compile, does not return a bool, or
	// whose estimated cost exceeds the per-expression limit Kubernetes uses for its own CEL
	// (webhooks test "refuses a plan policy", webhooks/planpolicy_test.go).
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Rules []PlanPolicyRule `json:"rules"`
}

// PlanPolicyRule is one rule of a TerraformPlanPolicy.
type PlanPolicyRule struct {
	// name names the rule in the violation's message.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// expression is the CEL expression; true keeps the rule.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression"`

	// message says what the rule forbids and what to do, for the person who reads the held
	// plan. Empty: the expression is quoted instead.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=terraformplanpolicies,scope=Cluster,categories=captf,shortName=tfpp
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// TerraformPlanPolicy holds CEL rules that every plan of the objects it selects must keep
// before CAPTF applies it; a plan that breaks one waits for an approver or a new plan.
type TerraformPlanPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TerraformPlanPolicySpec `json:"spec"`
}

// +kubebuilder:object:root=true

// TerraformPlanPolicyList is a list of TerraformPlanPolicies.
type TerraformPlanPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformPlanPolicy `json:"items"`
}
