package spend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// Record is one stream's usage in the ledger.
type Record struct {
	Tenant string `json:"tenant,omitempty"`
	// Key names the API key that started the stream (KeyID); "" for the
	// anonymous tenant.
	Key string `json:"key,omitempty"`
	// Day is the UTC day the stream ended (DayOf).
	Day     string  `json:"day"`
	Tokens  int64   `json:"tokens"`
	CostUSD float64 `json:"cost_usd"`
}

// NewRecord is the Record of a stream of tenant and key that ended at
// with usage (nil: none reported) and cost.
func NewRecord(tenant, key string, at time.Time, usage *wire.Usage, cost float64) Record {
	r := Record{Tenant: tenant, Key: key, Day: DayOf(at), CostUSD: cost}
	if usage != nil {
		r.Tokens = int64(usage.TotalTokens)
		if r.Tokens == 0 {
			r.Tokens = int64(usage.PromptTokens + usage.CompletionTokens)
		}
	}
	return r
}

// Empty reports whether r counts nothing: such a stream is not recorded.
func (r Record) Empty() bool { return r.Tokens == 0 && r.CostUSD == 0 }

// Totals is what r counts.
func (r Record) Totals() Totals { return Totals{Tokens: r.Tokens, CostUSD: r.CostUSD} }

// recordPrefix starts every record's key.
const recordPrefix = "usage."

// monthSubject is the key filter of every record of month ("2026-12").
func monthSubject(month string) string { return recordPrefix + month + ".>" }

// recordKey is the key of the record of stream id: its month first, so
// that a watch of one month reads no other's.
func recordKey(month, tenant, key, id string) string {
	return recordPrefix + month + "." + wire.KeyToken(tenant) + "." + wire.KeyToken(key) + "." + id
}

// KeyID names an API key in the ledger and in GET /v1/relay/usage: the
// first 12 hex digits of its SHA-256, which the tenant can compute from
// its own key and which say nothing usable about it.
func KeyID(keySHA256 string) string {
	return strings.ToLower(keySHA256[:min(12, len(keySHA256))])
}

// Store stores r as the usage of stream id, once: counted is false when
// the stream's usage was recorded before (its end observed twice), and
// nothing changes then. An empty r is not stored.
func Store(ctx context.Context, kv jetstream.KeyValue, id string, r Record) (counted bool, err error) {
	if r.Empty() {
		return false, nil
	}
	at, err := time.Parse(time.DateOnly, r.Day)
	if err != nil {
		return false, fmt.Errorf("spend: record of %s: day %q: %w", id, r.Day, err)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return false, fmt.Errorf("spend: record of %s: %w", id, err)
	}
	_, err = kv.Create(ctx, recordKey(MonthOf(at), r.Tenant, r.Key, id), data)
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("spend: record of %s: %w", id, err)
	}
	return true, nil
}
