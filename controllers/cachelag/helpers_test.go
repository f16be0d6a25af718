package cachelag_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

func get[T client.Object](o T) T {
	GinkgoHelper()
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
	return o
}

func isGone(o client.Object) bool {
	err := k8s.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))
	return apierrors.IsNotFound(err)
}

func update[T client.Object](o T, fn func(T)) {
	GinkgoHelper()
	Eventually(func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return err
		}
		fn(o)
		return k8s.Update(ctx, o)
	}).Should(Succeed())
}

func jobsOf(tc *infrav1.TerraformCluster) []batchv1.Job {
	GinkgoHelper()
	list := &batchv1.JobList{}
	Expect(k8s.List(ctx, list, client.InNamespace(tc.Namespace), client.MatchingLabels{
		infrav1.OwnerKindLabel: infrav1.TerraformClusterKind, infrav1.OwnerNameLabel: naming.LabelValue(tc.Name)})).To(Succeed())
	return list.Items
}

func condition(tc *infrav1.TerraformCluster, t string) *metav1.Condition {
	return meta.FindStatusCondition(tc.Status.Conditions, t)
}
