package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/cmd/manager/setup"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/controllers/replica"
	"github.com/captf/cluster-api-provider-terraform/controllers/state/statetest"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/objectstore"
)

// replicaApplies is how many applies each side of BenchmarkApplyWithReplica times.
const replicaApplies = 10

// BenchmarkApplyWithReplica prints the controller's part of an apply (from the Job's end, its
// state written, to the object provisioned: counting the Job, the backup, the outputs and, with
// a replica, the sealed copy written to the store) without a replica and with one on a real
// S3-compatible server (the Versity S3 gateway of bin/, on this machine), side by side in one
// run: the median of replicaApplies TerraformClusters each, and the ratio. Terraform's own time
// in the Job is the same either way (the replica is written by the controller, not the Job), so
// an apply's wall time grows by the difference of the medians.
func BenchmarkApplyWithReplica(b *testing.B) {
	start(b)
	without := timeApplies(b, nil)
	root, err := envtest.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	srv, err := objectstore.Start(ctx, objectstore.Options{Binary: filepath.Join(root, "bin", "versitygw"), Dir: b.TempDir(), Out: os.Stderr})
	if err != nil {
		b.Fatalf("start the object store (make test-bins builds bin/versitygw): %v", err)
	}
	defer func() { _ = srv.Stop() }()
	if err := srv.CreateBucket(ctx, "bench-states"); err != nil {
		b.Fatal(err)
	}
	bucket, err := replica.OpenS3(ctx, srv.ReplicaOptions("bench-states"))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = bucket.Close() }()
	key, err := replica.NewStaticKey("bench", make([]byte, 32))
	if err != nil {
		b.Fatal(err)
	}
	store, err := replica.New(bucket, key, replica.Options{})
	if err != nil {
		b.Fatal(err)
	}
	with := timeApplies(b, store)
	mw, mr := median(without), median(with)
	fmt.Printf("\n%-46s %9s %9s %9s\n", "controller's part of an apply (Job end to provisioned)", "applies", "median", "max")
	fmt.Printf("%-46s %9d %9s %9s\n", "without a replica", len(without), mw.Round(time.Millisecond), slices.Max(without).Round(time.Millisecond))
	fmt.Printf("%-46s %9d %9s %9s\n", "with a replica (versitygw on this machine)", len(with), mr.Round(time.Millisecond), slices.Max(with).Round(time.Millisecond))
	fmt.Printf("ratio with/without (medians): %.2f; added per apply: %s\n", float64(mr)/float64(mw), (mr - mw).Round(time.Millisecond))
	b.ReportMetric(float64(mr)/float64(mw), "with/without")
}

// timeApplies runs a manager (with store as its replica, or none) and times, for each of
// replicaApplies new TerraformClusters, the span from its apply Job's end to the object
// provisioned.
func timeApplies(b *testing.B, store *replica.Store) []time.Duration {
	b.Helper()
	_, stop := startManagerOpts(b, nil, setup.Options{StateReplicaStore: store})
	defer stop()
	var out []time.Duration
	for i := 0; i < replicaApplies; i++ {
		s := newCluster(b, namespace(b, "rep"))
		ns, name := s.obj.GetNamespace(), s.obj.GetName()
		suffix := naming.StateSuffix(ns, s.kind, name)
		job := &batchv1.Job{}
		key := client.ObjectKey{Namespace: ns, Name: naming.JobName(suffix, 1)}
		waitFor(b, "apply Job running", func() bool {
			return k8s.Get(ctx, key, job) == nil && job.Status.Active == 1 && ptr.Deref(job.Status.Ready, 0) == 1
		})
		began := time.Now()
		if err := statetest.Write(ctx, k8s, ns, suffix, s.state); err != nil {
			b.Fatal(err)
		}
		if err := node.end(ns, job.Name, true, ""); err != nil {
			b.Fatal(err)
		}
		waitFor(b, "provisioned", func() bool {
			tc := &infrav1.TerraformCluster{}
			return k8s.Get(ctx, client.ObjectKeyFromObject(s.obj), tc) == nil && tc.Status.IsProvisioned()
		})
		out = append(out, time.Since(began))
	}
	return out
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
