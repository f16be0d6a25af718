package setup

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/captf/cluster-api-provider-terraform/controllers/jobs"
)

// audienceProbeAccount makes sure the ServiceAccount the identity-token audience check mints its
// probe tokens for exists, once, when the manager starts: one live read, and a create only when
// it is missing (every replica, leader or not: the admission webhook of each needs it and
// creates nothing itself). A failure is logged, not
// fatal: the engine creates the account when it needs it, and admission then only warns.
type audienceProbeAccount struct {
	reader  client.Reader
	client  client.Client
	account types.NamespacedName
}

func (a audienceProbeAccount) Start(ctx context.Context) error {
	if err := jobs.EnsureAudienceProbeAccount(ctx, a.reader, a.client, a.account); err != nil {
		log.FromContext(ctx).Error(err, "the identity-token audience check has no probe account yet; admission only warns until the controller creates it",
			"account", a.account.String())
	}
	return nil
}

func (audienceProbeAccount) NeedLeaderElection() bool { return false }
