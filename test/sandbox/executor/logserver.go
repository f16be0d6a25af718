package executor

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// logServer is the node's kubelet endpoint: GET /containerLogs/{namespace}/{pod}/{container}
// over HTTPS, for the API server's kubelet client only (a client certificate the kubelet CA
// signed, for KubeletClientUser), with the kubelet's query parameters.
type logServer struct {
	e      *Executor
	ln     net.Listener
	srv    *http.Server
	caPool *x509.CertPool
	// base is every request's context: cancelling it ends the followers.
	base   context.Context
	cancel context.CancelFunc
}

// newLogServer listens on an ephemeral port of 127.0.0.1 with the node's serving certificate.
func newLogServer(e *Executor, pki *KubeletPKI) (*logServer, error) {
	cert, err := tls.LoadX509KeyPair(pki.ServingCertFile, pki.ServingKeyFile)
	if err != nil {
		return nil, fmt.Errorf("kubelet endpoint: load serving certificate: %w", err)
	}
	caPEM, err := os.ReadFile(pki.CAFile)
	if err != nil {
		return nil, fmt.Errorf("kubelet endpoint: read ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("kubelet endpoint: no certificate in the ca file")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("kubelet endpoint: listen: %w", err)
	}
	s := &logServer{e: e, ln: ln, caPool: pool}
	s.base, s.cancel = context.WithCancel(context.Background())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.containerLogs)
	// As a kubelet's: the server asks for a client certificate and the handler judges it, so a
	// request without one gets a 401 rather than a failed handshake.
	s.srv = &http.Server{
		Handler:           s.authenticated(mux),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return s.base },
	}
	return s, nil
}

func (s *logServer) port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// serve answers until stop; it returns nil once stopped.
func (s *logServer) serve(ctx context.Context) error {
	s.base = log.IntoContext(s.base, log.FromContext(ctx).WithName("kubelet-endpoint"))
	if err := s.srv.ServeTLS(s.ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("kubelet endpoint: %w", err)
	}
	return nil
}

// stop ends the followers and closes every connection.
func (s *logServer) stop() {
	s.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	_ = s.ln.Close()
}

// authenticated lets through only the API server's kubelet client: 401 without a client
// certificate the kubelet CA signed for client authentication, 403 for another user.
func (s *logServer) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		inter := x509.NewCertPool()
		for _, c := range r.TLS.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		leaf := r.TLS.PeerCertificates[0]
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: s.caPool, Intermediates: inter,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		if leaf.Subject.CommonName != KubeletClientUser {
			http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=get, resource=nodes, subresource=proxy)", leaf.Subject.CommonName), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// logQuery is what a request asks of a container log (the kubelet's PodLogOptions).
type logQuery struct {
	follow, previous, timestamps bool
	since                        time.Time
	tailLines                    int64 // -1: all
	limitBytes                   int64
}

func parseLogQuery(r *http.Request) (logQuery, error) {
	q := r.URL.Query()
	o := logQuery{tailLines: -1, limitBytes: math.MaxInt64}
	boolean := func(name string, into *bool) error {
		if v := q.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			*into = b
		}
		return nil
	}
	positive := func(name string, into *int64, min int64) error {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < min {
				return fmt.Errorf("%s: must be an integer of at least %d", name, min)
			}
			*into = n
		}
		return nil
	}
	var sinceSeconds int64
	tailLines := q.Get("tailLines")
	if t := q.Get("tail"); t != "" && tailLines == "" && t != "all" {
		tailLines = t // the kubelet's older name
	}
	if tailLines != "" {
		q.Set("tailLines", tailLines)
	}
	for _, err := range []error{
		boolean("follow", &o.follow), boolean("previous", &o.previous), boolean("timestamps", &o.timestamps),
		positive("tailLines", &o.tailLines, 0), positive("limitBytes", &o.limitBytes, 1), positive("sinceSeconds", &sinceSeconds, 1),
	} {
		if err != nil {
			return o, err
		}
	}
	if sinceSeconds > 0 {
		o.since = time.Now().Add(-time.Duration(sinceSeconds) * time.Second)
	}
	if v := q.Get("sinceTime"); v != "" {
		if sinceSeconds > 0 {
			return o, errors.New("at most one of sinceSeconds or sinceTime may be specified")
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return o, fmt.Errorf("sinceTime: %w", err)
		}
		o.since = t
	}
	switch v := q.Get("stream"); v {
	case "", "All":
	case "Stdout", "Stderr":
		return o, fmt.Errorf("stream %s: the sandbox node keeps a container's stdout and stderr as one stream", v)
	default:
		return o, fmt.Errorf("invalid stream type %q", v)
	}
	return o, nil
}

// containerLogs answers GET /containerLogs/{namespace}/{pod}/{container} as a kubelet: 404 for
// a pod or container it does not know, 400 for a container that has not run (or no previous
// run), else the log, followed until the run ends when asked.
func (s *logServer) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, podName, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts, err := parseLogQuery(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.e.mu.Lock()
	wk := s.e.workers[podKey(types.NamespacedName{Namespace: ns, Name: podName})]
	s.e.mu.Unlock()
	if wk == nil {
		http.Error(w, fmt.Sprintf("pod %q does not exist", podName), http.StatusNotFound)
		return
	}
	if !wk.hasContainer(container) {
		http.Error(w, fmt.Sprintf("container %q not found in pod %q", container, podName), http.StatusNotFound)
		return
	}
	var run *logRun
	if cl := wk.containerLog(container, false); cl != nil {
		run = cl.run(opts.previous)
	}
	if run == nil {
		if opts.previous {
			http.Error(w, fmt.Sprintf("previous terminated container %q in pod %q not found", container, podName), http.StatusBadRequest)
		} else {
			http.Error(w, fmt.Sprintf("container %q in pod %q is waiting to start: ContainerCreating", container, podName), http.StatusBadRequest)
		}
		return
	}
	f, err := os.Open(run.path)
	if err != nil {
		http.Error(w, fmt.Sprintf("open the log of container %q: %v", container, err), http.StatusInternalServerError)
		return
	}
	defer func() { _ = f.Close() }()
	logger := log.FromContext(r.Context()).WithValues("pod", ns+"/"+podName, "container", container)
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	if err := streamLog(r.Context(), w, run, &logReader{f: f}, opts); err != nil && !errors.Is(err, errLimitReached) {
		logger.V(1).Info("log stream ended early", "error", err.Error())
	}
}

// streamLog writes a run's log: the lines in the file now (the last tailLines of them), then,
// when following, each entry as it is written, until the run ended (or ctx did).
func streamLog(ctx context.Context, w http.ResponseWriter, run *logRun, lr *logReader, opts logQuery) error {
	out := &logOutput{w: w, since: opts.since, timestamps: opts.timestamps, remain: opts.limitBytes, atLineStart: true}
	flush := func() {
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
	}
	// Whether the run had ended is looked at before the file is read: an ended run's file is
	// complete, so reading it to its end reads everything.
	ended, changed := run.state()
	entries, err := lr.next()
	if err != nil {
		return err
	}
	if err := out.write(tail(entries, opts.tailLines)); err != nil {
		return err
	}
	flush()
	for opts.follow && !ended {
		select {
		case <-changed:
		case <-ctx.Done():
			return nil
		}
		ended, changed = run.state()
		entries, err := lr.next()
		if err != nil {
			return err
		}
		if err := out.write(entries); err != nil {
			return err
		}
		flush()
	}
	return nil
}

// hasContainer reports whether the Pod's spec has a container (init or main) of this name.
func (w *worker) hasContainer(name string) bool {
	has := func(c corev1.Container) bool { return c.Name == name }
	return slices.ContainsFunc(w.spec.Spec.InitContainers, has) || slices.ContainsFunc(w.spec.Spec.Containers, has)
}

// containerLog is the log of the container name, created when create is set (nil otherwise
// until the container first ran).
func (w *worker) containerLog(name string, create bool) *containerLog {
	w.logsMu.Lock()
	defer w.logsMu.Unlock()
	cl := w.logs[name]
	if cl == nil && create {
		cl = &containerLog{dir: w.logDir(name)}
		w.logs[name] = cl
	}
	return cl
}

// logDir holds the log files of a container's runs.
func (w *worker) logDir(container string) string {
	return filepath.Join(w.dir, "logs", container)
}

// logServerRunnable serves the kubelet endpoint while the manager runs; the executor's shutdown
// closes it once the containers ended, so followers see their logs to the end.
func (e *Executor) logServerRunnable(ctx context.Context) error {
	if e.logs == nil {
		return nil
	}
	log.FromContext(ctx).V(1).Info("serving container logs", "port", e.logs.port())
	return e.logs.serve(ctx)
}

// stopLogServer closes the kubelet endpoint (nothing when the node serves none).
func (e *Executor) stopLogServer(logger logr.Logger) {
	if e.logs == nil {
		return
	}
	e.logs.stop()
	logger.V(1).Info("kubelet endpoint closed")
}
