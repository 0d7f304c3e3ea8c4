package edge

import (
	"net/http"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/wire"
)

// # Answers from the cache
//
// A worker that finds no provider able to take a request may answer it
// with an identical earlier request's answer, kept by the model's cache
// (wire "Cached answers"); it marks every frame of it (wire.Frame.Cached).
// A client learns it: relay.status is "cached" in each chat chunk and in
// the end (the answer is finished: finish_reason says how), and in every
// dialect the response carries X-Relay-Cache: hit when its head goes
// after the first frame (every whole answer; a streamed one whose first
// frame came within the head's hold, first_frame.go).

// HeaderCache is "hit" on a response that serves an answer from the cache.
const HeaderCache = "X-Relay-Cache"

// statusCached is relay.status of every chunk and of the end of an answer
// replayed from the cache.
const statusCached wire.Status = "cached"

// relayStatus is the status a client sees of frame f: "cached" for a
// chunk or a done end of a kept answer, else the end's status.
func relayStatus(f wire.Frame) wire.Status {
	if f.Cached && (f.Kind == wire.KindChunk || f.Status == wire.StatusDone) {
		return statusCached
	}
	return f.Status
}

// markCached sets HeaderCache on a response whose first frames, read
// before its head goes, are a kept answer's.
func markCached(w http.ResponseWriter, read []chunklog.Entry) {
	if len(read) > 0 && read[0].Frame.Cached {
		w.Header().Set(HeaderCache, "hit")
	}
}
