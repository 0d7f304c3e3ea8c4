package edge

import (
	"testing"
	"time"

	"github.com/relaydev/relay/edge/follow"
	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/wire"
)

// TestSessionKeepsItsEndFrame: the end frame a session recorded from a
// batch is the session's own copy, which outlives the batch's release and
// reuse.
func TestSessionKeepsItsEndFrame(t *testing.T) {
	ended := 0
	o := &observer{recent: newRecent(time.Now), models: func(string) bool { return true }, ended: func(string, *wire.Frame) { ended++ }}
	ss := &session{o: o, id: "s1"}
	batch := []chunklog.Entry{{JSSeq: 7, Frame: wire.Frame{Kind: wire.KindEnd, Seq: 3, Status: wire.StatusDone}}}
	ss.delivered(batch)
	follow.Release(batch)
	if left := batch[0]; left.JSSeq != 0 || left.Frame.Kind != "" {
		t.Fatalf("released batch still holds %+v", left)
	}
	if ss.end == nil || ss.end.Status != wire.StatusDone || ss.end.Seq != 3 || ended != 1 {
		t.Fatalf("the session's end frame %+v (told %d times), want the done frame", ss.end, ended)
	}
}
