package objects

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// DefaultModule is the module image a Terraform object gets unless the test sets another one.
const DefaultModule = "example.com/module:1"

// Terraform is one of the three Terraform kinds.
type Terraform interface {
	client.Object
	GetTerraformSpec() *infrav1.TerraformSpec
	GetTerraformStatus() *infrav1.TerraformStatus
}

// TerraformBuilder builds a TerraformCluster, TerraformMachine or TerraformMachinePool.
type TerraformBuilder[T Terraform] struct{ obj T }

// Cluster starts a TerraformCluster named name, member of the Cluster API Cluster of the same
// name, with DefaultModule.
func Cluster(ns, name string) *TerraformBuilder[*infrav1.TerraformCluster] {
	return newTerraform(&infrav1.TerraformCluster{}, ns, name)
}

// Machine starts a TerraformMachine named name, member of the Cluster API Cluster of the same
// name (Cluster changes it), with DefaultModule.
func Machine(ns, name string) *TerraformBuilder[*infrav1.TerraformMachine] {
	return newTerraform(&infrav1.TerraformMachine{}, ns, name)
}

// MachinePool starts a TerraformMachinePool named name, member of the Cluster API Cluster of the
// same name (Cluster changes it), with DefaultModule.
func MachinePool(ns, name string) *TerraformBuilder[*infrav1.TerraformMachinePool] {
	return newTerraform(&infrav1.TerraformMachinePool{}, ns, name)
}

// OfKind starts an object of one of the three kinds by its kind name (infrav1.*Kind); an
// unknown kind builds a TerraformMachinePool, so tables of kinds stay one-liners.
func OfKind(kind, ns, name string) *TerraformBuilder[Terraform] {
	var o Terraform
	switch kind {
	case infrav1.TerraformClusterKind:
		o = &infrav1.TerraformCluster{}
	case infrav1.TerraformMachineKind:
		o = &infrav1.TerraformMachine{}
	default:
		o = &infrav1.TerraformMachinePool{}
	}
	return newTerraform(o, ns, name)
}

func newTerraform[T Terraform](o T, ns, name string) *TerraformBuilder[T] {
	o.SetNamespace(ns)
	o.SetName(name)
	o.SetLabels(map[string]string{infrav1.ClusterNameLabel: name})
	o.GetTerraformSpec().Module = infrav1.ModuleSource{Image: DefaultModule}
	return &TerraformBuilder[T]{obj: o}
}

// Cluster makes the object a member of the Cluster API Cluster named cluster.
func (b *TerraformBuilder[T]) Cluster(cluster string) *TerraformBuilder[T] {
	return b.Label(infrav1.ClusterNameLabel, cluster)
}

// NoCluster removes the cluster-name label: an object that belongs to no Cluster API Cluster,
// as one a person creates by hand may.
func (b *TerraformBuilder[T]) NoCluster() *TerraformBuilder[T] {
	l := b.obj.GetLabels()
	delete(l, infrav1.ClusterNameLabel)
	b.obj.SetLabels(l)
	return b
}

// Module sets the module image.
func (b *TerraformBuilder[T]) Module(image string) *TerraformBuilder[T] {
	b.obj.GetTerraformSpec().Module = infrav1.ModuleSource{Image: image}
	return b
}

// Spec lets the test change anything else of the shared Terraform spec.
func (b *TerraformBuilder[T]) Spec(fn func(*infrav1.TerraformSpec)) *TerraformBuilder[T] {
	fn(b.obj.GetTerraformSpec())
	return b
}

// With lets the test change what no other method sets: a kind's own fields (a machine's
// providerID, a pool's provider ID list), the status.
func (b *TerraformBuilder[T]) With(fn func(T)) *TerraformBuilder[T] {
	fn(b.obj)
	return b
}

// Label sets a label.
func (b *TerraformBuilder[T]) Label(key, value string) *TerraformBuilder[T] {
	l := b.obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[key] = value
	b.obj.SetLabels(l)
	return b
}

// Annotation sets an annotation.
func (b *TerraformBuilder[T]) Annotation(key, value string) *TerraformBuilder[T] {
	a := b.obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	b.obj.SetAnnotations(a)
	return b
}

// Annotations sets every annotation of m.
func (b *TerraformBuilder[T]) Annotations(m map[string]string) *TerraformBuilder[T] {
	for k, v := range m {
		b.Annotation(k, v)
	}
	return b
}

// OwnerRef adds an owner reference: the one Cluster API's Machine or MachinePool controller
// puts on the infrastructure object of its member.
func (b *TerraformBuilder[T]) OwnerRef(ref metav1.OwnerReference) *TerraformBuilder[T] {
	b.obj.SetOwnerReferences(append(b.obj.GetOwnerReferences(), ref))
	return b
}

// BlockMove sets clusterctl's block-move annotation.
func (b *TerraformBuilder[T]) BlockMove() *TerraformBuilder[T] {
	return b.Annotation(infrav1.BlockMoveAnnotation, "")
}

// Paused sets Cluster API's paused annotation on the object.
func (b *TerraformBuilder[T]) Paused() *TerraformBuilder[T] {
	return b.Annotation(infrav1.PausedAnnotation, "")
}

// Finalizer adds CAPTF's finalizer.
func (b *TerraformBuilder[T]) Finalizer() *TerraformBuilder[T] {
	b.obj.SetFinalizers(append(b.obj.GetFinalizers(), infrav1.Finalizer))
	return b
}

// UID sets the object's UID (the incarnation a Job's owner reference names); for objects that
// are never created on an API server, which assigns its own.
func (b *TerraformBuilder[T]) UID(uid types.UID) *TerraformBuilder[T] {
	b.obj.SetUID(uid)
	return b
}

// ActiveJob records a running Job in the status (status writes go through the status
// subresource: a test creates the object first, then updates its status).
func (b *TerraformBuilder[T]) ActiveJob(name string, op infrav1.Operation) *TerraformBuilder[T] {
	b.obj.GetTerraformStatus().ActiveJob = &infrav1.ActiveJob{Name: name, Operation: op}
	return b
}

// ActiveJobSince is ActiveJob with the time the controller created the Job.
func (b *TerraformBuilder[T]) ActiveJobSince(name string, op infrav1.Operation, start metav1.Time) *TerraformBuilder[T] {
	b.obj.GetTerraformStatus().ActiveJob = &infrav1.ActiveJob{Name: name, Operation: op, StartTime: &start}
	return b
}

// Obj returns the object.
func (b *TerraformBuilder[T]) Obj() T { return b.obj }
