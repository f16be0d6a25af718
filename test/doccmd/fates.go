package doccmd

// The e2e specs that run the pages' commands, by the text of their top-level Describe (the
// specs use these constants, so a rename cannot leave a fate behind).
const (
	// SpecMakeRun starts the sandbox as `make run SAMPLES=1` does and follows README.md and
	// docs/sandbox.md on it.
	SpecMakeRun = "make run with the samples"
	// SpecCLI follows docs/cli.md's examples on namespace prod and its Cluster prod.
	SpecCLI = "kubectl captf, with real Terraform"
	// SpecCLIFlags runs docs/cli.md's Installing, Completion, version and status -A blocks.
	SpecCLIFlags = "kubectl captf as kubectl users expect it"
	// SpecDrift runs docs/cli.md's drift check.
	SpecDrift = "kubectl captf drift check, with real Terraform"
	// SpecClusterctl runs docs/sandbox.md's "clusterctl with this checkout's provider".
	SpecClusterctl = "clusterctl with this checkout's provider on the sandbox"
	// SpecFlavor follows docs/flavors.md's plain flavor.
	SpecFlavor = "the plain cluster flavor (templates/cluster-template.yaml)"
	// SpecPlans follows docs/plans.md's Manual story.
	SpecPlans = "Saved plans and approvals, with real Terraform"
	// SpecPlanPolicy reads a held plan's violations as docs/plans.md does.
	SpecPlanPolicy = "Plan policies, with real Terraform"
	// SpecDriftChecks reads DriftDetected as docs/drift.md does.
	SpecDriftChecks = "Drift checks, with real Terraform"
	// SpecRefresh runs docs/drift.md's refresh on demand and reads the Accepted reason.
	SpecRefresh = "Refresh, with real Terraform"
	// SpecState reads the backups and StateReadable as docs/state.md does.
	SpecState = "The state, with real Terraform"
	// SpecTargeted runs docs/state.md's targeted operations, docs/cli.md's replace and forget, and
	// docs/lifecycle.md's change of the module alone.
	SpecTargeted = "Targeted operations, with real Terraform and OpenTofu"
	// SpecLostCluster runs docs/state.md's recovery into a new management cluster.
	SpecLostCluster = "The management cluster is lost"
	// SpecMakeRunReplica runs docs/sandbox.md's make run REPLICA=1, twice on one store folder.
	SpecMakeRunReplica = "make run with a state replica"
	// SpecReplica runs docs/state.md's strict replication and the plugin's view of the store.
	SpecReplica = "The state replica on the sandbox"
)

// Fate is what becomes of a command a page shows: a spec runs it, or no test can, and why.
type Fate struct {
	// Spec is the e2e spec that runs the command (one of the Spec constants); "" when none does.
	Spec string
	// How says what the spec changes in the command before it runs it ("" when nothing: the
	// command runs as the page writes it, in a folder laid out as the checkout with the
	// spec's own kubeconfig at bin/sandbox.kubeconfig).
	How string
	// NotRun says why no test runs the command (when Spec is "").
	NotRun string
}

// makeRun is how SpecMakeRun runs `make run SAMPLES=1`.
const makeRun = "the spec asks make what it runs (make -n run SAMPLES=1) and runs that sandbox command with the " +
	"kubeconfig in its own folder and its own binaries, so a test never overwrites the kubeconfig of a sandbox you run"

// inNamespaceLineage is inNamespace with <lineage> replaced by the lineage the hold's message names.
const inNamespaceLineage = inNamespace + ", and <lineage> by the lineage the hold's message names"

// namesReplaced is how a spec runs an example written for namespace prod and its object prod.
const namesReplaced = "namespace prod and the object prod replaced by the spec's own"

// inNamespace is how a spec runs an example written for the object demo of the current
// namespace.
const inNamespace = "from a kubeconfig whose namespace is the spec's, with demo replaced by the spec's object"

// Fates is the fate of every command of Pages.
var Fates = map[Key]Fate{
	{"README.md", "make run SAMPLES=1"}:                                                    {Spec: SpecMakeRun, How: makeRun},
	{"README.md", "export KUBECONFIG=$PWD/bin/sandbox.kubeconfig PATH=$PWD/bin:$PATH"}:     {Spec: SpecMakeRun},
	{"README.md", "kubectl get terraformclusters,terraformmachines,terraformmachinepools"}: {Spec: SpecMakeRun},
	{"README.md", "kubectl get jobs,pods -l captf.io/managed=true"}:                        {Spec: SpecMakeRun},
	{"README.md", "kubectl delete cluster sample"}:                                         {Spec: SpecMakeRun},

	{"docs/sandbox.md", "make run REPLICA=1"}:                                                                                   {Spec: SpecMakeRunReplica, How: "the spec asks make what it runs (make -n run REPLICA=1) and runs that sandbox command with the store's folder and the kubeconfig in temporary folders, twice"},
	{"docs/sandbox.md", "make run SAMPLES=1"}:                                                                                   {Spec: SpecMakeRun, How: makeRun},
	{"docs/sandbox.md", "export KUBECONFIG=$PWD/bin/sandbox.kubeconfig PATH=$PWD/bin:$PATH"}:                                    {Spec: SpecMakeRun},
	{"docs/sandbox.md", "kubectl get clusters,terraformclusters,terraformmachines,terraformmachinepools"}:                       {Spec: SpecMakeRun},
	{"docs/sandbox.md", "kubectl get jobs,pods -l captf.io/managed=true"}:                                                       {Spec: SpecMakeRun},
	{"docs/sandbox.md", "kubectl scale machinepool sample-pool --replicas=3"}:                                                   {Spec: SpecMakeRun},
	{"docs/sandbox.md", "kubectl delete cluster sample"}:                                                                        {Spec: SpecMakeRun},
	{"docs/sandbox.md", "kustomize build config/rbac | kubectl apply -f - -l rbac.authorization.k8s.io/aggregate-to-edit=true"}: {Spec: SpecMakeRun},
	{"docs/sandbox.md", "kustomize build config/rbac | kubectl apply -f - -l rbac.authorization.k8s.io/aggregate-to-view=true"}: {Spec: SpecMakeRun},
	{"docs/sandbox.md", "kubectl create namespace team-a"}:                                                                      {Spec: SpecMakeRun},
	{"docs/sandbox.md", "kubectl create rolebinding alice-edit --clusterrole=edit --user=alice -n team-a"}:                      {Spec: SpecMakeRun},
	{"docs/sandbox.md", "kubectl auth can-i create terraformclusters -n team-a --as=alice"}:                                     {Spec: SpecMakeRun},
	{"docs/sandbox.md", "kubectl auth can-i patch terraformclusters --subresource=status -n team-a --as=alice"}:                 {Spec: SpecMakeRun},
	{"docs/sandbox.md", "kubectl get machines,nodes"}:                                                                           {Spec: SpecMakeRun},
	{"docs/sandbox.md", "make release-manifests RELEASE_DIR=$PWD/out/repository/infrastructure-terraform/v0.1.0"}:               {Spec: SpecClusterctl},
	{"docs/sandbox.md", `printf 'providers:\n- name: terraform\n  type: InfrastructureProvider\n  url: file://%s/out/repository/infrastructure-terraform/v0.1.0/infrastructure-components.yaml\n' "$PWD" > out/clusterctl.yaml`}: {Spec: SpecClusterctl},
	{"docs/sandbox.md", "kubectl create namespace cc"}: {Spec: SpecClusterctl},
	{"docs/sandbox.md", "clusterctl generate cluster cc --config out/clusterctl.yaml --infrastructure terraform:v0.1.0 --flavor topology --target-namespace cc --kubernetes-version v1.36.0 --worker-machine-count 2 > out/cc.yaml"}: {Spec: SpecClusterctl},
	{"docs/sandbox.md", "bin/sandbox --kubeconfig=/tmp/a.kubeconfig --apply-samples"}:                                                                           {NotRun: notRunMove},
	{"docs/sandbox.md", "bin/sandbox --kubeconfig=/tmp/b.kubeconfig"}:                                                                                           {NotRun: notRunMove},
	{"docs/sandbox.md", "CLUSTERCTL_DISABLE_VERSIONCHECK=true bin/clusterctl move -n default --kubeconfig /tmp/a.kubeconfig --to-kubeconfig /tmp/b.kubeconfig"}: {NotRun: notRunMove},
	{"docs/sandbox.md", "KUBECONFIG=~/.kube/mgmt make run-manager"}:                                                                                             {NotRun: notRunManager},
	{"docs/sandbox.md", `KUBECONFIG=~/.kube/mgmt make run-manager MANAGER_ARGS="--enable-webhooks --webhook-cert-dir=/path/to/certs"`}:                          {NotRun: notRunManager},

	{"docs/flavors.md", "export KUBECONFIG=$PWD/bin/sandbox.kubeconfig PATH=$PWD/bin:$PATH"}: {Spec: SpecFlavor},
	{"docs/flavors.md", "kubectl create namespace flavor"}:                                   {Spec: SpecFlavor},
	{"docs/flavors.md", "kubectl apply -n flavor -f config/samples/modules.yaml"}:            {Spec: SpecFlavor},
	{"docs/flavors.md", "clusterctl generate cluster fl --from templates/cluster-template.yaml --target-namespace flavor --kubernetes-version v1.36.0 --worker-machine-count 2 > fl.yaml"}: {Spec: SpecFlavor},
	{"docs/flavors.md", "kubectl apply -f fl.yaml"}:            {Spec: SpecFlavor},
	{"docs/flavors.md", "kubectl get machines -n flavor"}:      {Spec: SpecFlavor},
	{"docs/flavors.md", "kubectl delete cluster -n flavor fl"}: {Spec: SpecFlavor},

	{"docs/cli.md", "make build"}:                                                                                           {Spec: SpecCLIFlags, How: "in the checkout, as the page says"},
	{"docs/cli.md", "export PATH=$PWD/bin:$PATH"}:                                                                           {Spec: SpecCLIFlags, How: "in the checkout, as the page says"},
	{"docs/cli.md", "kubectl captf --help"}:                                                                                 {Spec: SpecCLIFlags},
	{"docs/cli.md", "kubectl captf version --client"}:                                                                       {Spec: SpecCLIFlags},
	{"docs/cli.md", "kubectl __complete captf status tfc/"}:                                                                 {Spec: SpecCLIFlags},
	{"docs/cli.md", "kubectl captf version"}:                                                                                {Spec: SpecCLIFlags},
	{"docs/cli.md", "kubectl captf status -A -o wide"}:                                                                      {Spec: SpecCLIFlags},
	{"docs/cli.md", "kubectl captf -n prod status --cluster prod"}:                                                          {Spec: SpecCLI},
	{"docs/cli.md", "kubectl captf -n prod trace prod"}:                                                                     {Spec: SpecCLI},
	{"docs/cli.md", "kubectl captf -n prod plan show terraformcluster/prod"}:                                                {Spec: SpecCLI},
	{"docs/cli.md", "kubectl captf -n prod approve terraformcluster/prod --plan-id 7b92ef05b5e7501042311f90bee3e4b4 --yes"}: {Spec: SpecCLI},
	{"docs/cli.md", "kubectl captf -n prod approve terraformcluster/prod"}:                                                  {Spec: SpecCLI},
	{"docs/cli.md", "kubectl captf -n prod drift check terraformcluster/prod --value ticket-4711"}:                          {Spec: SpecDrift, How: namesReplaced},
	{"docs/cli.md", "kubectl captf -n prod restore terraformcluster/prod"}:                                                  {Spec: SpecCLI},
	{"docs/cli.md", "kubectl captf -n prod unlock terraformcluster/prod"}:                                                   {Spec: SpecCLI},
	{"docs/cli.md", "kubectl captf -n prod logs terraformcluster/prod --result"}:                                            {Spec: SpecCLI},

	{"docs/plans.md", `kubectl -n prod patch terraformcluster prod --type=merge -p '{"spec":{"variables":{"generation":2,"extra":1}}}'`}:                                                                    {Spec: SpecPlans, How: namesReplaced},
	{"docs/plans.md", "kubectl -n prod get terraformcluster prod"}:                                                                                                                                          {Spec: SpecPlans, How: namesReplaced},
	{"docs/plans.md", `secret=$(kubectl -n prod get terraformcluster prod -o jsonpath='{.status.pendingPlan.secret}') && kubectl -n prod get secret "$secret" -o jsonpath='{.data.plan\.txt}' | base64 -d`}: {Spec: SpecPlans, How: namesReplaced},
	{"docs/plans.md", `kubectl -n prod get secret "$secret" -o jsonpath='{.data.plan\.json}' | base64 -d | jq '.resource_changes[] | {address, actions: .change.actions}'`}: {Spec: SpecPlans,
		How: namesReplaced + "; $secret is the pending plan's Secret, as the command before set it"},
	{"docs/plans.md", "kubectl -n prod annotate terraformcluster prod captf.io/approve-plan=7d1c0a59d1b5e2f8a2cc35b1e0c3e1f4"}: {Spec: SpecPlans,
		How: namesReplaced + ", the example's plan ID by the pending plan's"},
	{"docs/plans.md", `kubectl -n prod get jobs -l captf.io/owner-name=prod,captf.io/operation=Apply -o jsonpath='{.items[*].metadata.annotations.captf\.io/plan-id}'`}: {Spec: SpecPlans, How: namesReplaced},
	{"docs/plans.md", "kubectl -n prod get terraformcluster prod -o jsonpath='{.status.pendingPlan.violations}'"}:                                                       {Spec: SpecPlanPolicy, How: namesReplaced},

	{"docs/state.md", `kubectl get terraformcluster demo -o jsonpath='{.status.conditions[?(@.type=="StateReadable")]}'`}:                                {Spec: SpecState, How: inNamespace},
	{"docs/state.md", `kubectl get terraformcluster demo -o jsonpath='{range .status.stateBackups[*]}{.serial}{"\t"}{.secret}{"\t"}{.time}{"\n"}{end}'`}: {Spec: SpecState, How: inNamespace},

	{"docs/drift.md", `kubectl get terraformcluster demo -o jsonpath='{.status.conditions[?(@.type=="DriftDetected")]}'`}:                                                                                                        {Spec: SpecDriftChecks, How: inNamespace},
	{"docs/state.md", `kubectl get terraformcluster demo -o jsonpath='{.status.conditions[?(@.type=="StateReadable")].message}'`}:                                                                                                {Spec: SpecLostCluster, How: inNamespaceLineage},
	{"docs/state.md", "kubectl captf restore terraformcluster/demo"}:                                                                                                                                                             {Spec: SpecReplica, How: inNamespace},
	{"docs/state.md", `kubectl patch terraformcluster demo --type=merge -p '{"spec":{"stateReplication":"Strict"}}'`}:                                                                                                            {Spec: SpecReplica, How: inNamespace},
	{"docs/state.md", "kubectl captf restore terraformcluster/demo --serial <serial> --yes"}:                                                                                                                                     {Spec: SpecReplica, How: inNamespace + ", and <serial> by the serial the store holds beyond the state Secret's"},
	{"docs/state.md", "kubectl annotate terraformcluster demo captf.io/adopt-state=<lineage>"}:                                                                                                                                   {Spec: SpecLostCluster, How: inNamespaceLineage},
	{"docs/state.md", "kubectl annotate terraformmachine demo-m0 captf.io/adopt-state=<lineage>"}:                                                                                                                                {Spec: SpecLostCluster, How: inNamespaceLineage},
	{"docs/state.md", "kubectl captf replace terraformcluster/demo terraform_data.node"}:                                                                                                                                         {Spec: SpecTargeted, How: inNamespace},
	{"docs/state.md", "kubectl annotate terraformcluster demo captf.io/target-operation='replace terraform_data.node'"}:                                                                                                          {Spec: SpecTargeted, How: inNamespace},
	{"docs/state.md", `kubectl patch terraformcluster demo --type=merge -p '{"metadata":{"annotations":{"captf.io/target-operation":"import terraform_data.adopted[0] adopted-by-hand"}},"spec":{"variables":{"adopt":true}}}'`}: {Spec: SpecTargeted, How: inNamespace},
	{"docs/state.md", "kubectl get events --field-selector reason=TargetOperationDone"}:                                                                                                                                          {Spec: SpecTargeted, How: inNamespace},
	{"docs/state.md", `kubectl patch terraformcluster demo --type=merge -p '{"metadata":{"annotations":{"captf.io/target-operation":"forget terraform_data.node"}},"spec":{"module":{"configMap":{"name":"demo-module-v2"}}}}'`}: {Spec: SpecTargeted, How: inNamespace},
	{"docs/lifecycle.md", `kubectl patch terraformcluster demo --type=merge -p '{"spec":{"module":{"configMap":{"name":"demo-module-v3"}}}}'`}:                                                                                   {Spec: SpecTargeted, How: inNamespace},
	{"docs/cli.md", "kubectl captf -n prod forget terraformcluster/prod terraform_data.node"}:                                                                                                                                    {Spec: SpecTargeted, How: namesReplaced},
	{"docs/cli.md", "kubectl captf -n prod replace terraformcluster/prod terraform_data.node"}:                                                                                                                                   {Spec: SpecTargeted, How: namesReplaced},
	{"docs/drift.md", "kubectl annotate terraformcluster demo captf.io/drift-check=2026-12-03T15:00:00Z"}:                                                                                                                        {Spec: SpecDrift, How: inNamespace},
	{"docs/drift.md", "kubectl captf drift check terraformcluster/demo"}:                                                                                                                                                         {Spec: SpecDrift, How: inNamespace},
	{"docs/drift.md", "kubectl get events --field-selector reason=DriftCheckAnswered"}:                                                                                                                                           {Spec: SpecDrift, How: inNamespace},
	{"docs/drift.md", "kubectl annotate terraformcluster demo captf.io/refresh=2026-12-02"}:                                                                                                                                      {Spec: SpecRefresh, How: inNamespace},
	{"docs/drift.md", `kubectl get terraformcluster demo -o jsonpath='{.status.conditions[?(@.type=="DriftDetected")].reason}'`}:                                                                                                 {Spec: SpecRefresh, How: inNamespace},
}

const notRunMove = "two sandboxes in two terminals, each a control plane of its own: the suite does not start a third and " +
	"fourth; the spec \"clusterctl move from one sandbox to another\" moves between two sandboxes started by the same code " +
	"(sandbox.Start, which bin/sandbox runs) with this clusterctl move command's flags"

const notRunManager = "runs the manager against your own management cluster (~/.kube/mgmt) until you stop it: no test has " +
	"that cluster; every sandbox runs the same bin/manager"
