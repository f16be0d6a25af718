package v1alpha1_test

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

func clientNegotiator() runtime.NegotiatedSerializer {
	return serializer.NewCodecFactory(env.Scheme).WithoutConversion()
}
