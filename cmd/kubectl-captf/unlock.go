package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// Verdicts of unlock: who holds the lock and who may release it.
const (
	// LockFree: nobody holds the lock.
	LockFree = "Free"
	// LockHeldByRunningJob: a CAPTF Job's state channel holds it and its pod may still run:
	// wait for it.
	LockHeldByRunningJob = "HeldByRunningJob"
	// LockStaleJob: a CAPTF Job's state channel took it and its pod is gone or finished: the
	// next Job of the object breaks it (I8).
	LockStaleJob = "StaleJobLock"
	// LockHeldOutsideCAPTF: a person's terraform, a pipeline, or anything without the state
	// channel's marks holds it: never broken by CAPTF; a person releases it (the runbook).
	LockHeldOutsideCAPTF = "HeldOutsideCAPTF"
)

// LockView is what unlock shows. It is the JSON and YAML output of unlock.
type LockView struct {
	objectID
	Lease   string `json:"lease"`
	Missing bool   `json:"missing,omitempty"`
	// LockID is the Lease's holderIdentity; Info terraform's lock info.
	LockID string         `json:"lockID,omitempty"`
	Info   map[string]any `json:"info,omitempty"`
	// Pod and Job are the state channel's marks; PodPhase the pod's phase ("" when it is gone).
	Pod      string `json:"pod,omitempty"`
	Job      string `json:"job,omitempty"`
	PodPhase string `json:"podPhase,omitempty"`
	PodGone  bool   `json:"podGone,omitempty"`
	Verdict  string `json:"verdict"`
	// Advice is what to do; Commands the runbook's commands for a person's release.
	Advice   string   `json:"advice"`
	Commands []string `json:"commands,omitempty"`
}

func newUnlockCommand(o *options) *cobra.Command {
	return viewCommand(o, "unlock KIND/NAME",
		"Show who holds the object's Terraform state lock and the evidence; prints the runbook's release commands, never releases it itself",
		readLock, renderLock)
}

func readLock(ctx context.Context, c client.Client, t target) (LockView, error) {
	suffix := naming.StateSuffix(t.obj.GetNamespace(), t.kind.Kind, t.obj.GetName())
	v := LockView{objectID: t.id(), Lease: naming.StateLockLeaseName(suffix)}
	l := &coordinationv1.Lease{}
	found, err := getIfExists(ctx, c, "the lock Lease", types.NamespacedName{Namespace: v.Namespace, Name: v.Lease}, l)
	if err != nil {
		return v, err
	}
	v.Missing = !found
	if l.Spec.HolderIdentity != nil {
		v.LockID = *l.Spec.HolderIdentity
	}
	if raw := l.Annotations[runnerapi.StateLockInfoAnnotation]; raw != "" {
		info := map[string]any{}
		if json.Unmarshal([]byte(raw), &info) == nil {
			v.Info = info
		}
	}
	v.Pod, v.Job = l.Annotations[runnerapi.LockPodAnnotation], l.Annotations[runnerapi.LockJobAnnotation]
	if v.LockID != "" && v.Pod != "" {
		pod := &corev1.Pod{}
		found, err := getIfExists(ctx, c, "the lock holder's pod", types.NamespacedName{Namespace: v.Namespace, Name: v.Pod}, pod)
		if err != nil {
			return v, err
		}
		v.PodGone, v.PodPhase = !found, string(pod.Status.Phase)
	}
	judgeLock(&v, suffix)
	return v, nil
}

// judgeLock sets the verdict, the advice and the runbook's commands (docs/runbooks/stale-lock.md).
// It never proposes that the plugin release a lock: only the state channel breaks a stale lock
// (I8), and only a person can tell that a lock held outside CAPTF is abandoned.
func judgeLock(v *LockView, suffix string) {
	switch {
	case v.LockID == "":
		v.Verdict, v.Advice = LockFree, "nobody holds the state lock"
		return
	case v.Pod != "" && !v.PodGone && !runnerapi.PodTerminal(v.PodPhase):
		v.Verdict = LockHeldByRunningJob
		v.Advice = fmt.Sprintf("Job %s holds the lock and its pod %s is %s: wait for it to finish", v.Job, v.Pod, orUnknown(v.PodPhase))
		return
	case v.Pod != "":
		v.Verdict = LockStaleJob
		v.Advice = fmt.Sprintf("Job %s took the lock and its pod %s is gone or finished: the object's next Job breaks it by itself (I8, event StateLockBroken); retry now with: kubectl captf retry %s/%s", v.Job, v.Pod, kindArg(v.Kind), v.Name)
		return
	}
	v.Verdict = LockHeldOutsideCAPTF
	v.Advice = "the lock was taken outside CAPTF's Jobs (see Who): CAPTF never breaks it. Ask its holder; once you know the holder is gone, release it with one of the commands below (docs/runbooks/stale-lock.md), then kubectl captf retry"
	v.Commands = []string{
		fmt.Sprintf("terraform force-unlock -force %s   # in a folder whose backend \"kubernetes\" has secret_suffix = %q, namespace = %q", v.LockID, suffix, v.Namespace),
		fmt.Sprintf("kubectl -n %s patch lease %s --type=json -p '[{\"op\":\"remove\",\"path\":\"/spec/holderIdentity\"},{\"op\":\"remove\",\"path\":\"/metadata/annotations/app.terraform.io~1lock-info\"}]'", v.Namespace, v.Lease),
	}
}

func renderLock(p *printer, v LockView) error {
	p.line("", "%s %s/%s: state lock Lease %s", v.Kind, v.Namespace, v.Name, v.Lease)
	if v.Missing {
		p.line("", "  the Lease does not exist yet (the controller creates it before the object's first Job)")
	}
	if v.LockID != "" {
		p.line("", "  lock ID:   %s", v.LockID)
		for _, k := range []string{"Who", "Operation", "Created", "Version"} {
			if val, ok := v.Info[k]; ok {
				p.line("", "  %-10s %v", k+":", val)
			}
		}
		if v.Pod != "" {
			state := orUnknown(v.PodPhase)
			if v.PodGone {
				state = "gone"
			}
			p.line("", "  taken by:  Job %s, pod %s (%s)", v.Job, v.Pod, state)
		}
	}
	p.line("", "  verdict:   %s: %s", v.Verdict, v.Advice)
	for _, c := range v.Commands {
		p.line("", "  $ %s", c)
	}
	return p.err
}

func orUnknown(phase string) string {
	if phase == "" {
		return "phase unknown"
	}
	return phase
}
