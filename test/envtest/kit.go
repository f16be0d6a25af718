package envtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// Kit holds the helpers every Ginkgo envtest suite shares: fresh namespaces, reads and
// retried updates of objects, an object's Jobs and conditions, and a poke that makes the
// controllers look at an object again. A suite builds one Kit after StartSuite.
type Kit struct {
	// Ctx is the suite's context; Client the administrator client of StartSuite.
	Ctx    context.Context
	Client client.Client
	// Prefix starts every namespace name (a suite's short name).
	Prefix string

	seq atomic.Int64
}

// Namespace creates a fresh namespace, so specs cannot see each other's objects.
func (k *Kit) Namespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{}
	ns.Name = fmt.Sprintf("%s-%d-%d", k.Prefix, GinkgoParallelProcess(), k.seq.Add(1))
	Expect(k.Client.Create(k.Ctx, ns)).To(Succeed())
	return ns.Name
}

// Get reads o afresh from the API server into o and returns it.
func Get[T client.Object](k *Kit, o T) T {
	GinkgoHelper()
	Expect(k.Client.Get(k.Ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
	return o
}

// Update applies fn to a fresh copy of o and writes it, retrying on conflicts with the
// controllers' own writes.
func Update[T client.Object](k *Kit, o T, fn func(T)) {
	GinkgoHelper()
	Eventually(func() error {
		if err := k.Client.Get(k.Ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return err
		}
		fn(o)
		return k.Client.Update(k.Ctx, o)
	}).Should(Succeed())
}

// Gone returns a function reporting whether o no longer exists (for Eventually).
func (k *Kit) Gone(o client.Object) func() bool {
	return func() bool {
		err := k.Client.Get(k.Ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))
		return apierrors.IsNotFound(err)
	}
}

// JobsOf lists every Job of the object of kind on the API server, by CAPTF's owner labels.
func (k *Kit) JobsOf(o client.Object, kind string) []batchv1.Job {
	GinkgoHelper()
	list := &batchv1.JobList{}
	Expect(k.Client.List(k.Ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{
		infrav1.OwnerKindLabel: kind, infrav1.OwnerNameLabel: naming.LabelValue(o.GetName())})).To(Succeed())
	return list.Items
}

// Poke changes a test annotation on o, so the controllers reconcile it again (a watch event).
func (k *Kit) Poke(o client.Object) {
	GinkgoHelper()
	Eventually(func() error {
		fresh := o.DeepCopyObject().(client.Object)
		if err := k.Client.Get(k.Ctx, client.ObjectKeyFromObject(o), fresh); err != nil {
			return err
		}
		a := fresh.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a["test.captf.io/poke"] = time.Now().Format(time.RFC3339Nano)
		fresh.SetAnnotations(a)
		return k.Client.Update(k.Ctx, fresh)
	}).Should(Succeed())
}

// Conditioned is any object with metav1 conditions (the three kinds).
type Conditioned interface{ GetConditions() []metav1.Condition }

// Condition returns the condition t of o, or nil.
func Condition(o Conditioned, t string) *metav1.Condition {
	return meta.FindStatusCondition(o.GetConditions(), t)
}
