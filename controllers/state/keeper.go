package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/replica"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// Subject is the object whose state a Keeper keeps.
type Subject struct {
	// Object is the CAPTF object: its namespace holds the state, and it owns the backups and
	// the inventory (controller owner reference).
	Object client.Object
	// Kind is its kind's name (TerraformCluster, TerraformMachine, ...).
	Kind string
	// Suffix names its Secrets and Leases (naming.StateSuffix).
	Suffix string
	// Cluster is the Cluster API Cluster it belongs to ("" for none).
	Cluster string
}

// Keeper keeps the states of CAPTF's objects: it protects the state Secret the backend
// writes, takes and prunes its backups, reads a backup back for a restore, writes the
// inventory, and lets the state, its backups and its lock Lease go after a destroy, a Retain
// deletion or an audited abandon (ARCHITECTURE.md I6 and I7). It never deletes a state that
// holds resources: the caller decides when (controllers/decide); the Keeper only does it.
// Every read that a write depends on goes through APIReader (Secrets are never cached).
type Keeper struct {
	// Client writes (and reads what it writes when CreateOrUpdate needs to).
	Client client.Client
	// APIReader reads through the API server.
	APIReader client.Reader
	// SecretMeta reads the metadata of CAPTF's Secrets from a metadata informer. Nil: Secrets
	// reports nothing (the state is then read live when it matters).
	SecretMeta client.Reader
	// Backups is how many state backups to keep per object; 0 takes none.
	Backups int
	// Clock stamps the backups (default: the real clock).
	Clock clock.Clock
	// BackupTaken, when set, is told of each backup the Keeper creates: the subject's kind and
	// the state's size (the manager counts them, controllers/metrics; the package itself
	// exports no metric, so the kubectl plugin that reads states carries none).
	BackupTaken func(kind string, bytes int)
	// Replica, when set, receives every state version a Job leaves, sealed (Replicate; nil
	// keeps no replica). ReplicaWritten, when set, is told of each attempt (the manager counts
	// them, controllers/metrics).
	Replica        *replica.Store
	ReplicaWritten func(kind string, r *decide.ReplicaResult)
}

// SecretsView is what the metadata cache says of a subject's Secrets.
type SecretsView struct {
	// StateCached: the state Secret is in the cache.
	StateCached bool
	// Backups are the backups of this incarnation of the object, newest first.
	Backups []decide.BackupView
}

// SecretSelector selects every Secret CAPTF keeps for the object kind/name, whatever its role:
// the state, its backups, the durable inputs, the outputs, the inventory and the plan. The
// keeper lists by it, and so does the kubectl plugin.
func SecretSelector(kind, name string) client.MatchingLabels {
	return client.MatchingLabels{infrav1.ManagedLabel: "true", infrav1.OwnerKindLabel: kind, infrav1.OwnerNameLabel: naming.LabelValue(name)}
}

// Retained reports whether an object's Secret of this role (its captf.io/secret-role label) is
// handed over to a person when the object is let go without a destroy (a Retain deletion or
// an audited abandon): the state, its backups and the durable inputs (Names). Every other
// Secret of the object goes with it.
func Retained(role string) bool {
	switch role {
	case infrav1.SecretRoleState, infrav1.SecretRoleStateBackup, infrav1.SecretRoleInputs:
		return true
	}
	return false
}

// Read reads the subject's state live (ErrNoState when there is none, a *StateError when it is
// unreadable).
func (k *Keeper) Read(ctx context.Context, s Subject) (*State, error) {
	return Read(ctx, k.APIReader, s.Object.GetNamespace(), s.Suffix)
}

// Secrets lists, from the metadata cache, whether the subject's state Secret is there and which
// backups its current incarnation has.
func (k *Keeper) Secrets(ctx context.Context, s Subject) (SecretsView, error) {
	var v SecretsView
	if k.SecretMeta == nil {
		return v, nil
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := k.SecretMeta.List(ctx, list, client.InNamespace(s.Object.GetNamespace()), SecretSelector(s.Kind, s.Object.GetName())); err != nil {
		return v, fmt.Errorf("list secrets' metadata: %w", err)
	}
	stateName := naming.StateSecretName(s.Suffix)
	for i := range list.Items {
		m := &list.Items[i]
		switch {
		case m.Name == stateName:
			v.StateCached = true
		case m.Labels[infrav1.SecretRoleLabel] == infrav1.SecretRoleStateBackup && jobstatus.SameIncarnation(m, s.Object.GetUID()):
			if b, ok := BackupOf(m); ok {
				v.Backups = append(v.Backups, b)
			}
		}
	}
	sort.Slice(v.Backups, func(i, j int) bool { return v.Backups[i].Serial > v.Backups[j].Serial })
	return v, nil
}

// BackupOf reads a backup Secret's annotations; ok is false when its serial does not parse.
func BackupOf(s metav1.Object) (decide.BackupView, bool) {
	a := s.GetAnnotations()
	serial, err := strconv.ParseInt(a[infrav1.BackupSerialAnnotation], 10, 64)
	if err != nil {
		return decide.BackupView{}, false
	}
	b := decide.BackupView{Name: s.GetName(), Serial: serial, Lineage: a[infrav1.BackupLineageAnnotation]}
	b.Bytes, _ = strconv.ParseInt(a[infrav1.BackupBytesAnnotation], 10, 64)
	b.Time, _ = time.Parse(time.RFC3339, a[infrav1.BackupTimeAnnotation])
	return b, true
}

// Names are the names of the subject's state, durable inputs and every backup given: the
// Secrets a Retain deletion or an abandon hands over (Retained).
func Names(suffix string, backups []decide.BackupView) []string {
	names := []string{naming.StateSecretName(suffix), naming.InputsSecretName(suffix)}
	for _, b := range backups {
		names = append(names, b.Name)
	}
	return names
}

// OwnerLabels are the labels that tie a Secret of the subject to it, with its role, and
// clusterctl's move label.
func OwnerLabels(s Subject, role string) map[string]string {
	l := naming.OwnerLabels(s.Kind, s.Object.GetName(), s.Cluster, naming.ShardOf(s.Object))
	l[infrav1.SecretRoleLabel] = role
	l[MoveLabel] = ""
	return l
}

// secretMeta reads a Secret's metadata live; nil when there is none.
func (k *Keeper) secretMeta(ctx context.Context, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := k.APIReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, m); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read secret %s: %w", name, err)
	}
	return m, nil
}

// patchSecretMeta writes a JSON merge patch of a Secret's metadata, guarded by the
// resourceVersion it was computed from (a finalizer list is replaced whole, so a concurrent
// change must not be overwritten).
func (k *Keeper) patchSecretMeta(ctx context.Context, m *metav1.PartialObjectMetadata, meta map[string]any) error {
	meta["resourceVersion"] = m.ResourceVersion
	body, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return fmt.Errorf("build patch of secret %s: %w", m.Name, err)
	}
	target := &corev1.Secret{}
	target.Namespace, target.Name = m.Namespace, m.Name
	if err := k.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("patch secret %s: %w", m.Name, err)
	}
	return nil
}

// Ensure creates the subject's state Secret (empty, labelled for the backend and for its
// owner, protected, never owned: the garbage collector must never delete a state) and the
// backend's lock Lease, each only when a live read shows it missing, before the first Job that
// uses them: the state channel may then read and update them but needs no create permission.
//
// The lock Lease is owned by the subject (an owner reference, no controller, no
// blockOwnerDeletion), so the garbage collector deletes it once the object is gone however it
// went: clusterctl move never carries Leases and strips the source object's finalizer itself,
// so nothing else would. A lock Lease created before it was owned gets the reference here.
func (k *Keeper) Ensure(ctx context.Context, s Subject) error {
	ns := s.Object.GetNamespace()
	stateLabels := OwnerLabels(s, infrav1.SecretRoleState)
	maps.Copy(stateLabels, runnerapi.StateLabels(s.Suffix))
	state := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: naming.StateSecretName(s.Suffix), Labels: stateLabels,
		Finalizers: []string{infrav1.StateProtectionFinalizer}}, Type: corev1.SecretTypeOpaque}
	if _, err := CreateIfMissing(ctx, k.Client, k.APIReader, state); err != nil {
		return err
	}
	owner, err := k.ownerReference(s)
	if err != nil {
		return err
	}
	lock := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: naming.StateLockLeaseName(s.Suffix),
		Labels: runnerapi.StateLabels(s.Suffix), OwnerReferences: []metav1.OwnerReference{owner}}}
	found, err := CreateIfMissing(ctx, k.Client, k.APIReader, lock)
	if err != nil || found == nil {
		return err
	}
	existing := found.(*coordinationv1.Lease)
	if slices.ContainsFunc(existing.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == owner.UID }) {
		return nil
	}
	patched := existing.DeepCopy()
	patched.OwnerReferences = append(patched.OwnerReferences, owner)
	if err := k.Client.Patch(ctx, patched, client.MergeFromWithOptions(existing, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("own the state lock lease %s: %w", existing.Name, err)
	}
	return nil
}

// ownerReference is a plain owner reference to the subject: no controller, no
// blockOwnerDeletion (which would need update on the kind's finalizers).
func (k *Keeper) ownerReference(s Subject) (metav1.OwnerReference, error) {
	gvk, err := apiutil.GVKForObject(s.Object, k.Client.Scheme())
	if err != nil {
		return metav1.OwnerReference{}, fmt.Errorf("kind of object: %w", err)
	}
	return metav1.OwnerReference{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: s.Object.GetName(), UID: s.Object.GetUID()}, nil
}

// CreateIfMissing creates o unless a live read finds it: it returns what it found (nil when it
// created o, or when o was created meanwhile: AlreadyExists). The keeper's Ensure and the
// engine's runner access create what the state channel needs this way, so a Job's start never
// overwrites what is there.
func CreateIfMissing(ctx context.Context, c client.Client, live client.Reader, o client.Object) (client.Object, error) {
	existing := o.DeepCopyObject().(client.Object)
	err := live.Get(ctx, client.ObjectKeyFromObject(o), existing)
	switch {
	case err == nil:
		return existing, nil
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("read %T %s: %w", o, o.GetName(), err)
	}
	if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
	}
	return nil, nil
}

// Protect labels the subject's Terraform state Secret (owner labels, so the metadata cache
// sees it; clusterctl's move label, so a move carries it) and puts the protection finalizer on
// it. Terraform's backend writes that Secret, not CAPTF, and keeps an existing Secret's labels
// and finalizers when it writes a new state, so once per Job that touched the state is enough.
// It never adds an owner reference: the garbage collector must never delete a state (I6).
func (k *Keeper) Protect(ctx context.Context, s Subject) error {
	m, err := k.secretMeta(ctx, s.Object.GetNamespace(), naming.StateSecretName(s.Suffix))
	if err != nil || m == nil {
		return err
	}
	want := OwnerLabels(s, infrav1.SecretRoleState)
	labels := map[string]any{}
	for key, v := range want {
		if cur, ok := m.Labels[key]; !ok || cur != v {
			labels[key] = v
		}
	}
	hasFinalizer := slices.Contains(m.Finalizers, infrav1.StateProtectionFinalizer)
	if len(labels) == 0 && hasFinalizer {
		return nil
	}
	meta := map[string]any{}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	if !hasFinalizer {
		meta["finalizers"] = append(slices.Clone(m.Finalizers), infrav1.StateProtectionFinalizer)
	}
	return k.patchSecretMeta(ctx, m, meta)
}

// liveState reads the subject's state Secret live, for purpose ("a backup", "the replica"): the
// Secret and its state, or nils when there is no state to copy (no Secret, an empty one, or one
// that cannot be read as a state, which holds the object elsewhere: StateReadable). Only a failed
// read is an error.
func (k *Keeper) liveState(ctx context.Context, s Subject, purpose string) (*corev1.Secret, *State, error) {
	src := &corev1.Secret{}
	err := k.APIReader.Get(ctx, types.NamespacedName{Namespace: s.Object.GetNamespace(), Name: naming.StateSecretName(s.Suffix)}, src)
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read state for %s: %w", purpose, err)
	}
	st, err := FromSecret(src)
	if err != nil {
		if errors.Is(err, ErrNoState) {
			return nil, nil, nil
		}
		if _, ok := AsStateError(err); ok {
			log.FromContext(ctx).Info("the state cannot be read; nothing copied", "for", purpose, "reason", err.Error())
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("read state for %s: %w", purpose, err)
	}
	return src, st, nil
}

// Backup copies the subject's state to captf-state-backup-<suffix>-<serial> when its serial
// is newer than the newest of have (its backups, newest first). It returns the backup taken,
// or nil.
func (k *Keeper) Backup(ctx context.Context, s Subject, job string, have []decide.BackupView) (*decide.BackupView, error) {
	if k.Backups <= 0 {
		return nil, nil
	}
	src, st, err := k.liveState(ctx, s, "a backup")
	if err != nil || st == nil {
		return nil, err
	}
	serial := int64(st.Serial)
	if len(have) > 0 && have[0].Serial >= serial {
		return nil, nil
	}
	return k.writeBackup(ctx, s, serial, st.Lineage, job, src.Data[StateKey])
}

// writeBackup creates the backup Secret of serial (data: the state as the backend's Secret
// holds it), owned by the subject and protected; an existing one is kept as it is (a backup
// of a serial is written once).
func (k *Keeper) writeBackup(ctx context.Context, s Subject, serial int64, lineage, job string, data []byte) (*decide.BackupView, error) {
	gvk, err := apiutil.GVKForObject(s.Object, k.Client.Scheme())
	if err != nil {
		return nil, fmt.Errorf("kind of object: %w", err)
	}
	now := k.now().UTC()
	b := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Object.GetNamespace(), Name: naming.StateBackupSecretName(s.Suffix, serial),
			Labels: OwnerLabels(s, infrav1.SecretRoleStateBackup),
			Annotations: map[string]string{
				infrav1.BackupSerialAnnotation:  strconv.FormatInt(serial, 10),
				infrav1.BackupLineageAnnotation: lineage,
				infrav1.BackupJobAnnotation:     job,
				infrav1.BackupTimeAnnotation:    now.Format(time.RFC3339),
				infrav1.BackupBytesAnnotation:   strconv.Itoa(len(data)),
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(s.Object, gvk)},
			Finalizers:      []string{infrav1.StateProtectionFinalizer},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{StateKey: data},
	}
	if err := k.Client.Create(ctx, b); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create state backup %s: %w", b.Name, err)
		}
	} else if k.BackupTaken != nil {
		k.BackupTaken(s.Kind, len(data))
	}
	return &decide.BackupView{Name: b.Name, Serial: serial, Lineage: lineage, Bytes: int64(len(data)), Time: now}, nil
}

func (k *Keeper) now() time.Time {
	if k.Clock == nil {
		return time.Now()
	}
	return k.Clock.Now()
}

// PruneBackups deletes the backups (newest first) beyond the newest Backups and returns those
// kept (best effort: a backup left over is harmless, and the next bookkeeping prunes it).
func (k *Keeper) PruneBackups(ctx context.Context, s Subject, backups []decide.BackupView) []decide.BackupView {
	if k.Backups <= 0 || len(backups) <= k.Backups {
		return backups
	}
	for _, b := range backups[k.Backups:] {
		if err := k.LetGo(ctx, s, b.Name, true); err != nil {
			log.FromContext(ctx).Error(err, "prune state backup", "backup", b.Name)
		}
	}
	return backups[:k.Backups]
}

// LetGo removes the protection finalizer from one of the subject's Secrets and, when del,
// deletes it (preconditions: the UID read).
func (k *Keeper) LetGo(ctx context.Context, s Subject, name string, del bool) error {
	m, err := k.secretMeta(ctx, s.Object.GetNamespace(), name)
	if err != nil || m == nil {
		return err
	}
	if slices.Contains(m.Finalizers, infrav1.StateProtectionFinalizer) {
		rest := slices.DeleteFunc(slices.Clone(m.Finalizers), func(f string) bool { return f == infrav1.StateProtectionFinalizer })
		if err := k.patchSecretMeta(ctx, m, map[string]any{"finalizers": rest}); err != nil {
			return err
		}
	}
	if !del {
		return nil
	}
	target := &corev1.Secret{}
	target.Namespace, target.Name = m.Namespace, m.Name
	if err := k.Client.Delete(ctx, target, client.Preconditions{UID: &m.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete secret %s: %w", name, err)
	}
	return nil
}

// Retain hands one of the subject's Secrets over to a person: no protection finalizer, no
// owner reference to the subject (so the garbage collector keeps it when the object goes),
// and the annotation captf.io/retained.
func (k *Keeper) Retain(ctx context.Context, s Subject, name string) error {
	m, err := k.secretMeta(ctx, s.Object.GetNamespace(), name)
	if err != nil || m == nil {
		return err
	}
	rest := slices.DeleteFunc(slices.Clone(m.Finalizers), func(f string) bool { return f == infrav1.StateProtectionFinalizer })
	var refs []metav1.OwnerReference
	for _, r := range m.OwnerReferences {
		if r.UID != s.Object.GetUID() {
			refs = append(refs, r)
		}
	}
	return k.patchSecretMeta(ctx, m, map[string]any{
		"finalizers":      rest,
		"ownerReferences": refs,
		"annotations":     map[string]string{infrav1.RetainedAnnotation: "true"},
	})
}

// Restore reads the backup of the given serial (the restore-state annotation's value) and
// returns the state JSON a restore Job pushes. A backup of another incarnation is refused.
func (k *Keeper) Restore(ctx context.Context, s Subject, serialText string) ([]byte, error) {
	serial, err := strconv.ParseInt(serialText, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("restore serial %q: %w", serialText, err)
	}
	b := &corev1.Secret{}
	if err := k.APIReader.Get(ctx, types.NamespacedName{Namespace: s.Object.GetNamespace(), Name: naming.StateBackupSecretName(s.Suffix, serial)}, b); err != nil {
		return nil, fmt.Errorf("read state backup of serial %d: %w", serial, err)
	}
	if !jobstatus.SameIncarnation(b, s.Object.GetUID()) {
		return nil, fmt.Errorf("state backup %s is not owned by this object", b.Name)
	}
	raw, err := Decompress(b.Data[StateKey])
	if err != nil {
		return nil, fmt.Errorf("read state backup %s: %w", b.Name, err)
	}
	return raw, nil
}

// Lineage reads the lineage of the subject's state as it is now: "" when there is none, or
// none that reads (an unreadable state holds the object on its next pass).
func (k *Keeper) Lineage(ctx context.Context, s Subject) (string, error) {
	st, err := k.Read(ctx, s)
	switch {
	case err == nil:
		return st.Lineage, nil
	case errors.Is(err, ErrNoState):
		return "", nil
	}
	if _, ok := AsStateError(err); ok {
		return "", nil
	}
	return "", fmt.Errorf("read state lineage: %w", err)
}

// ReadOutputs reads the subject's state live after an apply, for its outputs. A state that is
// missing or unreadable is an outputs problem (the second error: an *OutputError to report),
// not an error to retry blindly (the third).
func (k *Keeper) ReadOutputs(ctx context.Context, s Subject) (*State, error, error) {
	st, err := k.Read(ctx, s)
	switch {
	case err == nil:
		return st, nil, nil
	case errors.Is(err, ErrNoState):
		return nil, &OutputError{Reason: infrav1.OutputMissingReason,
			Message: "the apply succeeded but left no state Secret " + naming.StateSecretName(s.Suffix)}, nil
	}
	if se, ok := AsStateError(err); ok {
		return nil, &OutputError{Reason: infrav1.OutputInvalidReason, Message: se.Error()}, nil
	}
	return nil, nil, fmt.Errorf("read state: %w", err)
}

// WriteInventory lists the resource instances of st in the subject's inventory Secret
// (naming.InventorySecretName, docs/state.md "The inventory"); WriteSecret updates the Secret
// only when its content differs from what is there.
func (k *Keeper) WriteInventory(ctx context.Context, s Subject, st *State) error {
	return k.writeOwned(ctx, s, "inventory", func(gvk schema.GroupVersionKind) (*corev1.Secret, error) {
		return InventorySecret(s.Object, gvk, s.Suffix, InventoryOf(st))
	})
}

// WriteOutputs offers every module output of st to users in a Secret owned by the subject
// (naming.OutputsSecretName): sensitive outputs go there and nowhere else (never status or
// events). Outputs that do not fit a Secret come back as an *OutputError.
func (k *Keeper) WriteOutputs(ctx context.Context, s Subject, st *State) error {
	return k.writeOwned(ctx, s, "outputs", func(gvk schema.GroupVersionKind) (*corev1.Secret, error) {
		want, err := OutputsSecret(s.Object, gvk, s.Suffix, st)
		if err == nil {
			want.Labels[infrav1.SecretRoleLabel] = infrav1.SecretRoleOutputs
		}
		return want, err
	})
}

// writeOwned builds one of the subject's Secrets owned by it (build gets the subject's kind)
// and writes it; an *OutputError from build comes back as it is.
func (k *Keeper) writeOwned(ctx context.Context, s Subject, what string, build func(schema.GroupVersionKind) (*corev1.Secret, error)) error {
	gvk, err := apiutil.GVKForObject(s.Object, k.Client.Scheme())
	if err != nil {
		return fmt.Errorf("kind of object: %w", err)
	}
	want, err := build(gvk)
	if err != nil {
		if _, ok := AsOutputError(err); ok {
			return err
		}
		return fmt.Errorf("build %s secret: %w", what, err)
	}
	if err := WriteSecret(ctx, k.Client, want); err != nil {
		return fmt.Errorf("write %s secret: %w", what, err)
	}
	return nil
}

// Clean lets everything of a destroyed subject's state go: the state Secret and the durable
// inputs lose their protection and are deleted; the backups given lose their protection and
// stay until the object is gone (the garbage collector follows their owner reference), so a
// mistaken destroy can still be undone from them meanwhile; the outputs and the inventory are
// deleted; the lock Lease is deleted when no terraform holds it. The caller has judged that
// the state is empty or absent (I6) and that no lease of the subject is live.
func (k *Keeper) Clean(ctx context.Context, s Subject, backups []decide.BackupView) error {
	for _, name := range []string{naming.StateSecretName(s.Suffix), naming.InputsSecretName(s.Suffix)} {
		if err := k.LetGo(ctx, s, name, true); err != nil {
			return err
		}
	}
	for _, b := range backups {
		if err := k.LetGo(ctx, s, b.Name, false); err != nil {
			return err
		}
	}
	for _, name := range []string{naming.OutputsSecretName(s.Suffix), naming.InventorySecretName(s.Suffix)} {
		sec := &corev1.Secret{}
		sec.Namespace, sec.Name = s.Object.GetNamespace(), name
		if err := k.Client.Delete(ctx, sec); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete secret %s: %w", name, err)
		}
	}
	return k.deleteUnheldLock(ctx, s)
}

// deleteUnheldLock deletes the Terraform backend's lock Lease once the state is gone, but only
// when no terraform holds it (no holder), with UID and resourceVersion preconditions so a lock
// taken meanwhile stays. A held lock is left alone: it is terraform's, and only its owner or a
// force-unlock may release it.
func (k *Keeper) deleteUnheldLock(ctx context.Context, s Subject) error {
	l := &coordinationv1.Lease{}
	key := types.NamespacedName{Namespace: s.Object.GetNamespace(), Name: naming.StateLockLeaseName(s.Suffix)}
	if err := k.APIReader.Get(ctx, key, l); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("read state lock %s: %w", key.Name, err)
	}
	if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
		log.FromContext(ctx).Info("the state lock is held; leaving it", "lease", key.Name, "holder", *l.Spec.HolderIdentity)
		return nil
	}
	pre := client.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion}
	if err := k.Client.Delete(ctx, l, pre); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete state lock %s: %w", key.Name, err)
	}
	return nil
}

// WriteSecret creates want or brings the existing Secret's data, labels and owner references
// in line with it, adding want's finalizers (Secrets are read live: they are never cached).
func WriteSecret(ctx context.Context, c client.Client, want *corev1.Secret) error {
	have := &corev1.Secret{}
	have.Namespace, have.Name = want.Namespace, want.Name
	_, err := controllerutil.CreateOrUpdate(ctx, c, have, func() error {
		have.Data, have.Labels, have.OwnerReferences, have.Type = want.Data, want.Labels, want.OwnerReferences, want.Type
		for _, f := range want.Finalizers {
			controllerutil.AddFinalizer(have, f)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create or update secret %s: %w", want.Name, err)
	}
	return nil
}
