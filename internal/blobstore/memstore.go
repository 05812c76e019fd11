package blobstore

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// MemObjectStore is an in-memory ObjectStore for unit tests. It behaves like S3 where the session
// store depends on it: a Put is all-or-nothing and a short body is refused. Integration tests use a
// real S3 server instead.
type MemObjectStore struct {
	mu      sync.Mutex
	objects map[string]memObject
	// BeforePut, when set, runs before each Put; an error it returns fails the Put and stores nothing.
	BeforePut func(key string) error
	// Clock, when set, is the store's clock: modification times, delete windows and ServerTime
	// read it. Tests set it to play out interleavings without sleeping.
	Clock func() time.Time
	puts  map[string]int
}

func (m *MemObjectStore) now() time.Time {
	if m.Clock != nil {
		return m.Clock()
	}
	return time.Now()
}

type memObject struct {
	data     []byte
	modified time.Time
}

// NewMemObjectStore returns an empty store.
func NewMemObjectStore() *MemObjectStore {
	return &MemObjectStore{objects: map[string]memObject{}, puts: map[string]int{}}
}

func (m *MemObjectStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return m.put(ctx, key, r, size, false)
}

// Create stores the object only when key holds none, as a conditional S3 PUT does.
func (m *MemObjectStore) Create(ctx context.Context, key string, r io.Reader, size int64) error {
	return m.put(ctx, key, r, size, true)
}

func (m *MemObjectStore) put(ctx context.Context, key string, r io.Reader, size int64, create bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.BeforePut != nil {
		if err := m.BeforePut(key); err != nil {
			return err
		}
	}
	data, err := io.ReadAll(io.LimitReader(r, size+1))
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if int64(len(data)) != size {
		return fmt.Errorf("put %s: read %d bytes, the declared size is %d", key, len(data), size)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objects[key]; ok && create {
		return fmt.Errorf("create %s: %w", key, ErrExists)
	}
	m.objects[key] = memObject{data: data, modified: m.now()}
	m.puts[key]++
	return nil
}

func (m *MemObjectStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[key]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	return io.NopCloser(bytes.NewReader(o.data)), nil
}

func (m *MemObjectStore) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[key]
	if !ok {
		return ObjectInfo{}, fmt.Errorf("stat %s: %w", key, ErrNotFound)
	}
	return o.info(key), nil
}

func (m *MemObjectStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ObjectInfo
	for key, o := range m.objects {
		if strings.HasPrefix(key, prefix) {
			out = append(out, o.info(key))
		}
	}
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

func (m *MemObjectStore) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, key)
	return nil
}

// PutCount is the number of successful Puts of key, so tests can tell an upload from a skip.
func (m *MemObjectStore) PutCount(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.puts[key]
}

// Bytes returns a copy of the object at key, for tests; ok is false when there is none.
func (m *MemObjectStore) Bytes(key string) (data []byte, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[key]
	return bytes.Clone(o.data), ok
}

// Set stores data under key without hooks, for tests that tamper with the store.
func (m *MemObjectStore) Set(key string, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objects[key] = memObject{data: bytes.Clone(data), modified: m.now()}
}

func (o memObject) info(key string) ObjectInfo {
	sum := md5.Sum(o.data)
	return ObjectInfo{Key: key, Size: int64(len(o.data)), ETag: hex.EncodeToString(sum[:]), LastModified: o.modified}
}
