package webhooks_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

func spec(vars string, env ...string) *infrav1.TerraformSpec {
	s := &infrav1.TerraformSpec{Module: infrav1.ModuleSource{Image: "example.com/module:1"}}
	if vars != "" {
		s.Variables = &runtime.RawExtension{Raw: []byte(vars)}
	}
	for _, e := range env {
		s.Job.Env = append(s.Job.Env, corev1.EnvVar{Name: e, Value: "x"})
	}
	return s
}

func fields(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Detail)
	}
	return out
}

func TestValidateTerraformSpec(t *testing.T) {
	cases := []struct {
		name string
		spec *infrav1.TerraformSpec
		want []string // "field: detail substring"
	}{
		{"valid", spec(`{"size":1,"node_pool":"a","_x":{"y":1},"with-dash":true}`, "AWS_REGION", "HTTPS_PROXY"), nil},
		{"no variables", spec(""), nil},
		{"reserved captf variable", spec(`{"captf":{}}`), []string{"spec.variables[captf]: ", "CAPTF reserves for the contract inputs"}},
		{"terraform meta-argument", spec(`{"count":2}`), []string{"spec.variables[count]: ", "a name Terraform reserves"}},
		{"not an identifier", spec(`{"1st":1,"a b":2}`), []string{"spec.variables[1st]: ", "spec.variables[a b]: ", "not a valid Terraform identifier"}},
		{"variables not an object", spec(`[1,2]`), []string{"spec.variables: ", "must be a JSON object"}},
		{"reserved env names", spec("", "OK_NAME", "TF_CLI_ARGS_apply", "KUBECONFIG", "CAPTF_STEP"), []string{
			"spec.job.env[1].name: TF_CLI_ARGS_apply is reserved", "spec.job.env[2].name: KUBECONFIG is reserved", "spec.job.env[3].name: CAPTF_STEP is reserved"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := strings.Join(fields(webhooks.ValidateTerraformSpec(field.NewPath("spec"), c.spec)), "\n")
			if len(c.want) == 0 && got != "" {
				t.Fatalf("unexpected errors:\n%s", got)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("errors lack %q:\n%s", w, got)
				}
			}
		})
	}
}

func TestValidateLockTimeoutBelowDeadline(t *testing.T) {
	s := spec("")
	path := field.NewPath("spec", "template", "spec")
	for _, c := range []struct {
		lock, deadline *int64
		bad            bool
	}{
		{nil, nil, false},                 // 300 < 3600
		{ptr.To[int64](3599), nil, false}, // below the default deadline
		{ptr.To[int64](3600), nil, true},  // equal to the default deadline
		{nil, ptr.To[int64](300), true},   // the default lock timeout reaches a short deadline
		{ptr.To[int64](120), ptr.To[int64](120), true},
		{ptr.To[int64](60), ptr.To[int64](120), false},
	} {
		s.Job.LockTimeoutSeconds, s.Job.ActiveDeadlineSeconds = c.lock, c.deadline
		errs := webhooks.ValidateTerraformSpec(path, s)
		if c.bad != (len(errs) == 1) || (c.bad && !strings.Contains(errs[0].Error(), "spec.template.spec.job.lockTimeoutSeconds") ||
			c.bad && !strings.Contains(errs[0].Detail, "must be below the Job deadline")) {
			t.Errorf("lock %v deadline %v: errors %v", ptr.Deref(c.lock, -1), ptr.Deref(c.deadline, -1), errs)
		}
	}
}

func TestValidateTerraformSpecUpdate(t *testing.T) {
	image := spec("")
	image2 := spec("")
	image2.Module.Image = "example.com/module:2"
	cm := &infrav1.TerraformSpec{Module: infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "m"}}}
	cm2 := &infrav1.TerraformSpec{Module: infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "m2"}}}
	p := field.NewPath("spec")
	if errs := webhooks.ValidateTerraformSpecUpdate(p, image, cm, true); len(errs) != 1 ||
		!strings.Contains(errs[0].Error(), "spec.module: Forbidden: the module source kind cannot change from image to configMap once the infrastructure is provisioned") {
		t.Errorf("image -> configMap after provisioning: %v", errs)
	}
	if errs := webhooks.ValidateTerraformSpecUpdate(p, cm, image, true); len(errs) != 1 {
		t.Errorf("configMap -> image after provisioning: %v", errs)
	}
	for name, c := range map[string][2]*infrav1.TerraformSpec{"new image": {image, image2}, "new configmap": {cm, cm2}} {
		if errs := webhooks.ValidateTerraformSpecUpdate(p, c[0], c[1], true); len(errs) != 0 {
			t.Errorf("%s must stay allowed: %v", name, errs)
		}
	}
	if errs := webhooks.ValidateTerraformSpecUpdate(p, image, cm, false); len(errs) != 0 {
		t.Errorf("before provisioning the kind may change: %v", errs)
	}
}

func TestProvisioned(t *testing.T) {
	yes := true
	switch {
	case webhooks.Provisioned(nil, &infrav1.TerraformStatus{}):
		t.Error("fresh object is not provisioned")
	case !webhooks.Provisioned(nil, &infrav1.TerraformStatus{Initialization: &infrav1.Initialization{Provisioned: &yes}}):
		t.Error("status says provisioned")
	case !webhooks.Provisioned(map[string]string{infrav1.AppliedHashAnnotation: "v1-x"}, &infrav1.TerraformStatus{}):
		t.Error("a moved object (no status) with an applied hash is provisioned")
	}
}

func TestValidatorsNeverRefuseADeletingObject(t *testing.T) {
	v := webhooks.Validator[*infrav1.TerraformMachine]{Kind: infrav1.TerraformMachineKind}
	bad := objects.Machine("ns", "m").Spec(func(s *infrav1.TerraformSpec) { *s = *spec(`{"captf":1}`, "TF_LOG") }).Obj()
	if _, err := v.ValidateCreate(context.Background(), bad); err == nil || !strings.Contains(err.Error(), `TerraformMachine.infrastructure.cluster.x-k8s.io "m" is invalid`) {
		t.Fatalf("create of a bad spec: %v", err)
	}
	if _, err := v.ValidateUpdate(context.Background(), bad, bad); err == nil {
		t.Fatal("update of a live object with a bad spec must be refused")
	}
	deleting := bad.DeepCopy()
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	if _, err := v.ValidateUpdate(context.Background(), deleting, deleting); err != nil {
		t.Fatalf("a deleting object's update must pass whatever its spec: %v", err)
	}
	tv := webhooks.TemplateValidator[*infrav1.TerraformMachineTemplate]{Kind: "TerraformMachineTemplate",
		Spec: func(t *infrav1.TerraformMachineTemplate) *infrav1.TerraformSpec {
			return &t.Spec.Template.Spec.TerraformSpec
		}}
	tmpl := &infrav1.TerraformMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}}
	tmpl.Spec.Template.Spec.TerraformSpec = *spec(`{"count":1}`)
	if _, err := tv.ValidateCreate(context.Background(), tmpl); err == nil || !strings.Contains(err.Error(), "spec.template.spec.variables[count]") {
		t.Fatalf("template: %v", err)
	}
}

func TestDefaulterIsIdempotent(t *testing.T) {
	d := webhooks.Defaulter[*infrav1.TerraformCluster]{}
	c := objects.Cluster("ns", "c").With(func(c *infrav1.TerraformCluster) { c.Finalizers = []string{"other/f"} }).
		Spec(func(s *infrav1.TerraformSpec) {
			*s = *spec("")
			s.Job.ActiveDeadlineSeconds = ptr.To[int64](120)
			s.Job.LockTimeoutSeconds = ptr.To[int64](300) // the schema's default, already applied
		}).Obj()
	if err := d.Default(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	once := c.DeepCopy()
	if err := d.Default(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if !equalJSON(t, once, c) {
		t.Fatalf("defaulting twice differs from once:\n%+v\n%+v", once, c)
	}
	if want := []string{"other/f", infrav1.Finalizer}; strings.Join(c.Finalizers, ",") != strings.Join(want, ",") {
		t.Errorf("finalizers = %v, want %v", c.Finalizers, want)
	}
	if got := ptr.Deref(c.Spec.Job.LockTimeoutSeconds, 0); got != 60 {
		t.Errorf("a short deadline with the default lock timeout: lockTimeoutSeconds = %d, want 60", got)
	}
	explicit := objects.Cluster("ns", "explicit").Spec(func(s *infrav1.TerraformSpec) {
		*s = *spec("")
		s.Job.ActiveDeadlineSeconds = ptr.To[int64](120)
		s.Job.LockTimeoutSeconds = ptr.To[int64](200)
	}).Obj()
	_ = d.Default(context.Background(), explicit)
	if ptr.Deref(explicit.Spec.Job.LockTimeoutSeconds, 0) != 200 {
		t.Error("a lock timeout that is not the default is the author's: validation refuses it, defaulting keeps it")
	}
	long := objects.Cluster("ns", "long").Spec(func(s *infrav1.TerraformSpec) { s.Job.LockTimeoutSeconds = ptr.To[int64](300) }).Obj()
	_ = d.Default(context.Background(), long)
	if ptr.Deref(long.Spec.Job.LockTimeoutSeconds, 0) != 300 {
		t.Error("with the default deadline the default lock timeout stays")
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}

func TestValidateTargetOperation(t *testing.T) {
	key := infrav1.TargetOperationAnnotation
	cases := []struct {
		name     string
		old, new map[string]string
		wantErr  string
	}{
		{name: "none", new: map[string]string{}},
		{name: "create: a replace", new: map[string]string{key: "replace aws_instance.web"}},
		{name: "create: an import with blanks in the ID", new: map[string]string{key: "import aws_instance.web my id"}},
		{name: "create: no address", new: map[string]string{key: "replace"}, wantErr: `want "replace <address>"`},
		{name: "create: a data source", new: map[string]string{key: "replace data.aws_ami.x"}, wantErr: "not a managed resource instance address"},
		{name: "update: set to something unread", old: map[string]string{}, new: map[string]string{key: "taint aws_instance.web"}, wantErr: `unknown operation "taint"`},
		{name: "update: changed to something unread", old: map[string]string{key: "replace a.b"}, new: map[string]string{key: "import a.b"}, wantErr: `want "import <address> <id>"`},
		// An update that keeps a value is not judged again: the controller's own writes of an
		// object that carries one (written while the webhook was down) never fail on it.
		{name: "update: an unread value kept", old: map[string]string{key: "bogus"}, new: map[string]string{key: "bogus"}},
		{name: "update: removed", old: map[string]string{key: "bogus"}, new: map[string]string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := webhooks.ValidateTargetOperation(c.old, c.new)
			if c.wantErr == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), c.wantErr) || errs[0].Field != "metadata.annotations[captf.io/target-operation]" {
				t.Fatalf("got %v, want one error on the annotation containing %q", errs, c.wantErr)
			}
		})
	}
}
