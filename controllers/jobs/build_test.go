package jobs

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var allOperations = []infrav1.Operation{infrav1.OperationApply, infrav1.OperationDestroy, infrav1.OperationPlan,
	infrav1.OperationRefresh, infrav1.OperationDrift, infrav1.OperationRestore}

// imageParams is a TerraformCluster with an image module and a full job policy.
func imageParams(op infrav1.Operation) Params {
	return Params{
		Owner: Owner{APIVersion: infrav1.GroupVersion.String(), Kind: "TerraformCluster", Name: "demo", Namespace: "team-a",
			UID: "6f1c1f0e-3c1a-4d59-9d0e-0a6b7c1d2e3f", Cluster: "demo"},
		Suffix:     naming.StateSuffix("team-a", "TerraformCluster", "demo"),
		Seq:        3,
		Operation:  op,
		InputsHash: "sha256:4e1f0c0d4b3a2f19",
		Spec: infrav1.TerraformSpec{
			Module: infrav1.ModuleSource{Image: "registry.example.com/infra/cluster-module:v1.2.3", Path: "modules/cluster"},
			Job: infrav1.JobPolicy{
				ActiveDeadlineSeconds: ptr.To[int64](1800),
				LockTimeoutSeconds:    ptr.To[int64](120),
				ServiceAccountName:    "infra-runner",
				IdentityToken:         &infrav1.IdentityToken{Audience: "sts.amazonaws.com", ExpirationSeconds: ptr.To[int64](7200)},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
				},
				Env: []corev1.EnvVar{
					{Name: "AWS_REGION", Value: "eu-west-1"},
					{Name: "AWS_SECRET_ACCESS_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "aws-credentials"}, Key: "secret-access-key"}}},
				},
			},
		},
		Defaults: Defaults{RunnerImage: "ghcr.io/captf/manager:v0.1.0", RuntimeImage: "ghcr.io/opentofu/opentofu:1.10.10-minimal", ServiceAccountName: "captf-runner"},
	}
}

// configMapParams is a TerraformMachine with a ConfigMap module and the default job policy.
func configMapParams(op infrav1.Operation) Params {
	return Params{
		Owner: Owner{APIVersion: infrav1.GroupVersion.String(), Kind: "TerraformMachine", Name: "demo-md-0-abcde", Namespace: "team-a",
			UID: "0b9d7c55-2f0e-4a0b-8e51-7f4c3b2a1908", Cluster: "demo"},
		Suffix:     naming.StateSuffix("team-a", "TerraformMachine", "demo-md-0-abcde"),
		Seq:        0,
		Operation:  op,
		InputsHash: "sha256:9a8b7c6d5e4f3a2b",
		Spec:       infrav1.TerraformSpec{Module: infrav1.ModuleSource{ConfigMap: &infrav1.ConfigMapModule{Name: "machine-module"}}},
		Defaults:   Defaults{RunnerImage: "ghcr.io/captf/manager:v0.1.0"},
	}
}

func render(t *testing.T, p Params) []byte {
	t.Helper()
	job, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// golden compares the Job Build makes of p with testdata/<name>.yaml (-update writes it).
func golden(t *testing.T, name string, p Params) {
	t.Helper()
	got := render(t, p)
	path := filepath.Join("testdata", name+".yaml")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./controllers/jobs -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from Build's output (review, then -update):\n--- got\n%s", path, got)
	}
}

func TestGoldenJobs(t *testing.T) {
	for _, op := range allOperations {
		for kind, params := range map[string]func(infrav1.Operation) Params{"image": imageParams, "configmap": configMapParams} {
			name := strings.ToLower(string(op)) + "-" + kind
			t.Run(name, func(t *testing.T) { golden(t, name, params(op)) })
		}
	}
}

// savedPlanID is the plan an apply-of-a-saved-plan Job applies in the tests.
var savedPlanID = runnerapi.PlanID("9c2f0d1e8b7a6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d", "sha256:4e1f0c0d4b3a2f19", 4, "5e0c7a6d-1b2c-4d3e-8f9a-0b1c2d3e4f5a")

// savedPlanParams is an Apply of that saved plan.
func savedPlanParams() Params {
	p := imageParams(infrav1.OperationApply)
	p.PlanID = savedPlanID
	return p
}

func TestGoldenSavedPlanJob(t *testing.T) { golden(t, "apply-saved-plan-image", savedPlanParams()) }

// The plan and apply-of-a-saved-plan Jobs: what the runner and the channel are told.
func TestPlanFlags(t *testing.T) {
	for _, op := range allOperations {
		job, err := Build(imageParams(op))
		if err != nil {
			t.Fatal(err)
		}
		pod := job.Spec.Template.Spec
		channel, main := strings.Join(pod.InitContainers[1].Command, " "), strings.Join(pod.Containers[0].Command, " ")
		if !strings.Contains(channel, "--operation="+string(op)) || !strings.Contains(channel, "--inputs-hash=sha256:4e1f0c0d4b3a2f19") {
			t.Errorf("%s: the channel is not told the operation and the inputs hash: %s", op, channel)
		}
		if strings.Contains(channel, "--plan-id") || strings.Contains(main, "--plan-id") || job.Annotations[runnerapi.PlanIDAnnotation] != "" {
			t.Errorf("%s: a plan ID without one asked: %s / %s", op, channel, main)
		}
	}
	job, err := Build(savedPlanParams())
	if err != nil {
		t.Fatal(err)
	}
	pod := job.Spec.Template.Spec
	for what, cmd := range map[string][]string{"runner": pod.Containers[0].Command, "channel": pod.InitContainers[1].Command} {
		if !slices.Contains(cmd, "--plan-id="+savedPlanID) {
			t.Errorf("the %s is not told the plan ID: %q", what, cmd)
		}
	}
	if job.Annotations[runnerapi.PlanIDAnnotation] != savedPlanID || job.Annotations[infrav1.InputsHashAnnotation] == "" {
		t.Errorf("annotations %v", job.Annotations)
	}
}

// A deleting object's destroy plan: its Plan Job is marked, and both the runner and the channel
// are told (the channel records the kind from its own flag); the Destroy Job that applies it
// carries the plan ID to both, and is no destroy plan itself.
func TestDestroyPlanFlags(t *testing.T) {
	plan := imageParams(infrav1.OperationPlan)
	plan.DestroyPlan = true
	destroy := imageParams(infrav1.OperationDestroy)
	destroy.PlanID = savedPlanID
	for name, tc := range map[string]struct {
		p          Params
		flag, mark bool
		planID     string
	}{
		"the destroy plan's Plan Job":    {p: plan, flag: true, mark: true},
		"the Destroy of a saved plan":    {p: destroy, planID: savedPlanID},
		"a Destroy without a saved plan": {p: imageParams(infrav1.OperationDestroy)},
		"an ordinary Plan":               {p: imageParams(infrav1.OperationPlan)},
	} {
		job, err := Build(tc.p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		pod := job.Spec.Template.Spec
		for what, cmd := range map[string][]string{"runner": pod.Containers[0].Command, "channel": pod.InitContainers[1].Command} {
			if got := slices.Contains(cmd, "--"+runnerapi.FlagDestroyPlan+"=true"); got != tc.flag {
				t.Errorf("%s: the %s is told destroy-plan %t: %q", name, what, got, cmd)
			}
			if got := slices.Contains(cmd, "--plan-id="+savedPlanID); got != (tc.planID != "") {
				t.Errorf("%s: the %s is told the plan ID %t: %q", name, what, got, cmd)
			}
		}
		if got := job.Annotations[infrav1.DestroyPlanAnnotation] == "true"; got != tc.mark {
			t.Errorf("%s: marked as a destroy plan %t: %v", name, got, job.Annotations)
		}
		if job.Annotations[runnerapi.PlanIDAnnotation] != tc.planID {
			t.Errorf("%s: plan ID annotation %q", name, job.Annotations[runnerapi.PlanIDAnnotation])
		}
	}
}

// A targeted operation reaches the runner in its canonical form on an Apply and on the plan of
// an apply, the channel only on that plan (it records it), and the Job carries the request as
// written (bookkeeping answers only that value); any other Job, and a value the parser does not
// read, is refused.
func TestTargetFlags(t *testing.T) {
	const req = "  import  module.net.aws_subnet.a[0]  subnet 1 "
	const canonical = "--target=import module.net.aws_subnet.a[0] subnet 1"
	apply, plan, saved := imageParams(infrav1.OperationApply), imageParams(infrav1.OperationPlan), imageParams(infrav1.OperationApply)
	apply.Target, plan.Target, saved.Target, saved.PlanID = req, req, req, savedPlanID
	for name, tc := range map[string]struct {
		p               Params
		runner, channel bool
	}{
		"an Apply":               {p: apply, runner: true},
		"the apply's Plan":       {p: plan, runner: true, channel: true},
		"the Apply of its plan":  {p: saved, runner: true},
		"an Apply of no request": {p: imageParams(infrav1.OperationApply)},
	} {
		job, err := Build(tc.p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		pod := job.Spec.Template.Spec
		if got := slices.Contains(pod.Containers[0].Command, canonical); got != tc.runner {
			t.Errorf("%s: the runner is told the target %t: %q", name, got, pod.Containers[0].Command)
		}
		if got := slices.Contains(pod.InitContainers[1].Command, canonical); got != tc.channel {
			t.Errorf("%s: the channel is told the target %t: %q", name, got, pod.InitContainers[1].Command)
		}
		if want := map[bool]string{true: req}[tc.runner]; job.Annotations[infrav1.TargetOperationAnnotation] != want {
			t.Errorf("%s: the Job records %q, want %q", name, job.Annotations[infrav1.TargetOperationAnnotation], want)
		}
	}
	refreshPlan := imageParams(infrav1.OperationPlan)
	refreshPlan.RefreshOnly, refreshPlan.Target = true, "replace a.b"
	destroy := imageParams(infrav1.OperationDestroy)
	destroy.Target = "replace a.b"
	bad := imageParams(infrav1.OperationApply)
	bad.Target = "replace"
	for name, p := range map[string]Params{"a refresh-only plan": refreshPlan, "a Destroy": destroy, "a value the parser does not read": bad} {
		if _, err := Build(p); err == nil || !strings.Contains(err.Error(), "targeted operation") {
			t.Errorf("%s: Build = %v, want a refusal naming the targeted operation", name, err)
		}
	}
}

// The lineage the controller read reaches the state channel, and only the channel: it is the
// channel that serves the state (I7 at the point of use).
func TestStateLineageFlag(t *testing.T) {
	const lineage = "5e0c7a6d-1b2c-4d3e-8f9a-0b1c2d3e4f5a"
	for _, op := range allOperations {
		p := imageParams(op)
		job, err := Build(p)
		if err != nil {
			t.Fatal(err)
		}
		pod := job.Spec.Template.Spec
		if channel := strings.Join(pod.InitContainers[1].Command, " "); strings.Contains(channel, "--state-lineage") || StateLineageOf(job) != "" {
			t.Errorf("%s: a state lineage without one read: %s", op, channel)
		}
		if op == infrav1.OperationRestore {
			continue
		}
		p.StateLineage = lineage
		if job, err = Build(p); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		pod = job.Spec.Template.Spec
		if !slices.Contains(pod.InitContainers[1].Command, "--state-lineage="+lineage) || StateLineageOf(job) != lineage {
			t.Errorf("%s: the channel is not told the lineage: %q", op, pod.InitContainers[1].Command)
		}
		if main := strings.Join(pod.Containers[0].Command, " "); strings.Contains(main, "lineage") {
			t.Errorf("%s: the module's container is told the lineage: %s", op, main)
		}
	}
}

func TestBuildIsDeterministic(t *testing.T) {
	for _, op := range allOperations {
		a, b := render(t, imageParams(op)), render(t, imageParams(op))
		if !bytes.Equal(a, b) {
			t.Fatalf("%s: two builds differ", op)
		}
	}
}

func TestJobSafetySettings(t *testing.T) {
	for _, p := range []Params{imageParams(infrav1.OperationApply), configMapParams(infrav1.OperationDestroy), savedPlanParams()} {
		job, err := Build(p)
		if err != nil {
			t.Fatal(err)
		}
		spec, pod := job.Spec, job.Spec.Template.Spec
		check := func(what string, ok bool) {
			t.Helper()
			if !ok {
				t.Errorf("%s/%s: %s", p.Owner.Kind, p.Operation, what)
			}
		}
		check("name is naming.JobName", job.Name == naming.JobName(p.Suffix, p.Seq))
		check("backoffLimit 0: a failed run is never retried by the Job controller", ptr.Deref(spec.BackoffLimit, -1) == 0)
		check("podReplacementPolicy Failed: no new pod while the old one terminates",
			spec.PodReplacementPolicy != nil && *spec.PodReplacementPolicy == batchv1.Failed)
		check("one pod", ptr.Deref(spec.Parallelism, 0) == 1 && ptr.Deref(spec.Completions, 0) == 1)
		check("restartPolicy Never", pod.RestartPolicy == corev1.RestartPolicyNever)
		check("600 s to stop and release the lock", ptr.Deref(pod.TerminationGracePeriodSeconds, 0) == 600)
		check("deadline from the spec or 3600", ptr.Deref(spec.ActiveDeadlineSeconds, 0) == ptr.Deref(p.Spec.Job.ActiveDeadlineSeconds, 3600))
		check("no TTL: the controller reads the Job before it goes", spec.TTLSecondsAfterFinished == nil)
		refs := job.OwnerReferences
		check("controller owner reference to the object", len(refs) == 1 && refs[0].UID == p.Owner.UID && refs[0].Kind == p.Owner.Kind &&
			ptr.Deref(refs[0].Controller, false) && ptr.Deref(refs[0].BlockOwnerDeletion, false))
		for _, labels := range []map[string]string{job.Labels, job.Spec.Template.Labels} {
			check("owner labels", naming.OwnedBy(labels, p.Owner.Kind, p.Owner.Name) && labels[infrav1.ManagedLabel] == "true")
			check("operation label", labels[infrav1.OperationLabel] == string(p.Operation))
			check("cluster label", labels[infrav1.ClusterNameLabel] == p.Owner.Cluster)
		}
		check("inputs hash", job.Annotations[infrav1.InputsHashAnnotation] == p.InputsHash)
		main := pod.Containers[0]
		check("termination message from the result file", main.TerminationMessagePath == "/dev/termination-log" &&
			main.TerminationMessagePolicy == corev1.TerminationMessageReadFile)
		check("non-root", ptr.Deref(pod.SecurityContext.RunAsNonRoot, false) && ptr.Deref(pod.SecurityContext.RunAsUser, 0) != 0)
		for _, c := range append(pod.InitContainers, pod.Containers...) {
			sc := c.SecurityContext
			check(c.Name+": no privilege escalation, no capabilities", sc != nil && !ptr.Deref(sc.AllowPrivilegeEscalation, true) &&
				sc.Capabilities != nil && len(sc.Capabilities.Drop) == 1 && sc.Capabilities.Drop[0] == "ALL")
		}
		var inputs *corev1.Volume
		for i := range pod.Volumes {
			if pod.Volumes[i].Secret != nil {
				inputs = &pod.Volumes[i]
			}
		}
		check("per-run Secret mounted", inputs != nil && inputs.Secret.SecretName == naming.RunSecretName(job.Name))
		for _, m := range main.VolumeMounts {
			if m.MountPath == "/captf/inputs" || m.MountPath == "/captf/module" || m.MountPath == "/captf/bin" || m.MountPath == "/captf/channel" {
				check(m.MountPath+" read-only", m.ReadOnly)
			}
		}
		checkCredentials(t, p, job)
	}
}

// checkCredentials proves the state channel's isolation: no container gets the pod's default
// token; the channel, a native sidecar in the manager's image, alone mounts a token of the API
// server's audience; the main container has no Kubernetes credential and no KUBE_* variable,
// only (when asked) a cloud identity token of another audience.
func checkCredentials(t *testing.T, p Params, job *batchv1.Job) {
	t.Helper()
	pod := job.Spec.Template.Spec
	check := func(what string, ok bool) {
		t.Helper()
		if !ok {
			t.Errorf("%s/%s: %s", p.Owner.Kind, p.Operation, what)
		}
	}
	check("automountServiceAccountToken false", pod.AutomountServiceAccountToken != nil && !*pod.AutomountServiceAccountToken)
	check("init containers: install-runner, then the state channel", len(pod.InitContainers) == 2 &&
		pod.InitContainers[0].Name == InstallContainer && pod.InitContainers[0].RestartPolicy == nil &&
		pod.InitContainers[1].Name == ChannelContainer)
	sidecar := pod.InitContainers[1]
	check("the channel is a native sidecar", ptr.Deref(sidecar.RestartPolicy, "") == corev1.ContainerRestartPolicyAlways)
	check("the channel runs in the manager's image", sidecar.Image == p.RunnerImage)
	cmd := strings.Join(sidecar.Command, " ")
	for _, want := range []string{"/captf/bin/runner channel", "--namespace=" + p.Owner.Namespace, "--suffix=" + p.Suffix,
		"--job=" + job.Name, "--run-lease=" + naming.RunLeaseName(p.Suffix), "--owner-uid=" + string(p.Owner.UID),
		"--owner-kind=" + p.Owner.Kind, "--owner-name=" + p.Owner.Name,
		"--token-file=/var/run/secrets/captf.io/serviceaccount/token", "--ca-file=/var/run/secrets/captf.io/serviceaccount/ca.crt"} {
		check("channel command has "+want, strings.Contains(cmd, want))
	}
	var saVolume *corev1.Volume
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == VolumeServiceAccount {
			saVolume = &pod.Volumes[i]
		}
	}
	check("projected ServiceAccount volume", saVolume != nil && saVolume.Projected != nil)
	if saVolume != nil && saVolume.Projected != nil {
		var tok *corev1.ServiceAccountTokenProjection
		for _, src := range saVolume.Projected.Sources {
			if src.ServiceAccountToken != nil {
				tok = src.ServiceAccountToken
			}
		}
		check("its token is for the API server (no audience), one hour", tok != nil && tok.Audience == "" && ptr.Deref(tok.ExpirationSeconds, 0) == 3600)
	}
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		for _, m := range c.VolumeMounts {
			if m.Name == VolumeServiceAccount {
				check(c.Name+" mounts the ServiceAccount token: only the channel may", c.Name == ChannelContainer && m.ReadOnly)
			}
			if m.Name == VolumeIdentity {
				check(c.Name+" mounts the identity token: only the main container may", c.Name == MainContainer && m.ReadOnly)
			}
			check(c.Name+" mounts "+m.MountPath+": nothing under the default token path", !strings.HasPrefix(m.MountPath, "/var/run/secrets/kubernetes.io"))
		}
	}
	main := pod.Containers[0]
	for _, e := range main.Env {
		check("main container env "+e.Name+": no KUBE_* or KUBECONFIG", !strings.HasPrefix(e.Name, "KUBE") && !strings.HasPrefix(e.Name, "TF_HTTP"))
	}
	check("main container runs the channel's client", strings.Contains(strings.Join(main.Command, " "), "--channel-dir=/captf/channel"))
	var idEnv string
	for _, e := range main.Env {
		if e.Name == "CAPTF_IDENTITY_TOKEN_FILE" {
			idEnv = e.Value
		}
	}
	if id := p.Spec.Job.IdentityToken; id != nil {
		check("identity token file named", idEnv == "/var/run/secrets/captf.io/identity/token")
		var tok *corev1.ServiceAccountTokenProjection
		for _, v := range pod.Volumes {
			if v.Name == VolumeIdentity && v.Projected != nil && len(v.Projected.Sources) == 1 {
				tok = v.Projected.Sources[0].ServiceAccountToken
			}
		}
		check("identity token of the chosen audience and lifetime", tok != nil && tok.Audience == id.Audience && tok.Path == "token" &&
			ptr.Deref(tok.ExpirationSeconds, 0) == ptr.Deref(id.ExpirationSeconds, DefaultIdentityTokenExpirationSeconds))
	} else {
		check("no identity token unless asked", idEnv == "")
	}
}

func TestBuildRefusesReservedEnv(t *testing.T) {
	for _, name := range []string{"KUBE_CONFIG_PATH", "KUBECONFIG", "KUBE_CONFIG_PATHS", "KUBE_IN_CLUSTER_CONFIG", "KUBE_HOST", "KUBE_TOKEN",
		"KUBE_CTX", "KUBE_PROXY_URL", "TF_WORKSPACE",
		"TF_CLI_ARGS_apply", "TF_VAR_password", "TF_DATA_DIR", "TOFU_X", "CAPTF_TF_BINARY", "CAPTF_JOB_NAME"} {
		p := imageParams(infrav1.OperationApply)
		p.Spec.Job.Env = append(p.Spec.Job.Env, corev1.EnvVar{Name: name, Value: "x"})
		if _, err := Build(p); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got %v, want a refusal", name, err)
		}
	}
	for _, name := range []string{"AWS_REGION", "KUBERNETES_SERVICE_HOST", "HTTPS_PROXY", "PATH", "TFX", "MY_KUBE_HOST"} {
		if IsReservedEnv(name) {
			t.Errorf("%s is reserved", name)
		}
	}
}

func TestBuildValidates(t *testing.T) {
	cases := map[string]func(*Params){
		"no owner uid":                    func(p *Params) { p.Owner.UID = "" },
		"bad suffix":                      func(p *Params) { p.Suffix = "short" },
		"negative seq":                    func(p *Params) { p.Seq = -1 },
		"unknown op":                      func(p *Params) { p.Operation = "Import" },
		"no inputs hash":                  func(p *Params) { p.InputsHash = "" },
		"no runner image":                 func(p *Params) { p.RunnerImage = "" },
		"two module sources":              func(p *Params) { p.Spec.Module.ConfigMap = &infrav1.ConfigMapModule{Name: "x"} },
		"no module source":                func(p *Params) { p.Spec.Module.Image = "" },
		"identity token without audience": func(p *Params) { p.Spec.Job.IdentityToken = &infrav1.IdentityToken{} },
		"identity token too short": func(p *Params) {
			p.Spec.Job.IdentityToken = &infrav1.IdentityToken{Audience: "a", ExpirationSeconds: ptr.To[int64](60)}
		},
		"plan ID of a plan":         func(p *Params) { p.Operation, p.PlanID = infrav1.OperationPlan, savedPlanID },
		"plan ID of a restore":      func(p *Params) { p.Operation, p.PlanID = infrav1.OperationRestore, savedPlanID },
		"destroy plan of an apply":  func(p *Params) { p.DestroyPlan = true },
		"destroy plan of a destroy": func(p *Params) { p.Operation, p.DestroyPlan = infrav1.OperationDestroy, true },
		"refresh-only destroy plan": func(p *Params) { p.Operation, p.RefreshOnly, p.DestroyPlan = infrav1.OperationPlan, true, true },
		"plan ID not an ID":         func(p *Params) { p.PlanID = "approve-me" },
		"plan ID in upper case":     func(p *Params) { p.PlanID = strings.ToUpper(savedPlanID) },
		"state lineage of a restore": func(p *Params) {
			p.Operation, p.StateLineage = infrav1.OperationRestore, "5e0c7a6d-1b2c-4d3e-8f9a-0b1c2d3e4f5a"
		},
		"state lineage with a space": func(p *Params) { p.StateLineage = "5e0c 7a6d" },
	}
	for name, mutate := range cases {
		p := imageParams(infrav1.OperationApply)
		mutate(&p)
		if _, err := Build(p); err == nil {
			t.Errorf("%s: built", name)
		}
	}
}

func TestDefaultsApply(t *testing.T) {
	job, err := Build(configMapParams(infrav1.OperationApply))
	if err != nil {
		t.Fatal(err)
	}
	pod := job.Spec.Template.Spec
	if pod.ServiceAccountName != DefaultServiceAccountName || pod.Containers[0].Image != DefaultRuntimeImage ||
		*job.Spec.ActiveDeadlineSeconds != infrav1.DefaultActiveDeadlineSeconds {
		t.Fatalf("defaults not applied: sa %q image %q deadline %d", pod.ServiceAccountName, pod.Containers[0].Image, *job.Spec.ActiveDeadlineSeconds)
	}
	if cmd := strings.Join(pod.Containers[0].Command, " "); !strings.Contains(cmd, "--lock-timeout=300s") || !strings.Contains(cmd, "--module-dir=/captf/module") {
		t.Fatalf("command %q", cmd)
	}
	// An image module without a path runs from the image's working directory.
	p := imageParams(infrav1.OperationApply)
	p.Spec.Module.Path = ""
	job, err = Build(p)
	if err != nil {
		t.Fatal(err)
	}
	if c := job.Spec.Template.Spec.Containers[0]; c.WorkingDir != "" || !strings.Contains(strings.Join(c.Command, " "), "--module-dir=. ") {
		t.Fatalf("image module: workingDir %q command %q", c.WorkingDir, c.Command)
	}
}
