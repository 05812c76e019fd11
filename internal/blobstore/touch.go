package blobstore

import (
	"context"
	"time"

	"github.com/minio/minio-go/v7"
)

// maxCopySize is the largest object S3 copies in one request; a larger one is uploaded again.
const maxCopySize = 5 << 30

// toucher is an ObjectStore that can renew an object's modification time without sending its bytes.
type toucher interface {
	Touch(ctx context.Context, key string, size int64) (bool, error)
}

// Touch renews the modification time of the object at key by copying it onto itself (replacing its
// metadata, which S3 requires of a same-key copy). Not every S3 server renews the time on such a copy
// (versitygw's posix backend keeps it), so the first copy is checked with a Stat and, when the time
// did not move, the store reports false from then on without copying: the caller uploads the object
// again. It also reports false for an object too large for a single copy.
func (s *S3ObjectStore) Touch(ctx context.Context, key string, size int64) (bool, error) {
	if size > maxCopySize || s.copyRenews.Load() == renewsNo {
		return false, nil
	}
	var before ObjectInfo
	probe := s.copyRenews.Load() == renewsUnknown
	if probe {
		var err error
		if before, err = s.Stat(ctx, key); err != nil {
			return false, err
		}
	}
	err := s.do(ctx, "touch", key, 0, s.retry.MaxAttempts, func(ctx context.Context) error {
		_, err := s.client.CopyObject(ctx,
			minio.CopyDestOptions{Bucket: s.bucket, Object: key, ReplaceMetadata: true,
				UserMetadata: map[string]string{"Agentrewind-Touched": time.Now().UTC().Format(time.RFC3339Nano)}},
			minio.CopySrcOptions{Bucket: s.bucket, Object: key})
		return err
	})
	if err != nil || !probe {
		return err == nil, err
	}
	after, err := s.Stat(ctx, key)
	if err != nil {
		return false, err
	}
	if after.LastModified.After(before.LastModified) {
		s.copyRenews.Store(renewsYes)
		return true, nil
	}
	s.copyRenews.Store(renewsNo)
	return false, nil
}

// Whether a same-key copy renews an object's modification time on this server, learnt by Touch.
const (
	renewsUnknown int32 = iota
	renewsYes
	renewsNo
)

// Touch renews the modification time of the object at key; it reports false when there is none.
func (m *MemObjectStore) Touch(ctx context.Context, key string, _ int64) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return m.SetModified(key, m.now()), nil
}

// refresh renews the modification time of a blob a push or a capture found already stored and did not
// send, so that a blob sweep's safety margin counts from now: a sweep that listed the blob as old and
// unreferenced before the session referencing it was committed must not delete it. An object store
// that cannot renew it in place gets it again through reupload, and so does one whose renewal
// failed: a copy answered with an empty 200 or an error says nothing certain about the object, and
// sending it again is always a correct renewal. resent reports that it was sent again.
func (s *SessionStore) refresh(ctx context.Context, key string, size int64, reupload func() error) (resent bool, err error) {
	if t, ok := s.objects.(toucher); ok {
		if done, _ := t.Touch(ctx, key, size); done {
			return false, nil
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
	}
	return true, reupload()
}
