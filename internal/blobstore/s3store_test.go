package blobstore

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestS3ObjectStoreBasics runs the primitive operations against versitygw: put with size, get,
// stat, list in key order, delete, and ErrNotFound for what is missing.
func TestS3ObjectStoreBasics(t *testing.T) {
	env := startS3(t)
	objs := env.open(t, env.config(""))
	ctx := context.Background()
	data := map[string][]byte{"p/a": []byte("alpha"), "p/b/c": bytes.Repeat([]byte("x"), 3<<20), "q/z": []byte("")}
	for k, v := range data {
		if err := objs.Put(ctx, k, bytes.NewReader(v), int64(len(v))); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	for k, v := range data {
		rc, err := objs.Get(ctx, k)
		if err != nil {
			t.Fatalf("get %s: %v", k, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, v) {
			t.Fatalf("get %s: %d bytes, err %v; want %d bytes", k, len(got), err, len(v))
		}
		info, err := objs.Stat(ctx, k)
		if err != nil || info.Size != int64(len(v)) || info.Key != k {
			t.Fatalf("stat %s: %+v, %v", k, info, err)
		}
	}
	if got := keys(t, objs, "p/"); strings.Join(got, ",") != "p/a,p/b/c" {
		t.Fatalf("list p/: %v", got)
	}
	if err := objs.Delete(ctx, "p/a"); err != nil {
		t.Fatal(err)
	}
	for name, op := range map[string]func() error{
		"get":  func() error { _, err := objs.Get(ctx, "p/a"); return err },
		"stat": func() error { _, err := objs.Stat(ctx, "p/a"); return err },
	} {
		if err := op(); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s of a deleted object: %v, want ErrNotFound", name, err)
		}
	}
	if err := objs.Delete(ctx, "p/never"); err != nil {
		t.Errorf("deleting a missing object: %v", err)
	}
}

// TestS3OverTLSWithACustomCA reaches versitygw through a TLS proxy whose certificate only a custom
// CA bundle trusts: with the bundle the store works; without it Open fails at once, not after retries.
func TestS3OverTLSWithACustomCA(t *testing.T) {
	env := startS3(t)
	proxy := &faultProxy{upstream: env.srv.Endpoint, seen: map[string]int{}, transport: &http.Transport{}}
	ts := httptest.NewTLSServer(proxy)
	t.Cleanup(ts.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
	if err := os.WriteFile(caFile, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := env.config("")
	cfg.Endpoint = "https://" + ts.Listener.Addr().String()
	cfg.TLS.CAFile = caFile
	objs, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open over TLS with the CA bundle: %v", err)
	}
	if err := objs.Put(context.Background(), "k", strings.NewReader("over tls"), 8); err != nil {
		t.Fatal(err)
	}
	cfg.TLS.CAFile = ""
	_, err = Open(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("open over TLS without the CA: %v, want a certificate error", err)
	}
	// One attempt is what "at once" means; a wall-clock bound would add nothing but load-dependence.
	var op *OpError
	if !errors.As(err, &op) || op.Attempts != 1 {
		t.Errorf("a certificate error was retried: %v", err)
	}
	cfg.TLS.InsecureSkipVerify = true
	if _, err := Open(context.Background(), cfg); err != nil {
		t.Fatalf("open over TLS skipping verification: %v", err)
	}
}
