package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// TestTargetedVerbs: replace, import and forget write the request as the controller reads it, replace
// one that waits (saying so), and refuse (exit 1, nothing written) a request the parser does
// not read, an object being deleted, one that never applied and one whose state is held.
func TestTargetedVerbs(t *testing.T) {
	applied := func(name string, edit func(*infrav1.TerraformCluster)) *infrav1.TerraformCluster {
		o := &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name,
			Annotations: map[string]string{infrav1.AppliedHashAnnotation: "h1"}}}
		if edit != nil {
			edit(o)
		}
		return o
	}
	for _, c := range []struct {
		name    string
		obj     *infrav1.TerraformCluster
		args    []string
		want    string // the annotation afterwards ("" for none)
		printed string
		refused string
	}{
		{name: "replace", obj: applied("a", nil), args: []string{"replace", "tfc/a", "aws_instance.web[0]"},
			want: "replace aws_instance.web[0]", printed: "replace aws_instance.web[0] requested on TerraformCluster prod/a: the next apply carries it out"},
		{name: "import with an ID", obj: applied("a", nil), args: []string{"import", "tfc/a", "aws_instance.web", "i-0abc"},
			want: "import aws_instance.web i-0abc", printed: "requested on TerraformCluster prod/a"},
		{name: "forget", obj: applied("a", nil), args: []string{"forget", "tfc/a", "module.net.aws_subnet.old"},
			want: "forget module.net.aws_subnet.old", printed: "forget module.net.aws_subnet.old requested on TerraformCluster prod/a"},
		{name: "forget of an instance", obj: applied("a", nil), args: []string{"forget", "tfc/a", "aws_subnet.old[0]"}, refused: "without instance keys"},
		{name: "a waiting request is replaced", obj: applied("a", func(o *infrav1.TerraformCluster) {
			o.Annotations[infrav1.TargetOperationAnnotation] = "replace a.b"
		}), args: []string{"replace", "tfc/a", "a.c"}, want: "replace a.c", printed: "requested"},
		{name: "an address that is none", obj: applied("a", nil), args: []string{"replace", "tfc/a", "data.x.y"}, refused: "not a managed resource instance address"},
		{name: "never applied", obj: &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "a"}},
			args: []string{"replace", "tfc/a", "a.b"}, refused: "has not applied yet"},
		{name: "provisioned counts as applied", obj: func() *infrav1.TerraformCluster {
			o := &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "a"}}
			o.Status.Initialization = &infrav1.Initialization{Provisioned: ptr.To(true)}
			return o
		}(), args: []string{"replace", "tfc/a", "a.b"}, want: "replace a.b", printed: "requested"},
		{name: "deleting", obj: applied("a", func(o *infrav1.TerraformCluster) {
			o.DeletionTimestamp, o.Finalizers = &metav1.Time{}, []string{infrav1.Finalizer}
		}), args: []string{"replace", "tfc/a", "a.b"}, refused: "being deleted"},
		{name: "held", obj: applied("a", func(o *infrav1.TerraformCluster) {
			o.Status.Conditions = []metav1.Condition{{Type: infrav1.StateReadableCondition, Status: metav1.ConditionFalse, Reason: infrav1.StateLostReason, Message: "gone"}}
		}), args: []string{"import", "tfc/a", "a.b", "x"}, refused: "its state is held (StateReadable=False, StateLost: gone)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.obj.DeletionTimestamp != nil {
				c.obj.DeletionTimestamp = &metav1.Time{Time: metav1.Now().Time}
			}
			old := c.obj.Annotations[infrav1.TargetOperationAnnotation]
			cl := fakeClient(t, c.obj)
			out, err := runPlugin(t, context.Background(), cl, &bytes.Buffer{}, c.args...)
			got := &infrav1.TerraformCluster{}
			if gerr := cl.Get(context.Background(), client.ObjectKeyFromObject(c.obj), got); gerr != nil {
				t.Fatal(gerr)
			}
			if c.refused != "" {
				var ee *exitError
				if !errors.As(err, &ee) || ee.code != exitFailed || !strings.Contains(ee.msg, c.refused) {
					t.Fatalf("want a refusal (exit 1) containing %q, got %v", c.refused, err)
				}
				if v := got.Annotations[infrav1.TargetOperationAnnotation]; v != old {
					t.Fatalf("a refused request wrote %q", v)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if v := got.Annotations[infrav1.TargetOperationAnnotation]; v != c.want {
				t.Errorf("annotation %q, want %q", v, c.want)
			}
			if !strings.Contains(out, c.printed) {
				t.Errorf("printed %q, want %q in it", out, c.printed)
			}
		})
	}
}
