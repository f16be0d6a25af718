package decide

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SetAnnotation sets the annotation k of o to v (in memory: the engine writes o).
func SetAnnotation(o metav1.Object, k, v string) {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[k] = v
	o.SetAnnotations(a)
}

// RemoveAnnotation removes the annotation k of o (in memory).
func RemoveAnnotation(o metav1.Object, k string) {
	a := o.GetAnnotations()
	delete(a, k)
	o.SetAnnotations(a)
}
