package devenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/agentrewind/agentrewind/internal/syncbuf"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Server is a versitygw gateway over a temporary directory, listening on a loopback port.
type S3Server struct {
	// Endpoint is host:port, as minio-go takes it (plain HTTP).
	Endpoint  string
	AccessKey string
	SecretKey string
	// Dir is the directory holding the buckets; tests may corrupt objects in place through it.
	Dir string

	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has exited; waitErr is then set
	waitErr error
	logs    *syncbuf.Buffer
}

// LaunchS3Server starts versitygw over dir on a free loopback port, for the demo and the tests. logf receives the output of failed attempts. Call Stop when done.
func LaunchS3Server(dir string, logf func(format string, args ...any)) (*S3Server, error) {
	bin, err := binaryFromEnvOrBin("VERSITYGW", "versitygw-*", "s3-server")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s := &S3Server{AccessKey: "arw" + randomHex(8), SecretKey: randomHex(20), Dir: dir}
	// Listen-then-close races with other processes for the port; retry a few times if versitygw loses.
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freeLoopbackPort()
		if err != nil {
			return nil, err
		}
		s.Endpoint = fmt.Sprintf("127.0.0.1:%d", port)
		s.logs = &syncbuf.Buffer{}
		s.cmd = exec.Command(bin, "--port", s.Endpoint, "posix", s.Dir)
		s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
		s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
		if err := s.cmd.Start(); err != nil {
			return nil, fmt.Errorf("starting %s: %w", bin, err)
		}
		s.exited = make(chan struct{})
		go func() { s.waitErr = s.cmd.Wait(); close(s.exited) }()
		if err := s.waitReady(15 * time.Second); err != nil {
			_ = s.cmd.Process.Kill()
			<-s.exited
			logf("versitygw attempt %d on %s: %v\n%s", attempt+1, s.Endpoint, err, s.logs.String())
			continue
		}
		return s, nil
	}
	return nil, fmt.Errorf("versitygw did not start after 5 attempts; its last output:\n%s", s.logs.String())
}

// Stop kills the server and waits for it to exit.
func (s *S3Server) Stop() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// Client returns a minio-go client for the server, authenticated as its root user.
func (s *S3Server) Client() (*minio.Client, error) {
	return minio.New(s.Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Secure: false,
		Region: "us-east-1",
	})
}

func (s *S3Server) waitReady(timeout time.Duration) error {
	c, err := s.Client()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("versitygw exited: %v", s.waitErr)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = c.ListBuckets(ctx)
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("no S3 answer within %s: %v", timeout, err)
}

// FreeLoopbackPort returns a loopback port that was free a moment ago.
func FreeLoopbackPort() (int, error) { return freeLoopbackPort() }

func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Logs is what the server printed so far.
func (s *S3Server) Logs() string { return s.logs.String() }

// ObjectPath is where the posix backend keeps an object on disk.
func (s *S3Server) ObjectPath(bucket, key string) string {
	return filepath.Join(s.Dir, bucket, filepath.FromSlash(key))
}
