package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of every CAPTF kind.
var GroupVersion = schema.GroupVersion{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1"}

var schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

// AddToScheme adds the CAPTF kinds to a scheme.
var AddToScheme = schemeBuilder.AddToScheme

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&TerraformCluster{}, &TerraformClusterList{},
		&TerraformMachine{}, &TerraformMachineList{},
		&TerraformMachinePool{}, &TerraformMachinePoolList{},
		&TerraformClusterTemplate{}, &TerraformClusterTemplateList{},
		&TerraformMachineTemplate{}, &TerraformMachineTemplateList{},
		&TerraformMachinePoolTemplate{}, &TerraformMachinePoolTemplateList{},
		&TerraformPlanPolicy{}, &TerraformPlanPolicyList{},
		&TerraformIdentity{}, &TerraformIdentityList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
