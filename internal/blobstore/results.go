package blobstore

import (
	"bytes"
	"context"
	"fmt"
)

// maxResultBytes bounds an engine result read back: a result holds counts, digests and verdicts, and a
// larger object at results/ is not one an engine Job wrote.
const maxResultBytes = 8 << 20

// PutResult stores an engine Job's result document at results/<uid>.json, replacing an earlier one (a
// Job that ran again writes its latest word).
func (s *SessionStore) PutResult(ctx context.Context, uid string, data []byte) error {
	if err := ValidateID(uid); err != nil {
		return fmt.Errorf("job uid: %w", err)
	}
	if len(data) > maxResultBytes {
		return fmt.Errorf("result of job %s is %d bytes, more than the %d a result may hold", uid, len(data), maxResultBytes)
	}
	key := s.layout.Result(uid)
	if err := s.objects.Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
		return fmt.Errorf("writing %s: %w", s.name(key), err)
	}
	return nil
}

// GetResult reads the result document of an engine Job; an error wraps ErrNotFound when the Job wrote
// none. The caller decodes and checks it (package task).
func (s *SessionStore) GetResult(ctx context.Context, uid string) ([]byte, error) {
	if err := ValidateID(uid); err != nil {
		return nil, fmt.Errorf("job uid: %w", err)
	}
	return s.readSmall(ctx, s.layout.Result(uid), maxResultBytes)
}
