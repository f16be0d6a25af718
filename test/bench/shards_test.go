package bench

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/controllers/engine"
)

// shardRequests keeps, for one manager, every request it sent to the API server, judged by
// whether it stays in the manager's shard.
type shardRequests struct {
	shard      string
	namespaces []string
	mu         sync.Mutex
	inShard    int
	outside    []string
	byVerb     map[string]int
}

func newShardRequests(shard string, namespaces []string) *shardRequests {
	return &shardRequests{shard: shard, namespaces: namespaces, byVerb: map[string]int{}}
}

func (s *shardRequests) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		ok, what := s.judge(r)
		s.mu.Lock()
		s.byVerb[what]++
		if ok {
			s.inShard++
		} else {
			s.outside = append(s.outside, r.Method+" "+r.URL.String())
		}
		s.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

// unsharded are the paths of the cluster-scoped kinds every manager lists and watches whatever
// its shard: the namespaces (a plan policy selects by their labels) and the plan policies.
var unsharded = []string{"/api/v1/namespaces", "/apis/infrastructure.cluster.x-k8s.io/v1alpha1/terraformplanpolicies"}

// strayed says whether the manager sent a request outside its shard.
func (s *shardRequests) strayed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.outside) > 0
}

// judge says whether a request stays in the shard: discovery; a request in a namespace of the
// shard; a list or watch across namespaces that selects the shard's label; the manager's own
// start-up probe (coldManagerReads, in namespace default); the list and watch of what belongs
// to no shard, which every manager caches: the namespaces' metadata and the plan policies.
func (s *shardRequests) judge(r *http.Request) (bool, string) {
	kind, key := classify(r)
	what := kind + ": " + key
	if kind == reqDiscovery || coldManagerReads[key] > 0 && namespaceOf(r.URL) == "default" {
		return true, what
	}
	if r.Method == http.MethodGet && slices.Contains(unsharded, r.URL.Path) {
		return true, what
	}
	if ns := namespaceOf(r.URL); ns != "" {
		return slices.Contains(s.namespaces, ns), what
	}
	selector := r.URL.Query().Get("labelSelector")
	return slices.Contains(strings.Split(selector, ","), clusterv1.WatchLabel+"="+s.shard), what
}

// namespaceOf is the namespace a request's path names ("" for a request across namespaces).
func namespaceOf(u *url.URL) string {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == "namespaces" && i+2 < len(parts) {
			return parts[i+1]
		}
	}
	return ""
}

// reconciledIn counts the objects of the namespaces whose inputs were recorded
// (status.inputs), which the first pass of a manager over an applied object writes.
func reconciledIn(tb testing.TB, namespaces []string) (int, error) {
	tb.Helper()
	n := 0
	for _, ns := range namespaces {
		for _, l := range []client.ObjectList{&infrav1.TerraformClusterList{}, &infrav1.TerraformMachineList{}, &infrav1.TerraformMachinePoolList{}} {
			if err := k8s.List(ctx, l, client.InNamespace(ns)); err != nil {
				return 0, fmt.Errorf("list %T in %s: %w", l, ns, err)
			}
			for _, o := range objectsOf(l) {
				if o.GetTerraformStatus().Inputs != nil {
					n++
				}
			}
		}
	}
	return n, nil
}

func objectsOf(l client.ObjectList) []engine.Object {
	var out []engine.Object
	switch l := l.(type) {
	case *infrav1.TerraformClusterList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *infrav1.TerraformMachineList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *infrav1.TerraformMachinePoolList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	}
	return out
}

// shardGateCells is how many cells each fleet of TestShardsGate holds.
const shardGateCells = 3

// TestShardsGate is the gate of sharding in `make test`: two managers started with
// --watch-filter=a and --watch-filter=b, over a fleet labelled a, a fleet labelled b and a
// fleet with no label, each reconcile every object of their own shard and touch nothing else:
// every request of each manager is discovery, the manager's start-up probe, a request in a
// namespace of its shard, or a list or watch that selects its shard's label; the unlabelled
// fleet is reconciled by neither. Counts only.
func TestShardsGate(t *testing.T) {
	start(t)
	fleets := map[string]*fleet{"a": {prefix: "sharda", shards: []string{"a"}}, "b": {prefix: "shardb", shards: []string{"b"}}, "": {prefix: "shardnone"}}
	for _, f := range fleets {
		defer f.remove(t)
		f.grow(t, shardGateCells*fleetPerCell)
	}
	reqs := map[string]*shardRequests{}
	var stops []func()
	for _, shard := range []string{"a", "b"} {
		reqs[shard] = newShardRequests(shard, fleets[shard].namespaces)
		_, stop := startManagerOpts(t, reqs[shard].wrap, setup.Options{WatchFilter: shard})
		stops = append(stops, stop)
	}
	waitUntil(t, 5*time.Minute, func() (bool, string) {
		for _, r := range reqs {
			if r.strayed() {
				return true, "" // a manager left its shard: checkShards below says how
			}
		}
		var missing []string
		for _, shard := range []string{"a", "b"} {
			f := fleets[shard]
			n, err := reconciledIn(t, f.namespaces)
			if err != nil {
				return false, err.Error()
			}
			if n < f.objects() {
				missing = append(missing, fmt.Sprintf("shard %s: %d of %d objects reconciled", shard, n, f.objects()))
			}
		}
		return len(missing) == 0, strings.Join(missing, "; ")
	})
	for _, stop := range stops {
		stop()
	}
	if n, err := reconciledIn(t, fleets[""].namespaces); err != nil || n != 0 {
		t.Errorf("%d objects of the unlabelled fleet were reconciled (%v), want 0: no manager of a shard touches them", n, err)
	}
	checkShards(t, "first start", reqs)
	if t.Failed() {
		return // managers that stray beyond their shard fight over the same objects: no restart
	}

	// A restart of both: each shard's caches hold its objects' Secrets (CAPTF's, labelled with
	// the owner's shard, and the bootstrap data), so its idle objects read nothing live.
	before := controllerMetrics()
	stops = nil
	for _, shard := range []string{"a", "b"} {
		reqs[shard] = newShardRequests(shard, fleets[shard].namespaces)
		_, stop := startManagerOpts(t, reqs[shard].wrap, setup.Options{WatchFilter: shard})
		stops = append(stops, stop)
	}
	after, ok := waitReconciled(before, fleets["a"].objects()+fleets["b"].objects())
	for _, stop := range stops {
		stop()
	}
	if !ok {
		// What the wait saw last, so that a failure says which of its three conditions held it.
		t.Fatalf("the restarted managers of the two shards did not reconcile their objects within 10 minutes: "+
			"passes %.0f of %d, queue depth %.0f (changes since the restart), active workers %.0f",
			after[metricPasses]-before[metricPasses], fleets["a"].objects()+fleets["b"].objects(),
			after[metricDepth]-before[metricDepth], after[metricWorkers])
	}
	checkShards(t, "restart", reqs)
	for _, shard := range []string{"a", "b"} {
		for what, n := range reqs[shard].byVerb {
			kind := what[:strings.Index(what, ": ")]
			if (kind == reqLiveRead && n > coldManagerReads[strings.TrimPrefix(what, kind+": ")]) || kind == reqWrite {
				t.Errorf("after a restart, the manager of shard %s sent %q %d times: idle objects of a shard read and write nothing", shard, what, n)
			}
		}
	}
}

// checkShards fails the test for every request a manager sent outside its shard.
func checkShards(t *testing.T, when string, reqs map[string]*shardRequests) {
	t.Helper()
	for _, shard := range []string{"a", "b"} {
		r := reqs[shard]
		fmt.Printf("%s, shard %s: %d requests, all in the shard: %s\n", when, shard, r.inShard, format(r.byVerb))
		if len(r.outside) > 0 {
			t.Errorf("%s: the manager of shard %s sent %d requests outside its shard: %s", when, shard, len(r.outside), strings.Join(r.outside, "; "))
		}
		if r.inShard == 0 {
			t.Errorf("%s: the manager of shard %s sent no request: the count cannot tell anything", when, shard)
		}
	}
}
