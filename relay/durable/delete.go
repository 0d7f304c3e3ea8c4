package durable

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Delete deletes a stream: its record goes, so its path names nothing
// (a PUT there makes a new stream), and its frames age out of the log
// with the log's retention. A stream forks still read is only marked
// deleted until its last fork goes.
func (s *Store) Delete(ctx context.Context, st *Stream) error {
	for range appendTries {
		if st.Forks <= 0 {
			return s.remove(ctx, st)
		}
		st.Deleted = true
		err := s.put(ctx, st)
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return err
		}
		cur, found, err := s.get(ctx, st.Key())
		if err != nil || !found {
			return err
		}
		st = cur
	}
	return fmt.Errorf("durable: delete %s: contended", st.Path)
}

// remove deletes st's record and lets its source know one fork fewer
// reads it, which removes a deleted source in turn.
func (s *Store) remove(ctx context.Context, st *Stream) error {
	kv, err := s.kv(ctx)
	if err != nil {
		return err
	}
	if err := kv.Delete(ctx, st.Key(), jetstream.LastRevision(st.revision)); err != nil {
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyNotFound) {
			cur, found, err := s.get(ctx, st.Key())
			if err != nil || !found || cur.ID != st.ID {
				return err
			}
			return s.Delete(ctx, cur)
		}
		return fmt.Errorf("durable: delete record: %w", err)
	}
	if st.Fork == nil {
		return nil
	}
	src, found, err := s.get(ctx, keyOf(st.Tenant, st.Fork.Source))
	if err != nil || !found {
		return err
	}
	return s.countForks(ctx, src, -1)
}
