package engine

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// readPlan reads the record a plan Job's state channel stored in the plan Secret, live, and
// judges the plan by the plan policies that select the object.
func (p *pass) readPlan(ctx context.Context, cur decide.JobView) (*infrav1.PlanRecord, error) {
	s := &corev1.Secret{}
	name := naming.PlanSecretName(p.suffix)
	if err := p.r.APIReader.Get(ctx, types.NamespacedName{Namespace: p.obj.GetNamespace(), Name: name}, s); err != nil {
		return nil, fmt.Errorf("read plan secret %s: %w", name, err)
	}
	var rec runnerapi.PlanRecord
	if err := json.Unmarshal(s.Data[runnerapi.PlanRecordKey], &rec); err != nil {
		return nil, fmt.Errorf("read the plan record of %s: %w", name, err)
	}
	if rec.Job != cur.Name {
		return nil, fmt.Errorf("plan secret %s holds the plan of Job %s, not of %s", name, rec.Job, cur.Name)
	}
	return decide.PlanRecordOf(rec, name, p.ev.Plan.ApplyPolicy, p.judgePlan(ctx, s, rec)), nil
}
