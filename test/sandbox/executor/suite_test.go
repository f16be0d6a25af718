//go:build linux

package executor

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/envtest"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/kubecontrollers"
)

// rootCAConfigMap is what kube-controller-manager's root CA publisher keeps in every namespace.
const (
	rootCAConfigMap = "kube-root-ca.crt"
	rootCAKey       = "ca.crt"
)

func condition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if c := &job.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

var (
	// hostTerraform is the host program the node runs for an image's terraform.
	hostTerraform string
	env           *envtest.Env
	k8s           client.Client
	ctx           context.Context
	ex            *Executor
	work          string
	nsSeq         int
	// pki is how the API server and the node's kubelet endpoint trust each other.
	pki    *KubeletPKI
	pkiDir string
)

// nodeMonitorGrace is how long the node lifecycle controller waits for a heartbeat here (a
// cluster's default is 50 s): the node beats every 2 s.
const nodeMonitorGrace = 16 * time.Second

// tokenRefreshFraction makes a projected token of 7200 s be replaced after about 3.6 s.
const tokenRefreshFraction = 0.0005

func TestExecutor(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Job executor (envtest, real kube-controller-manager and kube-scheduler): the node's sidecars, projected volumes, deletions")
}

var _ = envtest.RegisterSuite(envtest.SuiteOptions{Log: true,
	EventuallyTimeout: 90 * time.Second, PollingInterval: 100 * time.Millisecond,
	// The API server reaches the node's kubelet endpoint (pod logs) as it reaches a kubelet.
	Configure: func(o *envtest.Options) {
		var err error
		pkiDir, err = os.MkdirTemp("", "executor-kubelet-pki-")
		Expect(err).NotTo(HaveOccurred())
		pki, err = NewKubeletPKI(pkiDir)
		Expect(err).NotTo(HaveOccurred())
		o.APIServerFlags = pki.APIServerFlags()
	}}, func(s *envtest.Suite) {
	s.Defer(func() { _ = os.RemoveAll(pkiDir) })
	env, k8s, ctx = s.Env, s.Client, s.Ctx
	self, err := os.Executable()
	Expect(err).NotTo(HaveOccurred())
	work, err = os.MkdirTemp("", "executor-test-")
	Expect(err).NotTo(HaveOccurred())
	s.Defer(func() { _ = os.RemoveAll(work) }) // runs after the manager stopped: it is deferred first
	// The real kube-controller-manager and kube-scheduler drive the Jobs; the executor is the node.
	kube, err := kubecontrollers.Start(ctx, kubecontrollers.Options{BinDir: env.BinaryAssetsDirectory, Config: env.Config,
		ServiceAccountKeyFile: filepath.Join(env.ControlPlane.APIServer.CertDir, "sa-signer.key"),
		WorkDir:               filepath.Join(work, "kube-controllers"), Output: GinkgoWriter,
		NodeMonitorGracePeriod: nodeMonitorGrace})
	Expect(err).NotTo(HaveOccurred())
	s.Defer(func() { Expect(kube.Stop()).To(Succeed()) })
	// The host program that stands for an image's terraform: any executable; the image
	// specs check that the runner is told this one.
	hostTerraform = filepath.Join(work, "host-terraform")
	Expect(os.WriteFile(hostTerraform, []byte("#!/bin/sh\nexit 0\n"), 0o755)).To(Succeed())
	ex, err = New(env.Config, Options{RunnerBinary: self, TerraformBinary: self, WorkDir: work, Output: GinkgoWriter, ShutdownGrace: 5 * time.Second,
		HeartbeatInterval: 2 * time.Second, ImagePrograms: map[string]string{"terraform": hostTerraform},
		ImagePullBackOff: 500 * time.Millisecond, Kubelet: pki})
	Expect(err).NotTo(HaveOccurred())
	ex.refreshFraction = tokenRefreshFraction
	grace := ex.GracefulShutdownTimeout()
	mgr, err := manager.New(env.Config, manager.Options{Scheme: env.Scheme, Cache: CacheOptions(ex.NodeName()),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", GracefulShutdownTimeout: &grace})
	Expect(err).NotTo(HaveOccurred())
	Expect(ex.SetupWithManager(mgr)).To(Succeed())
	// The executor stops every container before the manager returns.
	s.StartManager(mgr)
})

const runnerSA = "runner"

// newNamespace gives each spec a namespace with the runner's ServiceAccount.
func newNamespace() string {
	GinkgoHelper()
	nsSeq++
	ns := fmt.Sprintf("executor-%d", nsSeq)
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: runnerSA}})).To(Succeed())
	return ns
}

// newJob is a Job the executor runs (labelled captf.io/managed=true), with one Pod, never
// restarted.
func newJob(ns, name string, spec corev1.PodSpec) *batchv1.Job {
	managed := map[string]string{infrav1.ManagedLabel: "true"}
	spec.RestartPolicy = corev1.RestartPolicyNever
	spec.ServiceAccountName = runnerSA
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	}
	return objects.Job(ns, name).Label(infrav1.ManagedLabel, "true").With(func(j *batchv1.Job) {
		j.Spec.Template = corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: managed}, Spec: spec}
	}).Obj()
}

// Paths of the shape the state channel's Job spec has.
const (
	tokenDir   = "/var/run/secrets/captf.io/serviceaccount"
	channelDir = "/captf/channel"
)

var helperMarker = corev1.EnvVar{Name: helperEnv, Value: "1"}

// installRunner is the Job's first init container: the runner copies itself into the Pod.
func installRunner() corev1.Container {
	return corev1.Container{Name: "install-runner", Image: "captf/manager:test", Command: runnerapi.InstallCommand(),
		Env: []corev1.EnvVar{helperMarker}, VolumeMounts: []corev1.VolumeMount{{Name: "runner", MountPath: runnerapi.BinDir}}}
}

// channelSidecar is the state channel: a native sidecar with the projected token, the root CA
// and the namespace, and the channel folder it shares with the main container.
func channelSidecar(extra ...string) corev1.Container {
	args := append([]string{"channel", "--token-file=" + tokenDir + "/token", "--ca-file=" + tokenDir + "/ca.crt", "--dir=" + channelDir}, extra...)
	return corev1.Container{Name: "state-channel", Image: "captf/manager:test", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Command: []string{runnerapi.RunnerPath}, Args: args,
		Env: []corev1.EnvVar{helperMarker,
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "runner", MountPath: runnerapi.BinDir},
			{Name: "captf-token", MountPath: tokenDir, ReadOnly: true},
			{Name: "channel", MountPath: channelDir},
		}}
}

// terraformContainer is the main container: the runner, the channel folder, no token.
func terraformContainer(args ...string) corev1.Container {
	return corev1.Container{Name: "terraform", Image: "captf/tofu:test", Command: []string{runnerapi.RunnerPath}, Args: args,
		Env:                    []corev1.EnvVar{helperMarker},
		TerminationMessagePath: runnerapi.TerminationLog,
		VolumeMounts: []corev1.VolumeMount{
			{Name: "runner", MountPath: runnerapi.BinDir},
			{Name: "channel", MountPath: channelDir},
		}}
}

// channelPodSpec is the shape of CAPTF's Job with a state channel.
func channelPodSpec(sidecar corev1.Container) corev1.PodSpec {
	return corev1.PodSpec{
		AutomountServiceAccountToken: ptr.To(false),
		InitContainers:               []corev1.Container{installRunner(), sidecar},
		Containers:                   []corev1.Container{terraformContainer("run", "--dir="+channelDir, "--result-file="+runnerapi.TerminationLog)},
		Volumes: []corev1.Volume{
			{Name: "runner", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "channel", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "captf-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "vault-token", Audience: "vault", ExpirationSeconds: ptr.To[int64](7200)}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: rootCAConfigMap},
					Items: []corev1.KeyToPath{{Key: rootCAKey, Path: "ca.crt"}}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
					{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
			}}}},
		},
	}
}

func podOf(job *batchv1.Job) *corev1.Pod {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(k8s.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name})).To(Succeed())
	Expect(pods.Items).To(HaveLen(1))
	return &pods.Items[0]
}

func eventuallyRunningPod(job *batchv1.Job) *corev1.Pod {
	GinkgoHelper()
	var pod *corev1.Pod
	Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(k8s.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		pod = &pods.Items[0]
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
	}).Should(Succeed())
	return pod
}

func jobCondition(job *batchv1.Job) batchv1.JobConditionType {
	for _, c := range []batchv1.JobConditionType{batchv1.JobComplete, batchv1.JobFailed} {
		if condition(job, c) != nil {
			return c
		}
	}
	return ""
}

func eventuallyFinished(job *batchv1.Job) batchv1.JobConditionType {
	GinkgoHelper()
	var cond batchv1.JobConditionType
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
		cond = jobCondition(job)
		g.Expect(cond).NotTo(BeEmpty())
	}).Should(Succeed())
	return cond
}

// mainResult is what the main container wrote to its termination message.
func mainResult(pod *corev1.Pod) helperResult {
	GinkgoHelper()
	Expect(pod.Status.ContainerStatuses).To(HaveLen(1))
	term := pod.Status.ContainerStatuses[0].State.Terminated
	Expect(term).NotTo(BeNil())
	var res helperResult
	Expect(json.Unmarshal([]byte(term.Message), &res)).To(Succeed(), "termination message %q", term.Message)
	return res
}

// volumeFolder is where the executor materialised a Pod's volume.
func volumeFolder(pod *corev1.Pod, volume string) string {
	GinkgoHelper()
	dirs, err := filepath.Glob(filepath.Join(work, pod.Namespace, pod.Name, "volumes", volume+"-*"))
	Expect(err).NotTo(HaveOccurred())
	Expect(dirs).To(HaveLen(1), "the folder of volume %s", volume)
	return dirs[0]
}

func initStatus(pod *corev1.Pod, name string) corev1.ContainerStatus {
	GinkgoHelper()
	for _, s := range pod.Status.InitContainerStatuses {
		if s.Name == name {
			return s
		}
	}
	Fail("no status of init container " + name)
	return corev1.ContainerStatus{}
}

// claims decodes a JWT's payload.
func claims(token []byte) map[string]any {
	GinkgoHelper()
	parts := strings.Split(strings.TrimSpace(string(token)), ".")
	Expect(parts).To(HaveLen(3))
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	Expect(err).NotTo(HaveOccurred())
	out := map[string]any{}
	Expect(json.Unmarshal(raw, &out)).To(Succeed())
	return out
}

func fileContent(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}

var _ = Describe("native sidecars and projected volumes", func() {
	It("runs the state channel's shape: the sidecar alone holds a token; the main container has none and reaches the sidecar", func() {
		ns := newNamespace()
		job := newJob(ns, "channel", channelPodSpec(channelSidecar()))
		Expect(k8s.Create(ctx, job)).To(Succeed())
		Expect(eventuallyFinished(job)).To(Equal(batchv1.JobComplete))
		pod := podOf(job)
		res := mainResult(pod)
		Expect(res.Problems).To(BeEmpty())
		Expect(res.Whoami).To(Equal("system:serviceaccount:"+ns+":"+runnerSA), "the sidecar's token is the Pod's ServiceAccount's")
		Expect(res.SidecarEnv).To(Equal(ns+"/"+pod.Name), "env fieldRef resolved for the sidecar")
		Expect(res.Env).To(ConsistOf(HavePrefix("KUBERNETES_SERVICE_HOST="), HavePrefix("KUBERNETES_SERVICE_PORT=")),
			"the main container knows where the API server is, and holds nothing to reach it with")

		By("the sidecar ran beside the main container and was stopped after it, with SIGTERM")
		install, sidecar := initStatus(pod, "install-runner"), initStatus(pod, "state-channel")
		Expect(install.State.Terminated).NotTo(BeNil())
		Expect(install.State.Terminated.ExitCode).To(BeZero())
		Expect(sidecar.State.Terminated).NotTo(BeNil())
		Expect(sidecar.State.Terminated.Reason).To(Equal("Terminated"))
		Expect(sidecar.State.Terminated.ExitCode).To(BeZero(), "the sidecar exited by itself on SIGTERM")
		Expect(sidecar.RestartCount).To(BeZero())
		Expect(fileContent(filepath.Join(volumeFolder(pod, "channel"), "sidecar-stopped"))).NotTo(BeEmpty())
		for _, r := range ex.Runs() {
			if r.Pod == pod.Name {
				Expect(r.ExitCode).To(BeZero())
				Expect(r.Phase).To(Equal(corev1.PodSucceeded))
			}
		}

		By("the projected volume holds real tokens with the asked audiences, the root CA and the namespace")
		vol := volumeFolder(pod, "captf-token")
		token := claims([]byte(fileContent(filepath.Join(vol, "token"))))
		Expect(token["aud"]).To(ContainElement(token["iss"]), "no audience: the API server's own")
		vault := claims([]byte(fileContent(filepath.Join(vol, "vault-token"))))
		Expect(vault["aud"]).To(ConsistOf("vault"))
		Expect(vault["exp"].(float64) - vault["iat"].(float64)).To(BeNumerically("==", 7200))
		Expect(vault["kubernetes.io"]).To(HaveKeyWithValue("pod", HaveKeyWithValue("name", pod.Name)), "bound to the Pod")
		Expect(fileContent(filepath.Join(vol, "ca.crt"))).To(Equal(string(env.Config.CAData)))
		Expect(fileContent(filepath.Join(vol, "namespace"))).To(Equal(ns))
		_, err := os.Stat(filepath.Join(work, ns, pod.Name, "kubeconfig"))
		Expect(os.IsNotExist(err)).To(BeTrue(), "automountServiceAccountToken: false: no kubeconfig at all")
	})

	It("records a Pod's run before it reports the Pod's end, however slow the record", func() {
		// e2e specs read the history once an object is gone (its destroy Job complete, its
		// finalizer dropped): the run must already be there.
		ex.recordDelay.Store(int64(3 * time.Second))
		DeferCleanup(func() { ex.recordDelay.Store(0) })
		ns := newNamespace()
		job := newJob(ns, "recorded", channelPodSpec(channelSidecar()))
		Expect(k8s.Create(ctx, job)).To(Succeed())
		Expect(eventuallyFinished(job)).To(Equal(batchv1.JobComplete))
		pod := podOf(job)
		var mine []Run
		for _, r := range ex.Runs() {
			if r.Namespace == ns && r.Pod == pod.Name {
				mine = append(mine, r)
			}
		}
		Expect(mine).To(ConsistOf(And(HaveField("ExitCode", BeEquivalentTo(0)), HaveField("Phase", corev1.PodSucceeded),
			HaveField("Job", job.Name))), "the run is recorded by the time its Job is complete")
	})

	It("starts a sidecar that exited early again, after a back-off", func() {
		ns := newNamespace()
		job := newJob(ns, "crash", channelPodSpec(channelSidecar("--crash-once")))
		Expect(k8s.Create(ctx, job)).To(Succeed())
		Expect(eventuallyFinished(job)).To(Equal(batchv1.JobComplete))
		pod := podOf(job)
		Expect(mainResult(pod).Problems).To(BeEmpty())
		sidecar := initStatus(pod, "state-channel")
		Expect(sidecar.RestartCount).To(Equal(int32(1)))
		Expect(sidecar.LastTerminationState.Terminated).NotTo(BeNil())
		Expect(sidecar.LastTerminationState.Terminated.ExitCode).To(Equal(int32(3)))
	})

	It("starts the main container only once the sidecar's startup probe succeeded", func() {
		ns := newNamespace()
		sc := channelSidecar("--ready-after=2s")
		// A generous timeout: the probe is this test binary, slow to start under -race.
		sc.StartupProbe = &corev1.Probe{PeriodSeconds: 1, TimeoutSeconds: 20, FailureThreshold: 30, ProbeHandler: corev1.ProbeHandler{
			Exec: &corev1.ExecAction{Command: []string{runnerapi.RunnerPath, "probe", "--dir=" + channelDir}}}}
		job := newJob(ns, "probe", channelPodSpec(sc))
		Expect(k8s.Create(ctx, job)).To(Succeed())
		Expect(eventuallyFinished(job)).To(Equal(batchv1.JobComplete))
		res := mainResult(podOf(job))
		Expect(res.Problems).To(BeEmpty())
		Expect(res.SidecarReady).To(BeTrue(), "the main container started before the sidecar's startup probe succeeded")
	})

	It("kills a sidecar whose startup probe keeps failing, starts it again, and never starts the main container", func() {
		ns := newNamespace()
		sc := channelSidecar()
		sc.StartupProbe = &corev1.Probe{PeriodSeconds: 1, TimeoutSeconds: 20, FailureThreshold: 2, ProbeHandler: corev1.ProbeHandler{
			Exec: &corev1.ExecAction{Command: []string{runnerapi.RunnerPath, "probe", "--dir=" + channelDir}}}}
		job := newJob(ns, "unready", channelPodSpec(sc))
		Expect(k8s.Create(ctx, job)).To(Succeed())
		var pod *corev1.Pod
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{batchv1.JobNameLabel: job.Name})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(1))
			pod = &pods.Items[0]
			var st *corev1.ContainerStatus
			for i := range pod.Status.InitContainerStatuses {
				if pod.Status.InitContainerStatuses[i].Name == "state-channel" {
					st = &pod.Status.InitContainerStatuses[i]
				}
			}
			g.Expect(st).NotTo(BeNil())
			g.Expect(st.RestartCount).To(BeNumerically(">=", 1))
			g.Expect(st.LastTerminationState.Terminated).NotTo(BeNil())
			g.Expect(st.LastTerminationState.Terminated.Reason).To(Equal("Killed"))
		}).Should(Succeed())
		Expect(pod.Status.Phase).To(Equal(corev1.PodPending), "the main container never started")
		Expect(k8s.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(gone(pod)).Should(BeTrue())
	})

	It("replaces a projected token before it expires", func() {
		ns := newNamespace()
		spec := channelPodSpec(channelSidecar())
		spec.Containers = []corev1.Container{terraformContainer("wait", "--dir="+channelDir)}
		job := newJob(ns, "refresh", spec)
		Expect(k8s.Create(ctx, job)).To(Succeed())
		pod := eventuallyRunningPod(job)
		path := filepath.Join(volumeFolder(pod, "captf-token"), "vault-token")
		first := fileContent(path)
		Expect(first).NotTo(BeEmpty())
		Eventually(func() string { return fileContent(path) }).ShouldNot(Equal(first), "a 7200 s token is replaced after 0.05%% of its life here")
		Expect(claims([]byte(fileContent(path)))["aud"]).To(ConsistOf("vault"))
		Expect(k8s.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}) }).Should(WithTransform(apierrors.IsNotFound, BeTrue()))
	})

	It("keeps the automatic token of a Pod that does not opt out of it", func() {
		ns := newNamespace()
		job := newJob(ns, "automount", corev1.PodSpec{
			InitContainers: []corev1.Container{installRunner()},
			Containers:     []corev1.Container{terraformContainer("env", "--result-file="+runnerapi.TerminationLog)},
			Volumes: []corev1.Volume{
				{Name: "runner", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "channel", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		})
		Expect(k8s.Create(ctx, job)).To(Succeed())
		Expect(eventuallyFinished(job)).To(Equal(batchv1.JobComplete))
		pod := podOf(job)
		kubeconfig := filepath.Join(work, ns, pod.Name, "kubeconfig")
		Expect(mainResult(pod).Env).To(ContainElement(runnerapi.EnvKubeConfigPath + "=" + kubeconfig))
		Expect(fileContent(kubeconfig)).To(ContainSubstring("token:"))
	})

	It("finds the API server's CA as kube-root-ca.crt in every namespace, kept so by the real root CA publisher", func() {
		ns := newNamespace()
		cm := &corev1.ConfigMap{}
		key := types.NamespacedName{Namespace: ns, Name: rootCAConfigMap}
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, key, cm)).To(Succeed())
			g.Expect(cm.Data).To(Equal(map[string]string{rootCAKey: string(env.Config.CAData)}))
		}).Should(Succeed())
		cm.Data[rootCAKey] = "forged"
		Expect(k8s.Update(ctx, cm)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, key, cm)).To(Succeed())
			g.Expect(cm.Data[rootCAKey]).To(Equal(string(env.Config.CAData)))
		}).Should(Succeed())
	})
})

// waitingJob runs a main container that waits for SIGTERM, marking its start and its SIGTERM in
// its "state" volume; with release set, it exits only once that file exists.
func waitingJob(ns, name, release string) *batchv1.Job {
	args := []string{"wait", "--dir=/captf/state"}
	if release != "" {
		args = append(args, "--release="+release)
	}
	c := terraformContainer(args...)
	c.VolumeMounts = []corev1.VolumeMount{{Name: "runner", MountPath: runnerapi.BinDir}, {Name: "state", MountPath: "/captf/state"}}
	return newJob(ns, name, corev1.PodSpec{
		InitContainers: []corev1.Container{installRunner()},
		Containers:     []corev1.Container{c},
		Volumes: []corev1.Volume{
			{Name: "runner", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "state", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
	})
}

// startedWaiting creates a waiting Job and returns its running Pod and the Pod's state folder.
func startedWaiting(job *batchv1.Job) (*corev1.Pod, string) {
	GinkgoHelper()
	Expect(k8s.Create(ctx, job)).To(Succeed())
	pod := eventuallyRunningPod(job)
	state := volumeFolder(pod, "state")
	Eventually(func() string { return fileContent(filepath.Join(state, "started")) }).Should(Equal("yes"))
	return pod, state
}

func gone(o client.Object) func() bool {
	return func() bool {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))
		return apierrors.IsNotFound(err)
	}
}

var _ = Describe("deleting a Job: the real garbage collector and Job controller, and the node", func() {
	for _, tc := range []struct {
		name string
		opts []client.DeleteOption
	}{
		{"propagationPolicy Orphan", []client.DeleteOption{client.PropagationPolicy(metav1.DeletePropagationOrphan)}},
		{"no propagation policy (batch/v1 defaults to orphan)", nil},
	} {
		It("leaves the Pod of a Job deleted with "+tc.name+" running, without its owner reference", func() {
			ns := newNamespace()
			job := waitingJob(ns, "orphan", "")
			pod, state := startedWaiting(job)
			Expect(k8s.Delete(ctx, job, tc.opts...)).To(Succeed())
			Eventually(gone(job)).Should(BeTrue())
			Consistently(func(g Gomega) {
				live := &corev1.Pod{}
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), live)).To(Succeed())
				g.Expect(live.UID).To(Equal(pod.UID))
				g.Expect(live.DeletionTimestamp).To(BeNil())
				g.Expect(live.OwnerReferences).To(BeEmpty(), "the garbage collector removed the Job's owner reference")
				g.Expect(live.Status.Phase).To(Equal(corev1.PodRunning))
				g.Expect(fileContent(filepath.Join(state, "terminated"))).To(BeEmpty(), "the orphaned container got SIGTERM")
			}, 3*time.Second).Should(Succeed())

			By("it keeps running until it ends by itself (here: its own deletion)")
			Expect(k8s.Delete(ctx, pod)).To(Succeed())
			Eventually(func() string { return fileContent(filepath.Join(state, "terminated")) }).Should(Equal("yes"))
			Eventually(gone(pod)).Should(BeTrue())
		})
	}

	It("stops the Pod of a Job deleted in the background: SIGTERM, then the Pod goes", func() {
		ns := newNamespace()
		job := waitingJob(ns, "background", "")
		pod, state := startedWaiting(job)
		Expect(k8s.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(func() string { return fileContent(filepath.Join(state, "terminated")) }).Should(Equal("yes"))
		Eventually(gone(pod)).Should(BeTrue())
		Eventually(gone(job)).Should(BeTrue())
		run := runOf(pod)
		Expect(run.Reason).To(Equal("Terminated"))
		Expect(run.ExitCode).To(Equal(int32(143)))
	})

	It("stops the Pod of a Job deleted in the foreground, and lets the Job go only after the Pod", func() {
		ns := newNamespace()
		release := filepath.Join(GinkgoT().TempDir(), "release")
		job := waitingJob(ns, "foreground", release)
		pod, state := startedWaiting(job)
		Expect(k8s.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
		Eventually(func() string { return fileContent(filepath.Join(state, "terminated")) }).Should(Equal("yes"))
		Consistently(func(g Gomega) {
			live := &batchv1.Job{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), live)).To(Succeed())
			g.Expect(controllerutil.ContainsFinalizer(live, metav1.FinalizerDeleteDependents)).To(BeTrue())
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})).To(Succeed())
		}, 2*time.Second).Should(Succeed(), "the Job waits for its Pod, which waits for its container")
		Expect(os.WriteFile(release, nil, 0o600)).To(Succeed())
		Eventually(gone(pod)).Should(BeTrue())
		Eventually(gone(job)).Should(BeTrue())
		Expect(runOf(pod).Reason).To(Equal("Terminated"))
	})
})

func runOf(pod *corev1.Pod) Run {
	GinkgoHelper()
	var run *Run
	Eventually(func() *Run {
		for _, r := range ex.Runs() {
			if r.Pod == pod.Name && r.Namespace == pod.Namespace {
				run = &r
			}
		}
		return run
	}).ShouldNot(BeNil())
	return *run
}

// nodeState is the node's Ready condition status and whether it carries taint key.
func nodeState(g Gomega, taint string) (corev1.ConditionStatus, bool) {
	n := &corev1.Node{}
	g.Expect(k8s.Get(ctx, types.NamespacedName{Name: ex.NodeName()}, n)).To(Succeed())
	var ready corev1.ConditionStatus
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status
		}
	}
	tainted := false
	for _, t := range n.Spec.Taints {
		if t.Key == taint {
			tainted = true
		}
	}
	return ready, tainted
}

var _ = Describe("the node and the real node lifecycle controller", func() {
	It("registers a Ready node with a fresh Lease; a node whose heartbeat stops is marked unreachable and tainted, and is Ready again once it beats", func() {
		const unreachable = "node.kubernetes.io/unreachable"
		Eventually(func(g Gomega) {
			ready, tainted := nodeState(g, unreachable)
			g.Expect(ready).To(Equal(corev1.ConditionTrue))
			g.Expect(tainted).To(BeFalse())
			l := &coordinationv1.Lease{}
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: NodeLeaseNamespace, Name: ex.NodeName()}, l)).To(Succeed())
			g.Expect(l.Spec.RenewTime).NotTo(BeNil())
			g.Expect(time.Since(l.Spec.RenewTime.Time)).To(BeNumerically("<", nodeMonitorGrace))
		}).Should(Succeed())

		By("the heartbeat stops, as a node that lost its network")
		ex.PauseHeartbeat(true)
		DeferCleanup(ex.PauseHeartbeat, false)
		Eventually(func(g Gomega) {
			ready, tainted := nodeState(g, unreachable)
			g.Expect(ready).To(Equal(corev1.ConditionUnknown))
			g.Expect(tainted).To(BeTrue())
		}, 2*time.Minute).Should(Succeed())

		By("it beats again")
		ex.PauseHeartbeat(false)
		Eventually(func(g Gomega) {
			ready, tainted := nodeState(g, unreachable)
			g.Expect(ready).To(Equal(corev1.ConditionTrue))
			g.Expect(tainted).To(BeFalse())
		}, 2*time.Minute).Should(Succeed())
	})
})
