package setup

import (
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func clusterv1AddToScheme(s *runtime.Scheme) error { return clusterv1.AddToScheme(s) }
