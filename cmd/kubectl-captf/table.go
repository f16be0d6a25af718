package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// outputWide is status -o wide: the table of renderTable.
const outputWide = "wide"

// tableColumns are the columns of status -o wide, after NAMESPACE (with -A).
var tableColumns = []string{"KIND", "NAME", "CLUSTER", "READY", "REASON", "SINCE", "JOB", "LAST RUN", "PLAN", "DRIFT", "RESOURCES"}

// renderTable prints the report's objects as a table, one object a row, as kubectl get -o wide
// prints a list: what the tree shows on each object's first lines, in columns. A value the
// object does not have is "-". The Cluster of --cluster is not a row: the tree and the JSON
// show it.
func renderTable(w io.Writer, r Report, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	head := tableColumns
	if r.allNamespaces {
		head = append([]string{"NAMESPACE"}, head...)
	}
	if _, err := fmt.Fprintln(tw, strings.Join(head, "\t")); err != nil {
		return err
	}
	for _, o := range r.Objects {
		row := tableRow(o, now)
		if r.allNamespaces {
			row = append([]string{o.Namespace}, row...)
		}
		if _, err := fmt.Fprintln(tw, strings.Join(row, "\t")); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// tableRow is one object's cells, in the order of tableColumns.
func tableRow(o ObjectNode, now time.Time) []string {
	ready, reason, since := "Unknown", "-", "-"
	if c := o.Ready; c != nil {
		ready, reason = string(c.Status), orDash(c.Reason)
		since = strings.TrimSuffix(strings.TrimSpace(sinceTime(&c.LastTransitionTime, now)), " ago")
	}
	job := "-"
	if j := o.ActiveJob; j != nil {
		job = string(j.Operation) + " " + j.Name
	}
	last := "-"
	if l := o.LastRun; l != nil {
		last = string(l.Operation) + " " + string(l.Outcome)
		if l.FinishedAt != nil {
			last += " " + strings.TrimSuffix(strings.TrimSpace(sinceTime(l.FinishedAt, now)), " ago")
		}
	}
	plan := "-"
	if p := o.PendingPlan; p != nil {
		plan = "waits (" + p.Counts() + ")"
	}
	drift := "-"
	if d := o.Drift; d != nil {
		drift = string(d.Status)
		if d.Status == metav1.ConditionTrue {
			drift += " (" + d.Reason + ")"
		}
	}
	resources := "-"
	if inv := o.Inventory; inv != nil {
		resources = fmt.Sprintf("%d", inv.Total)
	}
	return []string{o.Kind, o.Name, orDash(o.Cluster), ready, reason, orDash(since), job, last, plan, drift, resources}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
