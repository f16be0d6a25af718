//go:build linux

package executor

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/runnerapi"
)

// talkingJob runs a main container that writes "first line" and "to stderr", waits for the file
// /captf/state/go, then writes "second line" and a line of talkLong x's.
func talkingJob(ns, name string) *batchv1.Job {
	c := terraformContainer("talk", "--release=/captf/state/go")
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

// podLog reads a container's log through the API server's pods/log, as kubectl logs does.
func podLog(pod *corev1.Pod, opts *corev1.PodLogOptions) (string, error) {
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return "", err
	}
	rc, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, opts).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = rc.Close() }()
	b, err := io.ReadAll(rc)
	return string(b), err
}

// follow streams a container's log through the API server with follow=true: each line read
// arrives on lines; lines is closed when the stream ends.
func follow(pod *corev1.Pod, container string) <-chan string {
	GinkgoHelper()
	cs, err := kubernetes.NewForConfig(env.Config)
	Expect(err).NotTo(HaveOccurred())
	rc, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container, Follow: true}).Stream(ctx)
	Expect(err).NotTo(HaveOccurred())
	lines := make(chan string, 100)
	go func() {
		defer GinkgoRecover()
		defer close(lines)
		defer func() { _ = rc.Close() }()
		br := bufio.NewReaderSize(rc, 64*1024)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				lines <- strings.TrimSuffix(line, "\n")
			}
			if err != nil {
				return
			}
		}
	}()
	return lines
}

var longLine = strings.Repeat("x", talkLong)

var _ = Describe("the node's kubelet endpoint: container logs through the API server", func() {
	It("advertises its endpoint on the Node, and follows a running container's log line by line until the container ends", func() {
		Eventually(func(g Gomega) {
			node := &corev1.Node{}
			g.Expect(k8s.Get(ctx, types.NamespacedName{Name: ex.NodeName()}, node)).To(Succeed())
			g.Expect(node.Status.DaemonEndpoints.KubeletEndpoint.Port).To(BeEquivalentTo(ex.logs.port()))
			g.Expect(node.Status.Addresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}))
		}).Should(Succeed(), "the node registered with its kubelet endpoint")

		ns := newNamespace()
		job := talkingJob(ns, "talk")
		Expect(k8s.Create(ctx, job)).To(Succeed())
		pod := eventuallyRunningPod(job)
		state := volumeFolder(pod, "state")
		lines := follow(pod, "terraform")

		By("the lines written so far arrive while the container waits, and the stream stays open")
		Eventually(lines).Should(Receive(Equal("first line")))
		Eventually(lines).Should(Receive(Equal("to stderr")), "stderr shares the log, in order")
		Consistently(lines, 500*time.Millisecond).ShouldNot(Receive(), "nothing more while the container waits")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))

		By("the lines written after the follower joined arrive, then the stream ends with the container")
		Expect(os.WriteFile(filepath.Join(state, "go"), nil, 0o600)).To(Succeed())
		Eventually(lines).Should(Receive(Equal("second line")))
		Eventually(lines).Should(Receive(Equal(longLine)), "a line longer than one log entry arrives whole")
		Eventually(lines).Should(BeClosed())
		Expect(eventuallyFinished(job)).To(Equal(batchv1.JobComplete))

		By("the log of the ended container is whole, for kubectl logs without --follow")
		whole, err := podLog(pod, &corev1.PodLogOptions{Container: "terraform"})
		Expect(err).NotTo(HaveOccurred())
		Expect(whole).To(Equal("first line\nto stderr\nsecond line\n" + longLine + "\n"))

		By("tailLines, limitBytes and timestamps as a kubelet answers them")
		last, err := podLog(pod, &corev1.PodLogOptions{Container: "terraform", TailLines: ptr.To[int64](2)})
		Expect(err).NotTo(HaveOccurred())
		Expect(last).To(Equal("second line\n" + longLine + "\n"))
		limited, err := podLog(pod, &corev1.PodLogOptions{Container: "terraform", LimitBytes: ptr.To[int64](8)})
		Expect(err).NotTo(HaveOccurred())
		Expect(limited).To(Equal("first li"))
		stamped, err := podLog(pod, &corev1.PodLogOptions{Container: "terraform", Timestamps: true})
		Expect(err).NotTo(HaveOccurred())
		stampedLines := strings.Split(strings.TrimSuffix(stamped, "\n"), "\n")
		Expect(stampedLines).To(HaveLen(4), "one timestamp a line, the long line's pieces included")
		stamp := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z `)
		for i, want := range []string{"first line", "to stderr", "second line", longLine} {
			Expect(stamp.MatchString(stampedLines[i])).To(BeTrue(), "RFC3339Nano, fixed width, and a space: %.60s", stampedLines[i])
			Expect(stamp.ReplaceAllString(stampedLines[i], "")).To(Equal(want))
		}

		By("the init container has its own log; a container without a previous run has no previous log")
		install, err := podLog(pod, &corev1.PodLogOptions{Container: "install-runner"})
		Expect(err).NotTo(HaveOccurred())
		Expect(install).To(BeEmpty())
		_, err = podLog(pod, &corev1.PodLogOptions{Container: "terraform", Previous: true})
		Expect(err).To(MatchError(ContainSubstring(`previous terminated container "terraform" in pod "` + pod.Name + `" not found`)))
	})

	It("keeps a restarted sidecar's previous run for previous=true", func() {
		ns := newNamespace()
		job := newJob(ns, "crashlog", channelPodSpec(channelSidecar("--crash-once")))
		Expect(k8s.Create(ctx, job)).To(Succeed())
		Expect(eventuallyFinished(job)).To(Equal(batchv1.JobComplete))
		pod := podOf(job)
		Expect(initStatus(pod, "state-channel").RestartCount).To(Equal(int32(1)))
		previous, err := podLog(pod, &corev1.PodLogOptions{Container: "state-channel", Previous: true})
		Expect(err).NotTo(HaveOccurred())
		Expect(previous).To(Equal("sidecar: first run, exiting 3\n"))
		current, err := podLog(pod, &corev1.PodLogOptions{Container: "state-channel"})
		Expect(err).NotTo(HaveOccurred())
		Expect(current).To(HavePrefix("sidecar: serving on "))
		Expect(current).To(HaveSuffix("sidecar: SIGTERM, stopping\n"))
	})

	It("serves the API server's kubelet client only: 401 without a certificate of the kubelet CA, 403 for another user", func() {
		ns := newNamespace()
		job := talkingJob(ns, "refused")
		Expect(k8s.Create(ctx, job)).To(Succeed())
		pod := eventuallyRunningPod(job)
		Expect(os.WriteFile(filepath.Join(volumeFolder(pod, "state"), "go"), nil, 0o600)).To(Succeed())
		Expect(eventuallyFinished(job)).To(Equal(batchv1.JobComplete))
		url := fmt.Sprintf("https://127.0.0.1:%d/containerLogs/%s/%s/terraform", ex.logs.port(), ns, pod.Name)
		caPEM, err := os.ReadFile(pki.CAFile)
		Expect(err).NotTo(HaveOccurred())
		roots := x509.NewCertPool()
		Expect(roots.AppendCertsFromPEM(caPEM)).To(BeTrue())
		get := func(url string, certs ...tls.Certificate) (int, string) {
			GinkgoHelper()
			c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12}}}
			resp, err := c.Get(url)
			Expect(err).NotTo(HaveOccurred(), "the node's serving certificate is the kubelet CA's, for 127.0.0.1")
			defer func() { _ = resp.Body.Close() }()
			b, err := io.ReadAll(resp.Body)
			Expect(err).NotTo(HaveOccurred())
			return resp.StatusCode, string(b)
		}
		pair := func(certPEM, keyPEM []byte) tls.Certificate {
			GinkgoHelper()
			c, err := tls.X509KeyPair(certPEM, keyPEM)
			Expect(err).NotTo(HaveOccurred())
			return c
		}

		code, _ := get(url)
		Expect(code).To(Equal(http.StatusUnauthorized), "no client certificate")
		other, err := NewKubeletPKI(GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		foreign, err := tls.LoadX509KeyPair(other.ClientCertFile, other.ClientKeyFile)
		Expect(err).NotTo(HaveOccurred())
		code, _ = get(url, foreign)
		Expect(code).To(Equal(http.StatusUnauthorized), "the API server's name, signed by another CA")
		someone, err := pki.ca.IssueClient("someone", nil, 0)
		Expect(err).NotTo(HaveOccurred())
		code, body := get(url, pair(someone.CertPEM, someone.KeyPEM))
		Expect(code).To(Equal(http.StatusForbidden), "signed by the kubelet CA, for another user")
		Expect(body).To(ContainSubstring("user=someone"))
		serving, err := tls.LoadX509KeyPair(pki.ServingCertFile, pki.ServingKeyFile)
		Expect(err).NotTo(HaveOccurred())
		code, _ = get(url, serving)
		Expect(code).To(Equal(http.StatusUnauthorized), "a serving certificate is no client certificate")

		apiserver, err := tls.LoadX509KeyPair(pki.ClientCertFile, pki.ClientKeyFile)
		Expect(err).NotTo(HaveOccurred())
		code, body = get(url, apiserver)
		Expect(code).To(Equal(http.StatusOK))
		Expect(body).To(HavePrefix("first line\n"))
		code, body = get(strings.Replace(url, pod.Name, "nobody", 1), apiserver)
		Expect(code).To(Equal(http.StatusNotFound))
		Expect(body).To(ContainSubstring(`pod "nobody" does not exist`))
		code, body = get(strings.TrimSuffix(url, "terraform")+"nothing", apiserver)
		Expect(code).To(Equal(http.StatusNotFound))
		Expect(body).To(ContainSubstring(`container "nothing" not found`))
	})
})

// A run's log read while it is written and after: the kubelet's options on the entries.
func TestStreamLogOptions(t *testing.T) {
	dir := t.TempDir()
	cl := &containerLog{dir: dir}
	run, err := cl.newRun()
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	for i, e := range []struct {
		content string
		full    bool
	}{{"one", true}, {"tw", false}, {"o", true}, {"three", true}} {
		if err := run.write(base.Add(time.Duration(i)*time.Second), []byte(e.content), e.full); err != nil {
			t.Fatal(err)
		}
	}
	read := func(o logQuery) string {
		t.Helper()
		f, err := os.Open(run.path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		rec := &recorder{}
		if err := streamLog(t.Context(), rec, run, &logReader{f: f}, o); err != nil && err != errLimitReached {
			t.Fatal(err)
		}
		return rec.String()
	}
	all := logQuery{tailLines: -1, limitBytes: 1 << 40}
	for _, tc := range []struct {
		name string
		edit func(*logQuery)
		want string
	}{
		{"everything", func(*logQuery) {}, "one\ntwo\nthree\n"},
		{"tail 2 counts a line of two pieces once", func(o *logQuery) { o.tailLines = 2 }, "two\nthree\n"},
		{"tail 0", func(o *logQuery) { o.tailLines = 0 }, ""},
		{"since skips older lines", func(o *logQuery) { o.since = base.Add(2 * time.Second) }, "o\nthree\n"},
		{"limit cuts inside a line", func(o *logQuery) { o.limitBytes = 6 }, "one\ntw"},
		{"timestamps once a line", func(o *logQuery) { o.timestamps, o.tailLines = true, 2 },
			"2026-01-02T03:04:06.000000600Z two\n2026-01-02T03:04:08.000000600Z three\n"},
	} {
		o := all
		tc.edit(&o)
		if got := read(o); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}

	// A follower of a run still written sees each new entry, and ends with the run.
	f, err := os.Open(run.path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		o := all
		o.follow, o.tailLines = true, 1
		err := streamLog(t.Context(), &pipeRecorder{w: pw}, run, &logReader{f: f}, o)
		_ = pw.Close()
		done <- err
	}()
	br := bufio.NewReader(pr)
	if got, err := br.ReadString('\n'); err != nil || got != "three\n" {
		t.Fatalf("follow with tail 1: got %q (%v), want the last line first", got, err)
	}
	for _, want := range []string{"four\n", "five\n"} {
		if err := run.write(time.Now(), []byte(strings.TrimSuffix(want, "\n")), true); err != nil {
			t.Fatal(err)
		}
		got, err := br.ReadString('\n')
		if err != nil || got != want {
			t.Fatalf("follow: got %q (%v), want %q", got, err, want)
		}
	}
	run.end()
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("follow after the end: %q, %v", rest, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// recorder is an http.ResponseWriter that keeps the body.
type recorder struct{ bytes.Buffer }

func (r *recorder) Header() http.Header { return http.Header{} }
func (r *recorder) WriteHeader(int)     {}

// pipeRecorder is an http.ResponseWriter that writes the body into a pipe.
type pipeRecorder struct{ w io.Writer }

func (r *pipeRecorder) Header() http.Header         { return http.Header{} }
func (r *pipeRecorder) WriteHeader(int)             {}
func (r *pipeRecorder) Write(b []byte) (int, error) { return r.w.Write(b) }
