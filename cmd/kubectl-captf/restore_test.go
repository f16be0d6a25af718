package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// restoreCluster is a Ready TerraformCluster with two backups and a replica store that holds
// older versions than they are too.
func restoreCluster() *infrav1.TerraformCluster {
	o := readyCluster("prod", "demo")
	at := metav1.NewTime(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	o.Status.StateBackups = []infrav1.StateBackup{{Serial: 5, Secret: "captf-state-x-backup-5", Time: &at, Bytes: 120}, {Serial: 4, Secret: "captf-state-x-backup-4", Time: &at, Bytes: 118}}
	o.Status.StateReplica = []infrav1.StateReplicaVersion{{Lineage: "lin-1", Serial: 5, Time: &at}, {Lineage: "lin-1", Serial: 4, Time: &at}, {Lineage: "lin-1", Serial: 2, Time: &at}}
	return o
}

// restore lists the backups and what the replica store was seen to hold, and restores a serial
// that only the store holds; it refuses one neither holds, naming both lists.
func TestRestoreOffersTheReplicaStoresVersions(t *testing.T) {
	ctx := context.Background()
	c := fakeClient(t, restoreCluster())

	out, err := runPlugin(t, ctx, c, &bytes.Buffer{}, "restore", "terraformcluster/demo")
	if err != nil {
		t.Fatalf("restore list: %v\n%s", err, out)
	}
	for _, want := range []string{"captf-state-x-backup-4", "In the replica store (as the controller last listed it):", "2\tlin-1\t2026-12-07T09:00:00Z"} {
		if !strings.Contains(out, want) {
			t.Errorf("the list lacks %q:\n%s", want, out)
		}
	}
	out, err = runPlugin(t, ctx, c, &bytes.Buffer{}, "restore", "terraformcluster/demo", "-o", "json")
	var list BackupList
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list.Backups) != 2 || len(list.Replica) != 3 {
		t.Fatalf("restore -o json: %v, want 2 backups and 3 replica versions:\n%s", err, out)
	}

	out, err = runPlugin(t, ctx, c, &bytes.Buffer{}, "restore", "terraformcluster/demo", "--serial", "3", "--yes")
	if err == nil || !strings.Contains(err.Error(), "serial 3 is no backup of TerraformCluster prod/demo and not a version the replica store was seen to hold (backups: 5, 4; replica store: 5, 4, 2)") {
		t.Fatalf("restore --serial 3: want a refusal naming both lists, got %v\n%s", err, out)
	}
	if got := annotationsOf(t, c)[infrav1.RestoreStateAnnotation]; got != "" {
		t.Fatalf("a refused restore wrote %s=%s", infrav1.RestoreStateAnnotation, got)
	}

	out, err = runPlugin(t, ctx, c, &bytes.Buffer{}, "restore", "terraformcluster/demo", "--serial", "2", "--yes")
	if err != nil {
		t.Fatalf("restore --serial 2 (the store's only): %v\n%s", err, out)
	}
	if got := annotationsOf(t, c)[infrav1.RestoreStateAnnotation]; got != "2" {
		t.Fatalf("%s = %q, want 2", infrav1.RestoreStateAnnotation, got)
	}
}

func annotationsOf(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	o := &infrav1.TerraformCluster{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "prod", Name: "demo"}, o); err != nil {
		t.Fatal(err)
	}
	return o.Annotations
}
