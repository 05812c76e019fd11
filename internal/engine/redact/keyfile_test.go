package redact

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func skipWithoutPOSIXModes(t *testing.T) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("Windows has no POSIX permission bits")
	}
}

func TestFileKeyProviderCreatesAPrivateKeyAndReusesIt(t *testing.T) {
	skipWithoutPOSIXModes(t)
	dir := filepath.Join(t.TempDir(), "config", "agentrewind")
	kp := FileKeyProvider{Path: filepath.Join(dir, "vault.key")}
	first, err := kp.Key(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != KeySize {
		t.Fatalf("key is %d bytes, want %d", len(first), KeySize)
	}
	assertMode(t, kp.Path, 0o600)
	assertMode(t, dir, 0o700)
	data, err := os.ReadFile(kp.Path)
	if err != nil {
		t.Fatal(err)
	}
	if want := hex.EncodeToString(first) + "\n"; string(data) != want {
		t.Fatalf("key file holds %q, want the hex key and a newline", data)
	}
	second, err := kp.Key(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Fatal("second call returned a different key")
	}
}

func TestFileKeyProviderRefusesAKeyReadableByOthers(t *testing.T) {
	skipWithoutPOSIXModes(t)
	path := filepath.Join(t.TempDir(), "vault.key")
	writeFile(t, path, []byte(strings.Repeat("ab", KeySize)+"\n"), 0o644)
	_, err := FileKeyProvider{Path: path}.Key(context.Background())
	if !errors.Is(err, ErrKeyFilePermissions) {
		t.Fatalf("err = %v, want ErrKeyFilePermissions", err)
	}
	if !strings.Contains(err.Error(), "chmod 600 "+path) {
		t.Fatalf("error %q does not say how to fix it", err)
	}
}

func TestFileKeyProviderReadsHexOrRawKeys(t *testing.T) {
	raw := bytes.Repeat([]byte{0x5a}, KeySize)
	tests := []struct {
		name    string
		content []byte
	}{
		{"hex with newline", []byte(hex.EncodeToString(raw) + "\n")},
		{"hex without newline", []byte(hex.EncodeToString(raw))},
		{"raw bytes", raw},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "vault.key")
			writeFile(t, path, tt.content, 0o600)
			got, err := FileKeyProvider{Path: path}.Key(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, raw) {
				t.Fatalf("key = %x, want %x", got, raw)
			}
		})
	}
}

func TestFileKeyProviderRejectsMalformedKeys(t *testing.T) {
	for name, content := range map[string]string{
		"empty":         "",
		"too short hex": "abcd\n",
		"not hex":       strings.Repeat("zz", KeySize),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "vault.key")
			writeFile(t, path, []byte(content), 0o600)
			if _, err := (FileKeyProvider{Path: path}).Key(context.Background()); err == nil {
				t.Fatal("malformed key accepted")
			}
		})
	}
}

func TestVaultSealedWithKeyFileOpensWithTheSameKeyFetchedElsewhere(t *testing.T) {
	kp := FileKeyProvider{Path: filepath.Join(t.TempDir(), "vault.key")}
	v := NewVault()
	v.Add(Token("x"), "x")
	sealed, err := v.Seal(context.Background(), kp)
	if err != nil {
		t.Fatal(err)
	}
	key, err := kp.Key(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	opened, err := OpenVault(context.Background(), StaticKeyProvider(key), sealed)
	if err != nil {
		t.Fatal(err)
	}
	if opened.Restore(Token("x")) != "x" {
		t.Fatal("vault did not survive the round trip")
	}
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode().Perm(); got != want {
		t.Fatalf("%s has mode %04o, want %04o", path, got, want)
	}
}

// writeFile sets the mode explicitly: WriteFile's perm is filtered by the umask.
func writeFile(t *testing.T, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
