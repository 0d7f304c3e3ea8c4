package spend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// Hold is what a request admitted and not yet recorded may still spend:
// its largest possible cost, counted against its budgets until the
// ledger's record of its real cost replaces it.
type Hold struct {
	Tokens  int64   `json:"t"`
	CostUSD float64 `json:"c,omitempty"`
	// Expires is when the hold stops counting (Unix seconds) if no record
	// replaced it: the request's edge died before queueing it, or its
	// usage was never recorded.
	Expires int64 `json:"x"`
}

// Totals is what h counts.
func (h Hold) Totals() Totals { return Totals{Tokens: h.Tokens, CostUSD: h.CostUSD} }

// holds is the value of a scope's key in the ledger: the outstanding
// holds by request id.
type holds map[string]Hold

// HoldTTL bounds how long a hold counts without its record.
const HoldTTL = time.Hour

// settledGrace is how long a hold whose record this node saw stays in
// the scope's key: every node counts it until its own tally saw the
// record too, so no node ever counts neither.
const settledGrace = 30 * time.Second

// maxHolds bounds the outstanding holds of one scope, and so the size of
// its key.
const maxHolds = 4096

// ErrTooManyHolds refuses a hold past maxHolds in one scope.
var ErrTooManyHolds = errors.New("spend: too many requests in progress in one budget")

// holdTries bounds the attempts at one reservation that lost a race.
const holdTries = 32

// TenantScope and KeyScope name the ledger keys that hold the
// outstanding holds of a tenant and of one of its keys.
func TenantScope(tenant string) string { return holdPrefix + wire.KeyToken(tenant) }

// KeyScope: see TenantScope.
func KeyScope(tenant, key string) string {
	return holdPrefix + wire.KeyToken(tenant) + "." + wire.KeyToken(key)
}

const holdPrefix = "hold."

// Reserve adds hold h of request id to scope's holds, unless admit, given
// what the scope's holds add up to, refuses it: then Reserve returns
// admit's error and changes nothing. A hold counts until it expires or t
// sees id's record (whose cost t then counts instead), and is dropped by
// the next write once it expired or t saw the record settledGrace ago. The read and the write are one compare-and-set on the
// key's revision, tried again when another node wrote in between, so
// every node's reservations in a scope are serialized.
func Reserve(ctx context.Context, kv jetstream.KeyValue, t *Tally, scope, id string, h Hold, admit func(held Totals) error) error {
	for range holdTries {
		cur, rev, err := readHolds(ctx, kv, scope)
		if err != nil {
			return err
		}
		live, held := t.split(cur, time.Now())
		if err := admit(held); err != nil {
			return err
		}
		if len(live) >= maxHolds {
			return ErrTooManyHolds
		}
		live[id] = h
		ok, err := writeHolds(ctx, kv, scope, live, rev)
		if err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("spend: reserve in %s: the key kept changing", scope)
}

// Release drops request id's hold from scope, if it is there: the request
// was refused, was not queued, or ended without usage.
func Release(ctx context.Context, kv jetstream.KeyValue, t *Tally, scope, id string) error {
	for range holdTries {
		cur, rev, err := readHolds(ctx, kv, scope)
		if err != nil {
			return err
		}
		if _, ok := cur[id]; !ok {
			return nil
		}
		live, _ := t.split(cur, time.Now())
		delete(live, id)
		ok, err := writeHolds(ctx, kv, scope, live, rev)
		if err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("spend: release in %s: the key kept changing", scope)
}

// readHolds is scope's holds and the key's revision (0: no key yet).
func readHolds(ctx context.Context, kv jetstream.KeyValue, scope string) (holds, uint64, error) {
	e, err := kv.Get(ctx, scope)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return holds{}, 0, nil
	case err != nil:
		return nil, 0, fmt.Errorf("spend: read %s: %w", scope, err)
	}
	h := holds{}
	if json.Unmarshal(e.Value(), &h) != nil {
		h = holds{} // not ours: overwritten
	}
	return h, e.Revision(), nil
}

// writeHolds stores h as scope's holds if the key is still at rev; ok is
// false when another write came first.
func writeHolds(ctx context.Context, kv jetstream.KeyValue, scope string, h holds, rev uint64) (ok bool, err error) {
	data, err := json.Marshal(h)
	if err != nil {
		return false, fmt.Errorf("spend: write %s: %w", scope, err)
	}
	if rev == 0 {
		_, err = kv.Create(ctx, scope, data)
	} else {
		_, err = kv.Update(ctx, scope, data, rev)
	}
	switch {
	case errors.Is(err, jetstream.ErrKeyExists), isWrongRevision(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("spend: write %s: %w", scope, err)
	}
	return true, nil
}

// isWrongRevision reports an Update that found the key at another
// revision.
func isWrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}
