package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/test/objects"
)

// T26 after the Job's create, as the tenant on the sandbox: every path by which a Secret of the
// namespace reaches module code (spec.job.env, a pod-template Secret volume, the CLI
// configuration's registry credential, variablesFrom) names an opted-in Secret; once the Job
// runs, the tenant swaps each for a ServiceAccount token Secret of the same name. The pod names
// only the per-run copies the manager wrote from what it judged, so the swap reaches nothing;
// the next Job is held before it is created.
var _ = Describe("A tenant swapping Secrets under a running Job", func() {
	It("swaps every opted-in Secret for a ServiceAccount token once the Job runs: the pod reads only the judged copies, and the next Job is held", func() {
		sb := shared
		t := asTenant(sb, "tenant-secret-swap")
		ns, name := t.Namespace, "swap"
		sources := map[string]map[string]string{
			"env-src":  {"token": "env-judged"},
			"vol-src":  {"file": "vol-judged"},
			"cli-src":  {"cred": "cli-judged"},
			"vars-src": {"generation": "1"},
		}
		for n, data := range sources {
			Expect(t.Client().Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n,
				Labels: map[string]string{infrav1.VariablesLabel: "true"}}, StringData: data})).To(Succeed())
		}

		By("an object that names all four, with an apply long enough to act while it runs")
		raw, err := os.ReadFile(filepath.Join("testdata", "cluster.yaml"))
		Expect(err).NotTo(HaveOccurred())
		doc := strings.ReplaceAll(string(raw), "CLUSTER", name)
		doc = strings.Replace(doc, "  variables:\n    sleep_seconds: SLEEP\n    generation: 1", `  job:
    env:
    - name: CLOUD_TOKEN
      valueFrom:
        secretKeyRef: {name: env-src, key: token}
    cliConfig:
      credentials:
      - host: registry.example.com
        secretKeyRef: {name: cli-src, key: cred}
    podTemplate:
      volumes:
      - name: files
        mountPath: /etc/tenant-files
        secret: {name: vol-src}
  variablesFrom:
  - secretRef: {name: vars-src}
  variables:
    sleep_seconds: 20`, 1)
		Expect(doc).To(ContainSubstring("vars-src"), "the fixture's variables block changed")
		f := filepath.Join(GinkgoT().TempDir(), "swap.yaml")
		Expect(os.WriteFile(f, []byte(doc), 0o600)).To(Succeed())
		kubectl(sb, "apply", "-n", ns, "-f", f)
		job := eventuallyRunning(sb, infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)

		By("the tenant swaps each Secret for a labelled ServiceAccount token Secret of the same name")
		for n := range sources {
			Expect(t.Client().Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}})).To(Succeed())
			createTokenSecret(sb, t.Client(), ns, n, "default", map[string]string{infrav1.VariablesLabel: "true"},
				map[string]string{"token": "swapped", "file": "swapped", "cred": "swapped", "generation": "swapped"})
		}

		By("the pod names no Secret of the tenant: only copies owned by the Job, which hold what was judged")
		live := &batchv1.Job{}
		Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(job), live)).To(Succeed())
		named := podSecretNames(live.Spec.Template.Spec)
		Expect(named).NotTo(BeEmpty())
		for _, n := range named {
			Expect(sources).NotTo(HaveKey(n), "the pod names the tenant's Secret %s", n)
			s := &corev1.Secret{}
			Expect(sb.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, s)).To(Succeed())
			ref := metav1.GetControllerOf(s)
			Expect(ref).NotTo(BeNil(), "Secret %s the pod names is owned by nothing", n)
			Expect(ref.UID).To(Equal(live.UID), "Secret %s the pod names is not the Job's", n)
		}
		var owned corev1.SecretList
		Expect(sb.Client().List(ctx, &owned, client.InNamespace(ns))).To(Succeed())
		var held []string
		for _, s := range owned.Items {
			if ref := metav1.GetControllerOf(&s); ref == nil || ref.UID != live.UID {
				continue
			}
			for _, v := range s.Data {
				held = append(held, string(v))
			}
		}
		all := strings.Join(held, "\n")
		for _, judged := range []string{"env-judged", "vol-judged", "cli-judged"} {
			Expect(all).To(ContainSubstring(judged), "no copy holds the judged value")
		}
		Expect(all).NotTo(ContainSubstring("swapped"))

		By("the Job runs on to success with the copies")
		Expect(eventuallyFinished(sb, job).Status.Succeeded).To(Equal(int32(1)))

		By("the next Job is held before it is created: the Secrets are ServiceAccount tokens now")
		o := tc(ns, name)
		applies := len(jobsOf(sb, infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply))
		kubectl(sb, "patch", "-n", ns, "terraformcluster", name, "--type=merge", "-p", `{"spec":{"variables":{"sleep_seconds":1}}}`)
		Eventually(func(g Gomega) {
			g.Expect(sb.Client().Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			c := meta.FindStatusCondition(o.Status.Conditions, infrav1.InputsValidCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring("ServiceAccount token"))
			g.Expect(c.Message).NotTo(ContainSubstring("swapped"))
		}).Should(Succeed())
		Expect(jobsOf(sb, infrav1.TerraformClusterKind, ns, name, infrav1.OperationApply)).To(HaveLen(applies), "no Job was created")
	})
})

// T26 before the Job's create, as the CAPTF editor on the sandbox: each path, with a Secret that
// did not opt in and with a ServiceAccount token Secret that did, is refused at admission, naming
// the Secret and never its value.
var _ = Describe("A CAPTF editor naming Secrets on every path", func() {
	It("is refused an unlabelled Secret and a ServiceAccount token Secret on each path by which a Secret reaches module code", func() {
		e := asCAPTFEditor(shared, "tenant-secret-paths")
		ns := e.Namespace
		Expect(shared.Client().Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"},
			StringData: map[string]string{"k": "value-plain"}})).To(Succeed())
		createTokenSecret(shared, shared.Client(), ns, "token", "default", map[string]string{infrav1.VariablesLabel: "true"},
			map[string]string{"k": "value-token"})
		paths := map[string]func(*infrav1.TerraformSpec, string){
			"spec.job.env": func(sp *infrav1.TerraformSpec, n string) {
				sp.Job.Env = []corev1.EnvVar{{Name: "CLOUD_TOKEN", ValueFrom: &corev1.EnvVarSource{
					SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: n}, Key: "k"}}}}
			},
			"a pod-template Secret volume": func(sp *infrav1.TerraformSpec, n string) {
				sp.Job.PodTemplate = &infrav1.RunnerPodTemplate{Volumes: []infrav1.RunnerVolume{{Name: "files", MountPath: "/etc/files",
					Secret: &infrav1.RunnerVolumeSource{Name: n}}}}
			},
			"the CLI configuration file": func(sp *infrav1.TerraformSpec, n string) {
				sp.Job.CLIConfig = &infrav1.CLIConfig{SecretRef: &infrav1.CLIConfigKeyRef{Name: n, Key: "k"}}
			},
			"a registry credential": func(sp *infrav1.TerraformSpec, n string) {
				sp.Job.CLIConfig = &infrav1.CLIConfig{Credentials: []infrav1.RegistryCredential{{Host: "registry.example.com",
					SecretKeyRef: infrav1.CLIConfigKeyRef{Name: n, Key: "k"}}}}
			},
			"variablesFrom": func(sp *infrav1.TerraformSpec, n string) {
				sp.VariablesFrom = []infrav1.VariablesSource{{SecretRef: &infrav1.LocalObjectReference{Name: n}}}
			},
		}
		i := 0
		for path, set := range paths {
			for secret, want := range map[string]string{"plain": infrav1.VariablesLabel, "token": "ServiceAccount token"} {
				i++
				m := objects.Machine(ns, fmt.Sprintf("m%d", i)).NoCluster().Paused().Spec(configMapModule("module")).
					Spec(func(s *infrav1.TerraformSpec) { set(s, secret) }).Obj()
				err := e.Client().Create(ctx, m)
				Expect(err).To(HaveOccurred(), "%s naming Secret %s was admitted", path, secret)
				Expect(err.Error()).To(And(ContainSubstring(secret), ContainSubstring(want), Not(ContainSubstring("value-"+secret))), "%s, Secret %s", path, secret)
			}
		}
	})
})

// podSecretNames lists the Secrets a pod spec names: env and envFrom references, and Secret and
// projected Secret volumes.
func podSecretNames(spec corev1.PodSpec) []string {
	var out []string
	add := func(n string) {
		if n != "" && !strings.Contains(strings.Join(out, "\n"), n) {
			out = append(out, n)
		}
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					add(e.ValueFrom.SecretKeyRef.Name)
				}
			}
			for _, e := range c.EnvFrom {
				if e.SecretRef != nil {
					add(e.SecretRef.Name)
				}
			}
		}
	}
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			add(v.Secret.SecretName)
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					add(s.Secret.Name)
				}
			}
		}
	}
	return out
}
