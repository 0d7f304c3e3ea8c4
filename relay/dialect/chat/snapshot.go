package chat

import (
	"cmp"
	"maps"
	"slices"

	"github.com/relaydev/relay/relay/wire"
)

// Snapshot folds the chunks of a stream that a client has not seen into
// one: what a resume with snapshot sends instead of replaying each of
// them. It accumulates with an Answer (text, reasoning, refusal, tool
// calls with their arguments so far) and remembers the last chunk it
// took, whose cursor the folded chunk carries: a later resume after that
// cursor continues where the snapshot ends. Its zero value is empty.
type Snapshot struct {
	a    Answer
	role string
	// last is the last chunk taken, stored at at; n counts them.
	last wire.Frame
	at   wire.Cursor
	n    int
}

// Add takes chunk frame f, stored at cursor c. Tool calls or annotations
// that do not decode are left out, as a whole answer leaves them out.
func (p *Snapshot) Add(c wire.Cursor, f wire.Frame) {
	_ = p.a.Add(f)
	p.role = cmp.Or(p.role, f.Role)
	p.last, p.at = f, c
	p.n++
}

// Empty reports whether no chunk was taken.
func (p *Snapshot) Empty() bool { return p.n == 0 }

// At is the cursor of the last chunk taken: the id of the folded chunk.
func (p *Snapshot) At() wire.Cursor { return p.at }

// SnapshotChunk renders p as one chat.completion.chunk of stream s: its
// delta has everything p took (tool_calls with each call's index, id,
// name and arguments so far), and its relay member the last chunk's
// place, with snapshot set.
func (s Stream) SnapshotChunk(p *Snapshot) Chunk {
	content := p.a.content.String()
	delta := ChunkDelta{Role: p.role, Content: &content, Reasoning: p.a.reasoning.String(), Refusal: p.a.refusal.String()}
	if len(p.a.toolCalls) > 0 {
		var calls []ToolCallDelta
		for _, i := range slices.Sorted(maps.Keys(p.a.toolCalls)) {
			tc := p.a.toolCalls[i]
			calls = append(calls, ToolCallDelta{Index: i, ID: tc.ID, Type: tc.Type, Function: tc.Function})
		}
		delta.ToolCalls = marshal(calls)
	}
	if len(p.a.annotations) > 0 {
		delta.Annotations = marshal(p.a.annotations)
	}
	c := s.Chunk(p.at, &p.last)
	c.SystemFingerprint = p.a.fingerprint
	c.Choices = []ChunkChoice{{Delta: delta, Logprobs: wire.MergeLogprobs(p.a.logprobs)}}
	c.extra = nil
	r := c.Relay.(ChunkRelay)
	r.LogprobsGap = p.a.logprobsGap
	c.Relay = SnapshotRelay{ChunkRelay: r, Snapshot: true, Chunks: p.n}
	return c
}

// SnapshotRelay is the relay member of a snapshot chunk: the last chunk's
// place, and how many chunks it folds.
type SnapshotRelay struct {
	ChunkRelay
	Snapshot bool `json:"snapshot"`
	Chunks   int  `json:"chunks"`
}
