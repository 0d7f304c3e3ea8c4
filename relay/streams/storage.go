package streams

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// StorageLimits caps what each stream and bucket may hold, in MiB, so that
// no tenant can fill the server's disk (or memory) and with it every
// other stream of the relay. Zero means the default; -1 means no limit.
//
// What happens at a limit depends on what the data is for:
//   - RELAY_REQUESTS and the buckets refuse a new message (DiscardNew):
//     the edge answers 507 storage_full (IsStorageFull) instead of losing
//     a queued request or a stream's metadata.
//   - The chunk streams drop their oldest frames (DiscardOld): answers already
//     finished become unresumable before their retention, and generations
//     in flight go on.
type StorageLimits struct {
	// Requests caps RELAY_REQUESTS: prompts waiting for, or held by, a
	// worker.
	Requests int64 `koanf:"requests"`
	// Chunks caps the chunk streams together, each partition holding its
	// share: every answer, kept for streams.retention.
	Chunks int64 `koanf:"chunks"`
	// Durable caps the chunk streams of Durable Streams together, each of
	// their partitions holding its share: what backends append, kept for
	// streams.retention. It is apart from Chunks so that neither kind of
	// stream drops the other's frames.
	Durable int64 `koanf:"durable"`
	// Metadata caps relay_streams (one small record per stream) and
	// Idempotency relay_idempotency (one per Idempotency-Key).
	Metadata    int64 `koanf:"metadata"`
	Idempotency int64 `koanf:"idempotency"`
	// State caps each bucket of shared provider state, and
	// relay_handovers: a few records per provider, model and node.
	State int64 `koanf:"state"`
	// Answers caps relay_answers, the answers kept for models whose cache
	// is on (wire.AnswerBucket); when full, no new answer is kept until
	// entries expire.
	Answers int64 `koanf:"answers"`
	// Usage caps relay_usage, the ledger of tenants' usage: one record
	// (about 200 bytes) per stream that used tokens, kept for a month.
	Usage int64 `koanf:"usage"`
}

// Default limits, in MiB: about 3.5 GiB in all, per replica, which must
// fit under the server's max_file_store (or max_memory_store); JetStream
// reserves each stream's limit when it creates the stream. The buckets
// refuse new writes when full, and a full relay_streams refuses every new
// request (507), so its default is sized for the retention at a sustained
// rate far above one machine's: a stream's record takes about 150 bytes,
// so 512 MiB holds about 3.5 million streams, 24 h at 40 requests a second.
// The chunk streams drop their oldest frames instead; 2 GiB hold about 8 million
// frames, 24 h at 100 chunks a second, and the Durable Streams' 512 MiB
// about 1.4 million appends of 200 bytes (390 bytes stored each, with the
// frame around them), 24 h at 16 a second. More would ask more of the
// disk than a developer's machine may have free (the server refuses a
// stream whose reservation does not fit).
const (
	DefaultRequestsMiB    = 256
	DefaultChunksMiB      = 2048
	DefaultDurableMiB     = 512
	DefaultMetadataMiB    = 512
	DefaultIdempotencyMiB = 128
	DefaultStateMiB       = 16
	DefaultAnswersMiB     = 128
	DefaultUsageMiB       = 256
)

// withDefaults fills zero fields.
func (l StorageLimits) withDefaults() StorageLimits {
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.Requests, DefaultRequestsMiB)
	def(&l.Chunks, DefaultChunksMiB)
	def(&l.Durable, DefaultDurableMiB)
	def(&l.Metadata, DefaultMetadataMiB)
	def(&l.Idempotency, DefaultIdempotencyMiB)
	def(&l.State, DefaultStateMiB)
	def(&l.Answers, DefaultAnswersMiB)
	def(&l.Usage, DefaultUsageMiB)
	return l
}

// validate names the first invalid field under prefix.
func (l StorageLimits) validate(prefix string) error {
	for _, f := range []struct {
		name string
		v    int64
	}{{"requests", l.Requests}, {"chunks", l.Chunks}, {"durable", l.Durable}, {"metadata", l.Metadata}, {"idempotency", l.Idempotency}, {"state", l.State}, {"answers", l.Answers}, {"usage", l.Usage}} {
		if f.v < -1 {
			return fmt.Errorf("%s.%s: %d MiB is neither a size nor -1 (no limit)", prefix, f.name, f.v)
		}
	}
	return nil
}

// mibBytes is mib in bytes, -1 (JetStream's "no limit") for -1.
func mibBytes(mib int64) int64 {
	if mib < 0 {
		return -1
	}
	return mib << 20
}

// JetStream error codes of a write refused for want of room: a stream or
// bucket at its byte limit (a store failure whose cause is the limit), or
// a server or account out of storage.
const (
	codeStoreFailed        = 10077
	codeStorageExceeded    = 10047
	codeMemoryExceeded     = 10028
	maxBytesExceededReason = "maximum bytes exceeded"
)

// IsStorageFull reports whether err is a JetStream write refused because
// the stream, the bucket or the server's storage is full, so the caller
// can say so rather than pass on the server's words.
func IsStorageFull(err error) bool {
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.ErrorCode {
	case codeStorageExceeded, codeMemoryExceeded:
		return true
	case codeStoreFailed:
		return strings.Contains(api.Description, maxBytesExceededReason)
	}
	return false
}

// StateBytes is the byte limit of each bucket of shared state
// (streams.storage_mib.state) as JetStream takes it; a region's mirrors of
// the home's buckets and their overlays have the same.
func (l StorageLimits) StateBytes() int64 { return mibBytes(l.withDefaults().State) }
