package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/inputs"
	"github.com/captf/cluster-api-provider-terraform/controllers/jobstatus"
	"github.com/captf/cluster-api-provider-terraform/controllers/metrics"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/state"
)

// State safety (ARCHITECTURE.md I6 and I7): the state Secret, its backups and the durable
// inputs carry the protection finalizer captf.io/state-protection, which only the controller
// removes: after a successful destroy (cleanup), a Retain deletion or an audited abandon.

// secretMeta reads a Secret's metadata live; nil when there is none.
func (p *pass) secretMeta(ctx context.Context, name string) (*metav1.PartialObjectMetadata, error) {
	s := &metav1.PartialObjectMetadata{}
	s.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := p.r.APIReader.Get(ctx, types.NamespacedName{Namespace: p.obj.GetNamespace(), Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read secret %s: %w", name, err)
	}
	return s, nil
}

// patchSecretMeta writes a JSON merge patch of a Secret's metadata, guarded by the
// resourceVersion it was computed from (a finalizer list is replaced whole, so a concurrent
// change must not be overwritten).
func (p *pass) patchSecretMeta(ctx context.Context, s *metav1.PartialObjectMetadata, meta map[string]any) error {
	meta["resourceVersion"] = s.ResourceVersion
	body, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return fmt.Errorf("build patch of secret %s: %w", s.Name, err)
	}
	target := &corev1.Secret{}
	target.Namespace, target.Name = s.Namespace, s.Name
	if err := p.r.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("patch secret %s: %w", s.Name, err)
	}
	return nil
}

// ownerLabels are the labels that tie a Secret of the object to it, with its role.
func (p *pass) ownerLabels(role string) map[string]string {
	l := naming.OwnerLabels(p.r.Kind.Name(), p.obj.GetName(), p.owner.Cluster, naming.ShardOf(p.obj))
	l[infrav1.SecretRoleLabel] = role
	l[inputs.MoveLabel] = ""
	return l
}

// protectState labels the object's Terraform state Secret (owner labels, so the metadata cache
// sees it; clusterctl's move label, so a move carries it) and puts the protection finalizer on
// it. Terraform's backend writes that Secret, not CAPTF, and keeps an existing Secret's labels
// and finalizers when it writes a new state, so once per Job that touched the state is enough.
// It never adds an owner reference: the garbage collector must never delete a state (I6).
func (p *pass) protectState(ctx context.Context) error {
	s, err := p.secretMeta(ctx, naming.StateSecretName(p.suffix))
	if err != nil || s == nil {
		return err
	}
	want := p.ownerLabels(infrav1.SecretRoleState)
	labels := map[string]any{}
	for k, v := range want {
		if cur, ok := s.Labels[k]; !ok || cur != v {
			labels[k] = v
		}
	}
	hasFinalizer := slices.Contains(s.Finalizers, infrav1.StateProtectionFinalizer)
	if len(labels) == 0 && hasFinalizer {
		return nil
	}
	meta := map[string]any{}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	if !hasFinalizer {
		meta["finalizers"] = append(slices.Clone(s.Finalizers), infrav1.StateProtectionFinalizer)
	}
	return p.patchSecretMeta(ctx, s, meta)
}

// takeBackup copies the state to captf-state-backup-<suffix>-<serial> when its serial is newer
// than the newest backup. It returns the backup taken, or nil.
func (p *pass) takeBackup(ctx context.Context, job string) (*decide.BackupView, error) {
	if p.r.StateBackups <= 0 {
		return nil, nil
	}
	src := &corev1.Secret{}
	err := p.r.APIReader.Get(ctx, types.NamespacedName{Namespace: p.obj.GetNamespace(), Name: naming.StateSecretName(p.suffix)}, src)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state for a backup: %w", err)
	}
	st, err := state.FromSecret(src)
	if err != nil {
		if errors.Is(err, state.ErrNoState) {
			return nil, nil
		}
		if _, ok := state.AsStateError(err); ok {
			log.FromContext(ctx).Info("the state cannot be read; no backup taken", "reason", err.Error())
			return nil, nil
		}
		return nil, fmt.Errorf("read state for a backup: %w", err)
	}
	serial := int64(st.Serial)
	if len(p.ev.State.Backups) > 0 && p.ev.State.Backups[0].Serial >= serial {
		return nil, nil
	}
	gvk, err := apiutil.GVKForObject(p.obj, p.r.Client.Scheme())
	if err != nil {
		return nil, fmt.Errorf("kind of object: %w", err)
	}
	now := p.r.Clock.Now().UTC()
	data := src.Data[state.StateKey]
	b := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.obj.GetNamespace(), Name: naming.StateBackupSecretName(p.suffix, serial),
			Labels: p.ownerLabels(infrav1.SecretRoleStateBackup),
			Annotations: map[string]string{
				infrav1.BackupSerialAnnotation:  strconv.FormatInt(serial, 10),
				infrav1.BackupLineageAnnotation: st.Lineage,
				infrav1.BackupJobAnnotation:     job,
				infrav1.BackupTimeAnnotation:    now.Format(time.RFC3339),
				infrav1.BackupBytesAnnotation:   strconv.Itoa(len(data)),
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(p.obj, gvk)},
			Finalizers:      []string{infrav1.StateProtectionFinalizer},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{state.StateKey: data},
	}
	if err := p.r.Client.Create(ctx, b); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create state backup %s: %w", b.Name, err)
		}
	} else {
		metrics.BackupsTaken.WithLabelValues(p.r.Kind.Name()).Inc()
		metrics.StateSize.Observe(float64(len(data)))
	}
	return &decide.BackupView{Name: b.Name, Serial: serial, Lineage: st.Lineage, Bytes: int64(len(data)), Time: now}, nil
}

// pruneBackups deletes the backups beyond the newest StateBackups (best effort: a backup left
// over is harmless, and the next bookkeeping prunes it).
func (p *pass) pruneBackups(ctx context.Context, backups []decide.BackupView) []decide.BackupView {
	keep := p.r.StateBackups
	if keep <= 0 || len(backups) <= keep {
		return backups
	}
	for _, b := range backups[keep:] {
		if err := p.letGoSecret(ctx, b.Name, true); err != nil {
			log.FromContext(ctx).Error(err, "prune state backup", "backup", b.Name)
		}
	}
	return backups[:keep]
}

// letGoSecret removes the protection finalizer from one of the object's Secrets and, when
// del, deletes it (preconditions: the UID and version read).
func (p *pass) letGoSecret(ctx context.Context, name string, del bool) error {
	s, err := p.secretMeta(ctx, name)
	if err != nil || s == nil {
		return err
	}
	if slices.Contains(s.Finalizers, infrav1.StateProtectionFinalizer) {
		rest := slices.DeleteFunc(slices.Clone(s.Finalizers), func(f string) bool { return f == infrav1.StateProtectionFinalizer })
		if err := p.patchSecretMeta(ctx, s, map[string]any{"finalizers": rest}); err != nil {
			return err
		}
	}
	if !del {
		return nil
	}
	target := &corev1.Secret{}
	target.Namespace, target.Name = s.Namespace, s.Name
	if err := p.r.Client.Delete(ctx, target, client.Preconditions{UID: &s.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete secret %s: %w", name, err)
	}
	return nil
}

// retainSecret hands one of the object's Secrets over to a person: no protection finalizer,
// no owner reference (so the garbage collector keeps it when the object goes), and the
// annotation captf.io/retained.
func (p *pass) retainSecret(ctx context.Context, name string) error {
	s, err := p.secretMeta(ctx, name)
	if err != nil || s == nil {
		return err
	}
	rest := slices.DeleteFunc(slices.Clone(s.Finalizers), func(f string) bool { return f == infrav1.StateProtectionFinalizer })
	var refs []metav1.OwnerReference
	for _, r := range s.OwnerReferences {
		if r.UID != p.obj.GetUID() {
			refs = append(refs, r)
		}
	}
	return p.patchSecretMeta(ctx, s, map[string]any{
		"finalizers":      rest,
		"ownerReferences": refs,
		"annotations":     map[string]string{infrav1.RetainedAnnotation: "true"},
	})
}

// objectSecrets are the names of the state, durable inputs and every backup of the object.
func (p *pass) objectSecrets() []string {
	names := []string{naming.StateSecretName(p.suffix), naming.InputsSecretName(p.suffix)}
	for _, b := range p.ev.State.Backups {
		names = append(names, b.Name)
	}
	return names
}

// restoreState reads the backup named by the restore-state annotation and returns the state
// JSON the restore Job pushes.
func (p *pass) restoreState(ctx context.Context) ([]byte, error) {
	serial, err := strconv.ParseInt(p.ev.State.RestoreSerial, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("restore serial %q: %w", p.ev.State.RestoreSerial, err)
	}
	b := &corev1.Secret{}
	if err := p.r.APIReader.Get(ctx, types.NamespacedName{Namespace: p.obj.GetNamespace(), Name: naming.StateBackupSecretName(p.suffix, serial)}, b); err != nil {
		return nil, fmt.Errorf("read state backup of serial %d: %w", serial, err)
	}
	if !jobstatus.SameIncarnation(b, p.obj.GetUID()) {
		return nil, fmt.Errorf("state backup %s is not owned by this object", b.Name)
	}
	raw, err := state.Decompress(b.Data[state.StateKey])
	if err != nil {
		return nil, fmt.Errorf("read state backup %s: %w", b.Name, err)
	}
	return raw, nil
}
