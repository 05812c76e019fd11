package blobstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Two pushes of different content under one id must not both succeed. Every object a push writes
// under the session is named by the hash of its content (layout.go), so the two never overwrite each
// other's; the commit, meta.json, is created only where there is none (CreatingStore), so exactly
// one of them commits. The other finds meta.json taken, reads it, removes what only it stored and
// fails with *ConflictError. A push of the same content that finds meta.json taken has nothing to
// lose: the session it pushes is committed.

// commit writes meta.json's record and then meta.json, as repair says, confirming each is stored:
// until meta.json is, the session is not pushed. fresh says the store held no meta.json when the
// push began, so meta.json is created rather than repaired. It returns the bytes it sent.
func (s *SessionStore) commit(ctx context.Context, local *localSession, repair metaRepair, fresh bool) (int64, error) {
	var sent int64
	id, meta := local.meta.ID, local.metaBytes
	if repair.sum {
		rec := metaSumRecord(meta)
		key := s.layout.SessionMetaSum(id, sha256Hex(meta))
		if err := s.objects.Put(ctx, key, bytes.NewReader(rec), int64(len(rec))); err != nil {
			return sent, err
		}
		if err := s.confirm(ctx, key, int64(len(rec))); err != nil {
			return sent, err
		}
		sent += int64(len(rec))
	}
	if !repair.meta {
		return sent, nil
	}
	key := s.layout.SessionMeta(id)
	if fresh {
		created, err := s.createMeta(ctx, local)
		if created {
			sent += int64(len(meta))
		}
		return sent, err
	}
	// A damaged meta.json that this session's record vouches for: replaced in place.
	if err := s.objects.Put(ctx, key, bytes.NewReader(meta), int64(len(meta))); err != nil {
		return sent, err
	}
	if err := s.confirm(ctx, key, int64(len(meta))); err != nil {
		return sent, err
	}
	return sent + int64(len(meta)), nil
}

// createMeta stores meta.json unless the store holds one, then reads back what the store holds.
// Where the store cannot create conditionally, the read-back is the only check: it catches a push
// that overwrote this one before the read, not one after it.
func (s *SessionStore) createMeta(ctx context.Context, local *localSession) (created bool, err error) {
	key, meta := s.layout.SessionMeta(local.meta.ID), local.metaBytes
	if cs, ok := s.objects.(CreatingStore); ok {
		err = cs.Create(ctx, key, bytes.NewReader(meta), int64(len(meta)))
	} else {
		err = s.objects.Put(ctx, key, bytes.NewReader(meta), int64(len(meta)))
	}
	switch {
	case errors.Is(err, ErrExists):
		// Another push's, or this one's own: an attempt whose answer was lost and was retried.
	case err != nil:
		return false, err
	default:
		created = true
	}
	stored, err := s.readBackMeta(ctx, local)
	if err != nil || stored == nil {
		return created, err
	}
	s.withdraw(ctx, local, *stored)
	return created, &ConflictError{ID: local.meta.ID, LocalEventsHash: local.meta.EventsHash, StoredEventsHash: stored.EventsHash, Raced: true}
}

// readBackMeta reads the stored meta.json until it is this push's, or decodes as another session's
// (nil then, or that session's meta). A read damaged on the way is read again, up to verifyReads
// times in all, so that a flipped bit is never taken for a lost race.
func (s *SessionStore) readBackMeta(ctx context.Context, local *localSession) (*session.Meta, error) {
	key := s.layout.SessionMeta(local.meta.ID)
	var last error
	for reads := 1; reads <= verifyReads; reads++ {
		data, err := s.readSmall(ctx, key, maxMetaSize)
		switch {
		case errors.Is(err, ErrNotFound):
			last = fmt.Errorf("%s was stored and then was not there (a collection of the session at the same time?): push again", s.name(key))
			continue
		case err != nil:
			return nil, err
		case bytes.Equal(data, local.metaBytes):
			return nil, nil
		}
		stored, err := decodeMetaStrict(data, s.name(key))
		if err == nil && stored.ID == local.meta.ID {
			return &stored, nil
		}
		last = fmt.Errorf("reading back %s: it is neither this session's nor a valid meta.json of session %s: %v", s.name(key), local.meta.ID, err)
	}
	return nil, fmt.Errorf("committing session %s: %w", local.meta.ID, last)
}

// withdraw removes the objects this push stored under the session that the committed session does
// not name, once another push won the id. What is left (a failed delete, a push stopped before it
// got here) is named by its own hash, so it never replaces the winner's; the next push that finds
// the session committed removes it (dropStrays).
func (s *SessionStore) withdraw(ctx context.Context, local *localSession, winner session.Meta) {
	id := local.meta.ID
	keys := []string{s.layout.SessionMetaSum(id, sha256Hex(local.metaBytes))}
	if local.meta.EventsHash != winner.EventsHash {
		keys = append(keys, s.layout.SessionSegments(id, local.meta.EventsHash))
	}
	if local.vault != nil && local.meta.VaultHash != winner.VaultHash {
		keys = append(keys, s.layout.SessionVault(id, local.meta.VaultHash))
	}
	for _, key := range keys {
		_ = s.objects.Delete(ctx, key)
	}
}

// dropStrays removes what pushes that lost session id left under it (Layout.StrayOf) once meta, stored
// as metaBytes, is the session committed there: their records would stand beside the winner's, and
// their indexes keep their blobs from the sweep. metaBytes is what the caller has just read back from
// the store, so the session was not collected and another committed since the push looked. It runs
// only over a store that creates meta.json conditionally, where no push of other content can commit
// while that meta.json stays, and only when it names id. A failed delete is left for the next push.
func (s *SessionStore) dropStrays(ctx context.Context, id string, metaBytes []byte, meta session.Meta) {
	if _, ok := s.objects.(CreatingStore); !ok || meta.ID != id {
		return
	}
	infos, err := s.objects.List(ctx, s.layout.SessionPrefix(id))
	if err != nil {
		return
	}
	metaHash := sha256Hex(metaBytes)
	for _, info := range infos {
		if s.layout.StrayOf(id, info.Key, metaHash, meta) {
			_ = s.objects.Delete(ctx, info.Key)
		}
	}
}
