package redact

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// ErrKeyFilePermissions is wrapped by FileKeyProvider when the key file is accessible to group or
// others.
var ErrKeyFilePermissions = errors.New("key file is accessible by group or others")

// FileKeyProvider keeps the vault key in a local file (a workstation's equivalent of the Kubernetes
// Secret used in-cluster).
//
// Format: 64 hexadecimal characters, optionally followed by a newline, as written when the file is
// created (`openssl rand -hex 32 > key` makes a compatible one). A file of exactly 32 raw bytes is
// also accepted, for keys produced with `head -c 32 /dev/urandom`; the two cannot be confused since
// a hex key is 64 bytes long.
//
// If the file does not exist, Key creates it with mode 0600 and a fresh random key (missing parent
// directories are created with mode 0700). A key file accessible to group or others is refused:
// anyone who can read it can read every vault sealed with it.
type FileKeyProvider struct {
	Path string
}

// maxKeyFileSize bounds what is read from the key file: a key is 64 hex characters plus whitespace.
const maxKeyFileSize = 1 << 10

// Key reads the key, creating the file first if it does not exist.
func (p FileKeyProvider) Key(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.Path == "" {
		return nil, errors.New("redact: key file path is empty")
	}
	key, err := p.read()
	if errors.Is(err, fs.ErrNotExist) {
		return p.create()
	}
	return key, err
}

func (p FileKeyProvider) read() ([]byte, error) {
	f, err := os.Open(p.Path)
	if err != nil {
		return nil, err // keeps fs.ErrNotExist visible to Key
	}
	defer f.Close()
	// Stat the open file, not the path, so the mode checked is the mode of the bytes read.
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("redact: key file %s: %w", p.Path, err)
	}
	if err := checkKeyFileMode(p.Path, info); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("redact: key file %s: %w", p.Path, err)
	}
	key, err := parseKey(data)
	if err != nil {
		return nil, fmt.Errorf("redact: key file %s: %w", p.Path, err)
	}
	return key, nil
}

func checkKeyFileMode(path string, info fs.FileInfo) error {
	if !info.Mode().IsRegular() {
		return fmt.Errorf("redact: key file %s is not a regular file", path)
	}
	// Windows has no POSIX mode bits; Go reports 0666 or 0444 for every file there.
	if runtime.GOOS != "windows" && info.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("redact: %w: %s has mode %04o; fix with: chmod 600 %s",
			ErrKeyFilePermissions, path, info.Mode().Perm(), path)
	}
	return nil
}

func parseKey(data []byte) ([]byte, error) {
	if len(data) == KeySize {
		return data, nil
	}
	text := bytes.TrimSpace(data)
	if len(text) != 2*KeySize {
		return nil, fmt.Errorf("want %d hex characters (or %d raw bytes), found %d bytes", 2*KeySize, KeySize, len(data))
	}
	key := make([]byte, KeySize)
	if _, err := hex.Decode(key, text); err != nil {
		return nil, fmt.Errorf("key is not hexadecimal: %w", err)
	}
	return key, nil
}

// create writes a fresh key with O_EXCL, so two processes racing to create the file cannot end up
// sealing vaults with different keys: the loser reads the winner's key instead (or, if it catches
// the file mid-write, fails on a short key rather than silently using a different one).
func (p FileKeyProvider) create() ([]byte, error) {
	if err := os.MkdirAll(filepath.Dir(p.Path), 0o700); err != nil {
		return nil, fmt.Errorf("redact: creating key directory: %w", err)
	}
	f, err := os.OpenFile(p.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return p.read()
	}
	if err != nil {
		return nil, fmt.Errorf("redact: creating key file: %w", err)
	}
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, abandonKeyFile(f, p.Path, err)
	}
	if _, err := f.WriteString(hex.EncodeToString(key) + "\n"); err != nil {
		return nil, abandonKeyFile(f, p.Path, err)
	}
	if err := f.Sync(); err != nil {
		return nil, abandonKeyFile(f, p.Path, err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(p.Path)
		return nil, fmt.Errorf("redact: writing key file: %w", err)
	}
	return key, nil
}

// abandonKeyFile removes a half-written key file: left behind, it would make every later Key fail.
func abandonKeyFile(f *os.File, path string, err error) error {
	_ = f.Close()
	_ = os.Remove(path)
	return fmt.Errorf("redact: writing key file: %w", err)
}
