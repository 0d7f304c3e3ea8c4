package worker

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/spend"
)

// ledgerJS is a JetStream whose usage bucket is looked up and written as
// a cluster in an election answers: each lookup and each create returns
// the next of its errors, then succeeds.
type ledgerJS struct {
	jetstream.JetStream
	lookupErrs, createErrs []error
	lookups, creates       int
	stored                 map[string][]byte
	// lostAnswers stores a create before it returns its error, as a
	// write whose answer was lost.
	lostAnswers bool
}

func (j *ledgerJS) KeyValue(context.Context, string) (jetstream.KeyValue, error) {
	j.lookups++
	if j.lookups <= len(j.lookupErrs) {
		return nil, j.lookupErrs[j.lookups-1]
	}
	return ledgerKV{js: j}, nil
}

// ledgerKV is the bucket of a ledgerJS; spend.Store only creates.
type ledgerKV struct {
	jetstream.KeyValue
	js *ledgerJS
}

func (kv ledgerKV) Create(_ context.Context, key string, value []byte, _ ...jetstream.KVCreateOpt) (uint64, error) {
	j := kv.js
	j.creates++
	if _, ok := j.stored[key]; ok {
		return 0, jetstream.ErrKeyExists
	}
	if j.creates <= len(j.createErrs) && !j.lostAnswers {
		return 0, j.createErrs[j.creates-1]
	}
	j.stored[key] = value
	if j.creates <= len(j.createErrs) {
		return 0, j.createErrs[j.creates-1]
	}
	return uint64(len(j.stored)), nil
}

// TestUsageRecordWaitsOutAnElection: a stream's usage record whose bucket
// has no leader (its lookup or its write unanswered, or JetStream
// "temporarily unavailable") is tried again until it is stored; a bucket
// that does not exist is given up on at once, and not looked up again
// for ledgerRetry; a write refused for good is not retried.
func TestUsageRecordWaitsOutAnElection(t *testing.T) {
	noLeader := &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}
	full := &jetstream.APIError{Code: 500, ErrorCode: 10047, Description: "insufficient storage resources available"}
	r := spend.NewRecord("acme", "key-1", time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), nil, 0.25)
	for _, tc := range []struct {
		name                   string
		lookupErrs, createErrs []error
		lostAnswers            bool
		lookups, creates       int
		err                    error
	}{
		{"stored at once", nil, nil, false, 1, 1, nil},
		{"the lookup finds no leader", []error{context.DeadlineExceeded, noLeader}, nil, false, 3, 1, nil},
		{"the write finds no leader", nil, []error{jetstream.ErrNoStreamResponse, context.DeadlineExceeded, noLeader}, false, 1, 4, nil},
		{"a try stored without an answer", nil, []error{context.DeadlineExceeded}, true, 1, 2, nil},
		{"no ledger bucket", []error{jetstream.ErrBucketNotFound}, nil, false, 1, 0, jetstream.ErrBucketNotFound},
		{"storage full", nil, []error{full}, false, 1, 1, full},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				js := &ledgerJS{lookupErrs: tc.lookupErrs, createErrs: tc.createErrs, lostAnswers: tc.lostAnswers, stored: map[string][]byte{}}
				l := newUsageLedger(js)
				ctx, cancel := context.WithTimeout(t.Context(), DefaultAppendRetry)
				defer cancel()
				err := l.record(ctx, "stream-1", r)
				if !errors.Is(err, tc.err) || js.lookups != tc.lookups || js.creates != tc.creates {
					t.Fatalf("err %v after %d lookups and %d writes, want %v after %d and %d", err, js.lookups, js.creates, tc.err, tc.lookups, tc.creates)
				}
				if tc.err == nil && len(js.stored) != 1 {
					t.Fatalf("%d records stored, want 1", len(js.stored))
				}
				if tc.err == nil {
					return
				}
				// What failed for good is not tried again at once.
				err = l.record(ctx, "stream-2", r)
				if errors.Is(tc.err, jetstream.ErrBucketNotFound) && (!errors.Is(err, jetstream.ErrBucketNotFound) || js.lookups != 1) {
					t.Fatalf("a second record: %v after %d lookups, want the bucket missing, without a lookup", err, js.lookups)
				}
			})
		})
	}
}
