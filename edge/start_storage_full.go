package edge

import (
	"net/http"
	"time"

	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// CodeStorageFull refuses a request the relay has no room to store: the
// request queue, or the stream metadata, is at its byte limit
// (streams.storage_mib). It is part of the API, as the other codes.
const CodeStorageFull = "storage_full"

// storageFullRetry is the Retry-After of a storage_full refusal: the queue
// frees as workers take requests, the metadata as streams expire.
const storageFullRetry = 5 * time.Second

// natsWriteError is the answer to a NATS write that failed: 507
// storage_full when JetStream refused it for want of room, in words that
// name no internals, else a 503 (unavailable).
func natsWriteError(what string, err error) *wire.Error {
	if !streams.IsStorageFull(err) {
		return unavailable(what, err)
	}
	return &wire.Error{
		Message:      "the relay's storage is full, so it cannot accept the request now; retry later",
		Type:         wire.TypeServer,
		Code:         CodeStorageFull,
		Status:       http.StatusInsufficientStorage,
		RetryAfterMS: storageFullRetry.Milliseconds(),
	}
}
