package webhooks_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/webhooks"
)

// annMarks is an object's marks with these annotations, given as key, value pairs.
func annMarks(kv ...string) *webhooks.Marks {
	m := &webhooks.Marks{}
	m.Annotations = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Annotations[kv[i]] = kv[i+1]
	}
	return m
}

// notRecords are annotations a person or Cluster API writes on a reconciled object: neither
// the records rule nor the guard's matchCondition may take them for records.
var notRecords = []string{infrav1.BlockMoveAnnotation, infrav1.PausedAnnotation,
	infrav1.GuardOverrideReasonAnnotation, infrav1.RestoreStateAnnotation, infrav1.RefreshAnnotation, infrav1.DriftCheckAnnotation,
	infrav1.InputsHashAnnotation, infrav1.PlanIDAnnotation, "example.com/note"}

func TestTheRecordListsAreDisjointAndNameNoPersonsRequest(t *testing.T) {
	recs, reqs := infrav1.ManagerRecordAnnotations(), infrav1.GuardedRequestAnnotations()
	if len(recs) != 18 || len(reqs) != 4 {
		t.Fatalf("%d records and %d guarded requests: a change of the lists must change this test, the matchCondition and docs/webhooks.md", len(recs), len(reqs))
	}
	for _, k := range append(slices.Clone(reqs), notRecords...) {
		if slices.Contains(recs, k) || infrav1.IsManagerRecordAnnotation(k) {
			t.Errorf("%s is on the records list", k)
		}
	}
	recs[0] = "mutated"
	if infrav1.ManagerRecordAnnotations()[0] == "mutated" {
		t.Error("a caller changed the one list")
	}
}

// TestDiffRecordsSeesTheMoveMark: setting clusterctl's delete-for-move (on a create or an
// update) is a MoveMark; keeping or removing it is not.
func TestDiffRecordsSeesTheMoveMark(t *testing.T) {
	const move = infrav1.DeleteForMoveAnnotation
	for _, c := range []struct {
		name     string
		old, new *webhooks.Marks
		want     bool
	}{
		{"created with it", &webhooks.Marks{}, annMarks(move, ""), true},
		{"set", annMarks(), annMarks(move, ""), true},
		{"kept", annMarks(move, ""), annMarks(move, "", "example.com/note", "x"), false},
		{"removed", annMarks(move, ""), annMarks(), false},
		{"never there", annMarks(), annMarks("example.com/note", "x"), false},
	} {
		if got := webhooks.DiffRecords(c.old, c.new).MoveMark; got != c.want {
			t.Errorf("%s: MoveMark = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestDiffRecords(t *testing.T) {
	const move, first, rec = infrav1.DeleteForMoveAnnotation, infrav1.StateFirstRunAnnotation, infrav1.StateLineageAnnotation
	for _, k := range infrav1.ManagerRecordAnnotations() {
		for _, c := range []struct {
			name     string
			old, new *webhooks.Marks
			want     bool
		}{
			{"created with it (a create is an update from nothing)", &webhooks.Marks{}, annMarks(k, "v"), true},
			{"created with it empty", &webhooks.Marks{}, annMarks(k, ""), true},
			{"set", annMarks("example.com/note", "x"), annMarks(k, "v", "example.com/note", "x"), true},
			{"changed", annMarks(k, "v"), annMarks(k, "w"), true},
			{"removed", annMarks(k, "v"), annMarks(), k != infrav1.RetryAtAnnotation},
			{"kept", annMarks(k, "v"), annMarks(k, "v", "example.com/note", "x"), false},
			{"set on an object moving away", annMarks(move, ""), annMarks(move, "", k, "v"), true},
		} {
			got := slices.Contains(webhooks.DiffRecords(c.old, c.new).Records, k)
			if got != c.want {
				t.Errorf("%s %s: changed = %v, want %v", k, c.name, got, c.want)
			}
		}
	}
	for _, c := range []struct {
		name     string
		old, new *webhooks.Marks
		records  []string
		requests []string
	}{
		{"an unrelated create", &webhooks.Marks{}, annMarks(notRecords[0], "", notRecords[len(notRecords)-1], "x"), nil, nil},
		{"retry now (kubectl captf retry) is a person's request", annMarks(infrav1.RetryAtAnnotation, "t", infrav1.FailuresAnnotation, "2"),
			annMarks(infrav1.FailuresAnnotation, "2"), nil, nil},
		{"clusterctl move's patch of the source copy: the lineage records may go, the others are still judged",
			annMarks(rec, "a", first, "u/j", infrav1.AppliedHashAnnotation, "h"), annMarks(move, ""), []string{infrav1.AppliedHashAnnotation}, nil},
		{"created with every guarded request", &webhooks.Marks{},
			annMarks(infrav1.ApprovePlanAnnotation, "p", infrav1.AdoptStateAnnotation, "l", infrav1.AbandonInfrastructureAnnotation, "u"),
			nil, []string{infrav1.ApprovePlanAnnotation, infrav1.AdoptStateAnnotation, infrav1.AbandonInfrastructureAnnotation}},
		{"a request kept as it was is none", annMarks(infrav1.AdoptStateAnnotation, "l"), annMarks(infrav1.AdoptStateAnnotation, "l"), nil, nil},
		{"a request removed is none", annMarks(infrav1.AdoptStateAnnotation, "l"), annMarks(), nil, nil},
		{"records in the list's order", &webhooks.Marks{}, annMarks(rec, "a", infrav1.DestroyedAnnotation, "true", infrav1.AppliedHashAnnotation, "h"),
			[]string{infrav1.AppliedHashAnnotation, infrav1.DestroyedAnnotation, rec}, nil},
	} {
		ch := webhooks.DiffRecords(c.old, c.new)
		if !slices.Equal(ch.Records, c.records) || !slices.Equal(ch.Requests, c.requests) {
			t.Errorf("%s: DiffRecords = %+v, want records %q requests %q", c.name, ch, c.records, c.requests)
		}
	}
}

func TestJudgeRecords(t *testing.T) {
	ref := webhooks.ObjectRef{Kind: infrav1.TerraformClusterKind, Namespace: "prod", Name: "c"}
	const who = "groups sre"
	records := webhooks.RecordChange{Records: []string{infrav1.AppliedHashAnnotation}}
	requests := webhooks.RecordChange{Requests: []string{infrav1.AdoptStateAnnotation}}
	for _, c := range []struct {
		name    string
		ch      webhooks.RecordChange
		create  bool
		writer  bool
		allowed bool
		says    []string
	}{
		{name: "nothing", allowed: true},
		{name: "nothing at create", create: true, allowed: true},
		{name: "a user writes a record", ch: records, says: []string{"sets, changes or removes captf.io/applied-hash on TerraformCluster prod/c",
			"only the CAPTF manager may write them", who, "Leave them as the manager wrote them"}},
		{name: "the manager or an override member writes a record", ch: records, writer: true, allowed: true},
		{name: "a request on update is judged by its own rule", ch: requests, allowed: true},
		{name: "a user creates with a record", ch: records, create: true,
			says: []string{"creates TerraformCluster prod/c with captf.io/applied-hash", who, "Create the object without them", "docs/move.md"}},
		{name: "a user creates with a guarded request", ch: requests, create: true,
			says: []string{"with captf.io/adopt-state", "ask an override group member to set captf.io/adopt-state after the create"}},
		{name: "clusterctl move as an override member creates with both", ch: webhooks.RecordChange{Records: records.Records, Requests: requests.Requests},
			create: true, writer: true, allowed: true},
		{name: "plan records say how to approve", ch: webhooks.RecordChange{Records: []string{infrav1.PendingPlanAnnotation}},
			says: []string{infrav1.ApprovePlanAnnotation + "=<status.pendingPlan.id>"}},
		{name: "lineage records say how to restore", ch: webhooks.RecordChange{Records: []string{infrav1.StateFirstRunAnnotation}},
			says: []string{infrav1.RestoreStateAnnotation}},
		{name: "retry-at says how to retry", ch: webhooks.RecordChange{Records: []string{infrav1.RetryAtAnnotation}}, says: []string{"kubectl captf retry"}},
		{name: "a user sets clusterctl's move mark", ch: webhooks.RecordChange{MoveMark: true},
			says: []string{"sets " + infrav1.DeleteForMoveAnnotation + " on TerraformCluster prod/c", "without a destroy", who, "deletionPolicy Retain"}},
		{name: "a user creates with clusterctl's move mark", ch: webhooks.RecordChange{MoveMark: true}, create: true,
			says: []string{infrav1.DeleteForMoveAnnotation, "Who may run a move"}},
		{name: "clusterctl move as an override member sets its mark", ch: webhooks.RecordChange{MoveMark: true}, writer: true, allowed: true},
	} {
		v := webhooks.JudgeRecords(c.ch, c.create, c.writer, who, ref)
		if v.Allowed != c.allowed || (v.Allowed && v.Message != "") {
			t.Errorf("%s: %+v, want allowed %v", c.name, v, c.allowed)
		}
		for _, s := range c.says {
			if !strings.Contains(v.Message, s) {
				t.Errorf("%s: message %q does not say %q", c.name, v.Message, s)
			}
		}
	}
}

const managerUsername = "system:serviceaccount:captf-system:captf-controller-manager"

func createRequest(t *testing.T, user authenticationv1.UserInfo, obj *infrav1.TerraformMachine) admission.Request {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: "ns", Name: obj.Name,
		Kind:     metav1.GroupVersionKind{Group: infrav1.GroupVersion.Group, Version: "v1alpha1", Kind: infrav1.TerraformMachineKind},
		UserInfo: user, Object: runtime.RawExtension{Raw: b},
	}}
}

// TestGuardJudgesACreateLikeAnUpdateFromNothing: every record and guarded request is refused at
// create to a plain user and admitted to the manager and an override member, without a read.
func TestGuardJudgesACreateLikeAnUpdateFromNothing(t *testing.T) {
	g, reads := guardOver(t, true)
	g.Identities = webhooks.Identities{Manager: managerUsername}
	g.Override = &webhooks.Override{Groups: []string{"sre"}}
	dev := authenticationv1.UserInfo{Username: "dev", Groups: []string{"devs", "system:authenticated"}}
	mgr := authenticationv1.UserInfo{Username: managerUsername}
	sre := authenticationv1.UserInfo{Username: "alice", Groups: []string{"sre"}}
	for _, k := range append(infrav1.ManagerRecordAnnotations(), infrav1.GuardedRequestAnnotations()...) {
		m := machine(false)
		m.Annotations = map[string]string{k: "x"}
		if resp := g.Handle(context.Background(), createRequest(t, dev, m)); resp.Allowed || !strings.Contains(resp.Result.Message, k) {
			t.Errorf("a plain user created an object with %s: %+v", k, resp.Result)
		}
		for _, u := range []authenticationv1.UserInfo{mgr, sre} {
			if resp := g.Handle(context.Background(), createRequest(t, u, m)); !resp.Allowed {
				t.Errorf("%s may create an object with %s: %+v", u.Username, k, resp.Result)
			}
		}
	}
	plain := machine(true)
	plain.Annotations["example.com/note"] = "x"
	if resp := g.Handle(context.Background(), createRequest(t, dev, plain)); !resp.Allowed {
		t.Errorf("an unrelated create was refused: %+v", resp.Result)
	}
	if *reads != 0 {
		t.Errorf("%d reads to judge creates", *reads)
	}
}

// TestGuardJudgesEveryRecordOnUpdate: setting, changing or removing any record is refused to a
// plain user before anything is read, state-first-run and applied-hash included.
func TestGuardJudgesEveryRecordOnUpdate(t *testing.T) {
	g, reads := guardOver(t, true)
	g.Identities = webhooks.Identities{Manager: managerUsername}
	g.Override = &webhooks.Override{Groups: []string{"sre"}}
	for _, k := range infrav1.ManagerRecordAnnotations() {
		for _, c := range []struct{ name, was, is string }{{"set", "", "v"}, {"changed", "v", "w"}, {"removed", "v", ""}} {
			oldM, newM := machine(true), machine(true)
			if c.was != "" {
				oldM.Annotations[k] = c.was
			}
			if c.is != "" {
				newM.Annotations[k] = c.is
			}
			req := updateRequest(t, "", oldM, newM)
			resp := g.Handle(context.Background(), req)
			if refused := !resp.Allowed; refused != (c.name != "removed" || k != infrav1.RetryAtAnnotation) {
				t.Errorf("a plain user %s %s: allowed %v: %+v", c.name, k, resp.Allowed, resp.Result)
			}
			for _, u := range []authenticationv1.UserInfo{{Username: managerUsername}, {Username: "alice", Groups: []string{"sre"}}} {
				req.UserInfo = u
				if resp := g.Handle(context.Background(), req); !resp.Allowed {
					t.Errorf("%s %s %s: refused: %+v", u.Username, c.name, k, resp.Result)
				}
			}
		}
	}
	if *reads != 0 {
		t.Errorf("%d reads to judge records", *reads)
	}
}

// guardExpression reads the guard's matchCondition from config/webhook/patches/guards.yaml.
func guardExpression(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "config", "webhook", "patches", "guards.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, w := range cfg.Webhooks {
		if w.Name == "guard.captf.io" {
			if len(w.MatchConditions) != 1 {
				t.Fatalf("the guard has %d matchConditions, want 1", len(w.MatchConditions))
			}
			return w.MatchConditions[0].Expression
		}
	}
	t.Fatal("guards.yaml patches no webhook guard.captf.io")
	return ""
}

// TestGuardMatchConditionNamesTheRecords keeps the guard's matchCondition and the one Go list
// from drifting apart: the expression names exactly the records and the guarded requests, its
// records list is infrav1.ManagerRecordAnnotations in order, and evaluated (cel-go, as the API
// server does with object, oldObject and request) it sends the guard every create that carries
// one and every update that writes a record, and no unrelated create or update.
func TestGuardMatchConditionNamesTheRecords(t *testing.T) {
	expr := guardExpression(t)
	recs, reqs := infrav1.ManagerRecordAnnotations(), infrav1.GuardedRequestAnnotations()
	var named []string
	for _, m := range regexp.MustCompile(`'(captf\.io/[a-z-]+)'`).FindAllStringSubmatch(expr, -1) {
		if !slices.Contains(named, m[1]) {
			named = append(named, m[1])
		}
	}
	want := append(slices.Clone(recs), reqs...)
	slices.Sort(named)
	slices.Sort(want)
	if !slices.Equal(named, want) {
		t.Fatalf("the matchCondition names %q, the Go lists %q", named, want)
	}
	list := regexp.MustCompile(`(?s)\[('captf\.io/applied-hash'[^\]]*)\]\.exists`).FindStringSubmatch(expr)
	if list == nil {
		t.Fatal("the matchCondition has no records list starting with 'captf.io/applied-hash'")
	}
	var inYAML []string
	for _, m := range regexp.MustCompile(`'([^']+)'`).FindAllStringSubmatch(list[1], -1) {
		inYAML = append(inYAML, m[1])
	}
	if !slices.Equal(inYAML, recs) {
		t.Fatalf("the matchCondition's records list %q, infrav1.ManagerRecordAnnotations %q", inYAML, recs)
	}

	env, err := cel.NewEnv(cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType), cel.Variable("request", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	obj := func(kv ...string) map[string]any {
		ann := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			ann[kv[i]] = kv[i+1]
		}
		return map[string]any{"metadata": map[string]any{"name": "o", "annotations": ann}}
	}
	match := func(op string, oldObj, newObj map[string]any) bool {
		t.Helper()
		var old any = oldObj
		if oldObj == nil {
			old = nil
		}
		out, _, err := prg.Eval(map[string]any{"object": newObj, "oldObject": old, "request": map[string]any{"operation": op}})
		if err != nil {
			t.Fatalf("%s: the expression fails (the API server would refuse the request): %v", op, err)
		}
		return out.Value() == true
	}
	for _, k := range recs {
		if !match("CREATE", nil, obj(k, "v")) {
			t.Errorf("a create with %s does not reach the guard", k)
		}
		for _, c := range [][2]map[string]any{{obj(), obj(k, "v")}, {obj(k, "v"), obj(k, "w")}, {obj(k, "v"), obj()}} {
			if !match("UPDATE", c[0], c[1]) {
				t.Errorf("an update of %s (%v to %v) does not reach the guard", k, c[0], c[1])
			}
		}
		if match("UPDATE", obj(k, "v"), obj(k, "v", "example.com/note", "x")) {
			t.Errorf("an update that keeps %s reaches the guard", k)
		}
	}
	for _, k := range reqs {
		if !match("CREATE", nil, obj(k, "v")) || !match("UPDATE", obj(), obj(k, "v")) {
			t.Errorf("a create or update that sets %s does not reach the guard", k)
		}
	}
	for _, k := range notRecords {
		if match("CREATE", nil, obj(k, "v")) {
			t.Errorf("a create with %s reaches the guard", k)
		}
		if k != infrav1.BlockMoveAnnotation && (match("UPDATE", obj(), obj(k, "v")) || match("UPDATE", obj(k, "v"), obj())) {
			t.Errorf("an update of %s reaches the guard", k)
		}
	}
	// clusterctl move's mark: setting it reaches the guard; keeping or removing it does not.
	move := infrav1.DeleteForMoveAnnotation
	if !match("CREATE", nil, obj(move, "")) || !match("UPDATE", obj(), obj(move, "")) {
		t.Errorf("a create or update that sets %s does not reach the guard", move)
	}
	if match("UPDATE", obj(move, ""), obj(move, "")) || match("UPDATE", obj(move, ""), obj()) {
		t.Errorf("an update that keeps or removes %s reaches the guard", move)
	}
	if match("CREATE", nil, map[string]any{"metadata": map[string]any{"name": "bare"}}) {
		t.Error("a create without annotations reaches the guard")
	}
	// The contract fields: present at create, set, changed or removed at update.
	spec := func(kv ...any) map[string]any {
		o := obj()
		sp := map[string]any{"module": map[string]any{"image": "m:1"}}
		for i := 0; i+1 < len(kv); i += 2 {
			sp[kv[i].(string)] = kv[i+1]
		}
		o["spec"] = sp
		return o
	}
	for _, c := range []struct {
		op       string
		old, new map[string]any
		want     bool
	}{
		{"CREATE", nil, spec("providerID", "aws:///i-1"), true},
		{"CREATE", nil, spec("providerIDList", []any{"aws:///i-1"}), true},
		{"CREATE", nil, spec(), false},
		{"UPDATE", spec(), spec("providerID", "aws:///i-1"), true},
		{"UPDATE", spec("providerID", "aws:///i-1"), spec("providerID", "aws:///i-1"), false},
		{"UPDATE", spec(), spec("providerIDList", []any{"a"}), true},
		{"UPDATE", spec("providerIDList", []any{"a"}), spec("providerIDList", []any{"a", "b"}), true},
		{"UPDATE", spec("providerIDList", []any{"a"}), spec(), true},
		{"UPDATE", spec("providerIDList", []any{"a"}), spec("providerIDList", []any{"a"}), false},
		{"UPDATE", obj(), obj("example.com/note", "x"), false},
	} {
		if got := match(c.op, c.old, c.new); got != c.want {
			t.Errorf("%s %v to %v reaches the guard: %t, want %t", c.op, c.old, c.new, got, c.want)
		}
	}
}

// TestContractFieldsAreRecords: spec.providerID and spec.providerIDList are judged like the
// manager's records, on a create (a diff from nothing) and on an update.
func TestContractFieldsAreRecords(t *testing.T) {
	ref := webhooks.ObjectRef{Kind: infrav1.TerraformMachineKind, Namespace: "ns", Name: "m"}
	with := func(id string, list ...string) *webhooks.Marks {
		m := &webhooks.Marks{}
		m.Spec.ProviderID, m.Spec.ProviderIDList = id, list
		return m
	}
	for _, c := range []struct {
		name     string
		old, new *webhooks.Marks
		create   bool
		want     []string
	}{
		{"created with a providerID", &webhooks.Marks{}, with("aws:///i-1"), true, []string{webhooks.ContractProviderID}},
		{"created with a providerIDList", &webhooks.Marks{}, with("", "a"), true, []string{webhooks.ContractProviderIDList}},
		{"providerID set on an update", with(""), with("aws:///i-1"), false, []string{webhooks.ContractProviderID}},
		{"providerIDList changed", with("", "a"), with("", "a", "b"), false, []string{webhooks.ContractProviderIDList}},
		{"providerIDList cleared", with("", "a"), with(""), false, []string{webhooks.ContractProviderIDList}},
		{"kept", with("aws:///i-1", "a"), with("aws:///i-1", "a"), false, nil},
	} {
		ch := webhooks.DiffRecords(c.old, c.new)
		if !slices.Equal(ch.Contract, c.want) {
			t.Errorf("%s: contract %v, want %v", c.name, ch.Contract, c.want)
		}
		v := webhooks.JudgeRecords(ch, c.create, false, "groups sre", ref)
		if v.Allowed != (len(c.want) == 0) {
			t.Errorf("%s: allowed %t to a plain user", c.name, v.Allowed)
		}
		if len(c.want) > 0 && !strings.Contains(v.Message, c.want[0]) || len(c.want) > 0 && !strings.Contains(v.Message, "docs/module-contract.md") {
			t.Errorf("%s: message %q", c.name, v.Message)
		}
		if !webhooks.JudgeRecords(ch, c.create, true, "groups sre", ref).Allowed {
			t.Errorf("%s: refused to the manager or an override member", c.name)
		}
	}
}

func TestValidateTemplateMetadata(t *testing.T) {
	path := field.NewPath("spec", "template", "metadata", "annotations")
	for _, k := range append(infrav1.ManagerRecordAnnotations(), infrav1.GuardedRequestAnnotations()...) {
		errs := webhooks.ValidateTemplateMetadata(path, map[string]string{k: "x", "example.com/team": "infra"})
		if len(errs) != 1 || errs[0].Field != path.Key(k).String() || errs[0].Type != field.ErrorTypeForbidden ||
			!strings.Contains(errs[0].Detail, "remove it from the template") {
			t.Errorf("a template stamping %s: %v", k, errs)
		}
	}
	if errs := webhooks.ValidateTemplateMetadata(path, map[string]string{"example.com/team": "infra", infrav1.RefreshAnnotation: "x",
		infrav1.PausedAnnotation: ""}); len(errs) != 0 {
		t.Errorf("ordinary annotations refused: %v", errs)
	}
	if errs := webhooks.ValidateTemplateMetadata(path, nil); len(errs) != 0 {
		t.Errorf("no annotations refused: %v", errs)
	}
}

// TestFinalizerOfAnObjectThatMayOwnInfrastructure: a plain user may not remove the finalizer of
// an object whose Jobs may have made infrastructure no destroy removed; the manager and the
// override groups may, and so may anyone for an object that never ran a Job or was destroyed.
func TestFinalizerOfAnObjectThatMayOwnInfrastructure(t *testing.T) {
	ref := webhooks.ObjectRef{Kind: infrav1.TerraformClusterKind, Namespace: "ns", Name: "c"}
	removal := webhooks.Change{FinalizerRemoved: true}
	provisioned := annMarks()
	yes := true
	provisioned.Status.Initialization = &infrav1.Initialization{Provisioned: &yes}
	for _, c := range []struct {
		name string
		old  *webhooks.Marks
		owns bool
	}{
		{"never ran a Job", annMarks(), false},
		{"a Job was started", annMarks(infrav1.RunSeqAnnotation, "2"), true},
		{"applied", annMarks(infrav1.AppliedHashAnnotation, "h"), true},
		{"its first run started", annMarks(infrav1.StateFirstRunAnnotation, "u/j"), true},
		{"wrote a state", annMarks(infrav1.StateLineageAnnotation, "L"), true},
		{"provisioned (a moved object)", provisioned, true},
		{"destroyed", annMarks(infrav1.RunSeqAnnotation, "3", infrav1.AppliedHashAnnotation, "h", infrav1.DestroyedAnnotation, "true"), false},
	} {
		if got := webhooks.MayOwnInfrastructure(c.old); got != c.owns {
			t.Errorf("%s: MayOwnInfrastructure = %t", c.name, got)
		}
		msg := webhooks.JudgeFinalizerRemoval(removal, false, c.old, "groups sre", ref)
		if (msg != "") != c.owns {
			t.Errorf("%s: a plain user's removal refused: %q", c.name, msg)
		}
		if c.owns && !strings.Contains(msg, "spec.deletionPolicy: Retain") {
			t.Errorf("%s: the refusal does not say what to do: %q", c.name, msg)
		}
		if webhooks.JudgeFinalizerRemoval(removal, true, c.old, "groups sre", ref) != "" {
			t.Errorf("%s: the manager or an override member is refused", c.name)
		}
		if webhooks.JudgeFinalizerRemoval(webhooks.Change{BlockMoveRemoved: true}, false, c.old, "groups sre", ref) != "" {
			t.Errorf("%s: a removal of block-move alone is judged as the finalizer's", c.name)
		}
	}
}
