package blobstore

import (
	"context"
	"errors"
	"io"
	"time"
)

// ObjectStore is the primitive the session store is built on: whole objects addressed by key. It is
// declared here, where it is used; S3ObjectStore and MemObjectStore implement it.
type ObjectStore interface {
	// Put stores size bytes read from r under key, replacing any object there. The size is required
	// (an S3 client buffers an upload of unknown size in memory). Implementations retry a failed
	// attempt only when r is an io.Seeker.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// Get opens the object at key; it fails with an error wrapping ErrNotFound when there is none.
	// The reader reports a truncated or interrupted transfer as an error, never as a short object.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Stat describes the object at key, or fails with an error wrapping ErrNotFound.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// List returns every object whose key starts with prefix, in key order.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// Delete removes the object at key; deleting a missing object is not an error.
	Delete(ctx context.Context, key string) error
}

// CreatingStore is an ObjectStore that can store an object only where there is none, as S3's
// If-None-Match: * does. Two pushes of different content under one id then cannot both commit: the
// second create of meta.json fails with ErrExists, atomically in the store.
type CreatingStore interface {
	ObjectStore
	// Create stores size bytes read from r under key unless an object is there already, and then
	// fails with an error wrapping ErrExists and stores nothing.
	Create(ctx context.Context, key string, r io.Reader, size int64) error
}

// ErrExists is wrapped when a Create finds an object at its key.
var ErrExists = errors.New("an object is already stored under the key")

// ObjectInfo describes a stored object.
type ObjectInfo struct {
	Key          string
	Size         int64
	ETag         string
	LastModified time.Time
}

// ErrNotFound is wrapped by errors about an object that does not exist.
var ErrNotFound = errors.New("object not found")

// ErrBucketNotFound is wrapped when the configured bucket does not exist.
var ErrBucketNotFound = errors.New("bucket does not exist")
