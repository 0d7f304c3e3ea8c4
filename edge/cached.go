package edge

import (
	"net/http"

	"github.com/relaydev/relay/relay/chunklog"
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
// frame came within the head's hold, follow_first_frame.go).

// HeaderCache is "hit" on a response that serves an answer from the cache.
const HeaderCache = "X-Relay-Cache"

// markCached sets HeaderCache on a response whose first frames, read
// before its head goes, are a kept answer's.
func markCached(w http.ResponseWriter, read []chunklog.Entry) {
	if len(read) > 0 && read[0].Frame.Cached {
		w.Header().Set(HeaderCache, "hit")
	}
}
