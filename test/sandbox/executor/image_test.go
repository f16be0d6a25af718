//go:build linux

package executor

import (
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/registry"
)

var _ = Describe("Image modules pulled from a registry", func() {
	var (
		reg *registry.Registry
		ns  string
		ref string
	)

	BeforeEach(func() {
		var err error
		reg, err = registry.Start(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(reg.Stop)
		ns = newNamespace()
		// Two layers: the module, then one that deletes a file of it (a whiteout) and hides
		// a folder's earlier content (an opaque folder).
		top, err := registry.Layer(
			registry.File{Path: "workspace/modules/net/.wh.old.tf"},
			registry.File{Path: "workspace/modules/net/scratch/.wh..wh..opq"},
			registry.File{Path: "workspace/modules/net/scratch/kept.txt", Data: []byte("upper")},
		)
		Expect(err).NotTo(HaveOccurred())
		img, err := registry.ModuleImage{WorkingDir: "/workspace", Program: "terraform", Files: map[string]string{
			"modules/net/main.tf":            `output "id" { value = "net" }`,
			"modules/net/old.tf":             "deleted by the upper layer",
			"modules/net/scratch/hidden.txt": "hidden by the opaque folder",
		}, Layers: []v1.Layer{top}}.Build()
		Expect(err).NotTo(HaveOccurred())
		ref, err = reg.Push(ctx, "modules/net", "v1", img)
		Expect(err).NotTo(HaveOccurred())
	})

	pullSecret := func(name string, config []byte) {
		GinkgoHelper()
		Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: config}})).To(Succeed())
	}
	imageJob := func(name string, secrets ...string) *batchv1.Job {
		GinkgoHelper()
		spec := channelPodSpec(channelSidecar())
		main := terraformContainer("run", "--"+runnerapi.FlagModuleDir+"=modules/net", "--result-file="+runnerapi.TerminationLog)
		main.Image = ref
		spec.Containers = []corev1.Container{main}
		for _, s := range secrets {
			spec.ImagePullSecrets = append(spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
		}
		job := newJob(ns, name, spec)
		Expect(k8s.Create(ctx, job)).To(Succeed())
		return job
	}
	// waiting is the main container's waiting state while the Pod is Pending.
	waiting := func(job *batchv1.Job) func(Gomega) *corev1.ContainerStateWaiting {
		return func(g Gomega) *corev1.ContainerStateWaiting {
			var pods corev1.PodList
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(1))
			p := pods.Items[0]
			g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			return p.Status.ContainerStatuses[0].State.Waiting
		}
	}

	It("pulls the image with the Pod's pull secret, unpacks its layers and runs the module from the image's working directory", func() {
		pullSecret("other-registry", registry.DockerConfigJSON("registry.example.com", "u", "p"))
		pullSecret("pull", reg.DockerConfigJSON())
		job := imageJob("pulled", "missing", "other-registry", "pull")
		Expect(eventuallyFinished(job)).To(Equal(batchv1.JobComplete))
		res := mainResult(podOf(job))
		Expect(res.Module).To(Equal(map[string]string{
			"main.tf":          `output "id" { value = "net" }`,
			"scratch/kept.txt": "upper",
		}), "the upper layer's whiteout and opaque folder apply")
		Expect(res.Cwd).To(HaveSuffix(filepath.Join("image", "rootfs", "workspace")), "the image's WorkingDir")
		Expect(res.Binary).To(Equal(hostTerraform), "the host program standing for the image's terraform")
	})

	It("leaves the Pod Pending with ErrImagePull and then ImagePullBackOff carrying the registry's reason, and runs it once the secret is fixed", func() {
		pullSecret("pull", registry.DockerConfigJSON(reg.Host(), reg.Username(), "wrong"))
		job := imageJob("wrong-secret", "pull")
		Eventually(waiting(job)).Should(And(
			HaveField("Reason", ReasonErrImagePull),
			HaveField("Message", And(ContainSubstring("UNAUTHORIZED"), ContainSubstring("wrong username or password"), ContainSubstring(ref)))))
		Eventually(waiting(job)).Should(And(
			HaveField("Reason", ReasonImagePullBackOff),
			HaveField("Message", And(HavePrefix("Back-off pulling image "), ContainSubstring("wrong username or password")))))
		pod := podOf(job)
		Expect(initStatus(pod, "state-channel").State.Running).NotTo(BeNil(), "the sidecar runs while the image is pulled")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
		Expect(jobCondition(job)).To(BeEmpty(), "the Job neither failed nor completed")
		Expect(job.Status.Ready).To(HaveValue(BeEquivalentTo(0)), "the Job controller counts no ready pod")

		fixed := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pull"}, fixed)).To(Succeed())
		fixed.Data[corev1.DockerConfigJsonKey] = reg.DockerConfigJSON()
		Expect(k8s.Update(ctx, fixed)).To(Succeed())
		Expect(eventuallyFinished(job)).To(Equal(batchv1.JobComplete), "the next pull uses the fixed secret")
		Expect(mainResult(podOf(job)).Module).To(HaveKey("main.tf"))
	})

	It("pulls anonymously without a pull secret, and the registry refuses", func() {
		job := imageJob("no-secret")
		Eventually(waiting(job)).Should(HaveField("Message", And(ContainSubstring("UNAUTHORIZED"), ContainSubstring("no credentials"))))
		Expect(reg.Refused()).To(BeNumerically(">", 0))
	})

	It("stops a Pod deleted while it waits for its image", func() {
		job := imageJob("deleted-waiting")
		Eventually(waiting(job)).Should(HaveField("Reason", Or(Equal(ReasonErrImagePull), Equal(ReasonImagePullBackOff))))
		pod := podOf(job)
		Expect(k8s.Delete(ctx, pod)).To(Succeed())
		Eventually(gone(pod)).Should(BeTrue())
		Expect(runOf(pod)).To(And(HaveField("Reason", "Deleted"), HaveField("ExitCode", BeEquivalentTo(-1))), "the main container never ran")
	})
})
