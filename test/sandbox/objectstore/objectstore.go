package objectstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/captf/cluster-api-provider-terraform/controllers/replica"
	"github.com/captf/cluster-api-provider-terraform/test/sandbox/internal/proc"
)

// Options say how to start the store.
type Options struct {
	// Binary is the versitygw binary (required).
	Binary string
	// Dir holds the objects (Dir/objects) and their metadata (Dir/meta); required. Give the same
	// folder again to find what an earlier server kept.
	Dir string
	// AccessKey and SecretKey are the root credentials; empty: random ones.
	AccessKey, SecretKey string
	// Out receives the server's output (default: discarded).
	Out io.Writer
	// StartTimeout bounds the wait for its health endpoint (default 30s).
	StartTimeout time.Duration
	// Port is the loopback port to listen on; 0 picks a free one. A store started again on the
	// port and folder of one that stopped is, to its clients, the same store back.
	Port int
}

// Server is a running store.
type Server struct {
	// Endpoint is its URL (http://127.0.0.1:<port>).
	Endpoint string
	// AccessKey and SecretKey are its root credentials.
	AccessKey, SecretKey string

	cmd    *exec.Cmd
	exited chan struct{}
	once   sync.Once
}

const region = "us-east-1"

// Start starts the store on a free loopback port and waits until it answers.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Binary == "" || o.Dir == "" {
		return nil, errors.New("the object store needs its binary and a folder")
	}
	if o.AccessKey == "" {
		o.AccessKey = "captf" + randomHex(8)
	}
	if o.SecretKey == "" {
		o.SecretKey = randomHex(20)
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 30 * time.Second
	}
	objects, meta := filepath.Join(o.Dir, "objects"), filepath.Join(o.Dir, "meta")
	for _, d := range []string{objects, meta} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("make %s: %w", d, err)
		}
	}
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		port := o.Port
		if port == 0 {
			var err error
			if port, err = proc.FreePort(); err != nil {
				return nil, err
			}
		}
		s := &Server{Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), AccessKey: o.AccessKey, SecretKey: o.SecretKey, exited: make(chan struct{})}
		s.cmd = exec.Command(o.Binary, "--access", o.AccessKey, "--secret", o.SecretKey, "--region", region,
			"--port", "127.0.0.1:"+strconv.Itoa(port), "--health", "/health", "--quiet",
			"posix", "--sidecar", meta, objects)
		s.cmd.Stdout, s.cmd.Stderr = o.Out, o.Out
		s.cmd.SysProcAttr = proc.SessionAttrs()
		if err := proc.Start(s.cmd); err != nil {
			return nil, fmt.Errorf("start %s: %w", o.Binary, err)
		}
		go func() { _ = s.cmd.Wait(); close(s.exited) }()
		if last = s.waitHealthy(ctx, o.StartTimeout); last == nil {
			return s, nil
		}
		_ = s.Stop()
		if o.Port != 0 {
			break // the port was asked for: another one would be another store
		}
	}
	return nil, fmt.Errorf("the object store did not start: %w", last)
}

// waitHealthy polls the health endpoint until it answers 200, the process exits or the
// timeout passes.
func (s *Server) waitHealthy(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/health", nil)
		if err != nil {
			return fmt.Errorf("health request: %w", err)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.exited:
			return errors.New("the server exited before it answered (its port may have been taken)")
		case <-ctx.Done():
			return fmt.Errorf("no answer from %s/health: %w", s.Endpoint, ctx.Err())
		case <-tick.C:
		}
	}
}

// Port is the loopback port the server listens on.
func (s *Server) Port() int {
	p, _ := strconv.Atoi(s.Endpoint[strings.LastIndex(s.Endpoint, ":")+1:])
	return p
}

// Client returns an S3 client of the root account.
func (s *Server) Client() *s3.Client {
	cfg := aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, "")}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(s.Endpoint)
		o.UsePathStyle = true
	})
}

// CreateBucket creates a bucket; one that exists already is fine.
func (s *Server) CreateBucket(ctx context.Context, name string) error {
	_, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
	if err == nil {
		return nil
	}
	var owned interface{ ErrorCode() string }
	if errors.As(err, &owned) && (owned.ErrorCode() == "BucketAlreadyOwnedByYou" || owned.ErrorCode() == "BucketAlreadyExists") {
		return nil
	}
	return fmt.Errorf("create bucket %s: %w", name, err)
}

// ReplicaOptions are the options the replica opens bucket with, as the root account.
func (s *Server) ReplicaOptions(bucket string) replica.S3Options {
	return replica.S3Options{Endpoint: s.Endpoint, Region: region, Bucket: bucket, AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey, PathStyle: true}
}

// Stop ends the server and waits for it; it may be called again.
func (s *Server) Stop() error {
	s.once.Do(func() {
		if s.cmd.Process != nil {
			_ = s.cmd.Process.Kill()
		}
	})
	select {
	case <-s.exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("the object store (pid %d) did not exit", s.cmd.Process.Pid)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
