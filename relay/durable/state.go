package durable

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/relaydev/relay/relay/wire"
)

// state is what a stream's frames carry in wire.Frame.Durable: the writer
// state after the frame, so that the last frame alone tells how the next
// append is checked.
type state struct {
	// Producers are the idempotent producers' epochs and last sequences.
	Producers map[string]producer `json:"producers,omitempty"`
	// StreamSeq is the last Stream-Seq an append carried.
	StreamSeq string `json:"stream_seq,omitempty"`
	// Messages counts the JSON messages of a chunk of a JSON stream.
	Messages int `json:"messages,omitempty"`
	// Tail is the stream's tail where the frame itself is not data: the
	// fork point on a fork's claim, the last data on an end frame (a
	// closure moves no offset).
	Tail *wire.Offset `json:"tail,omitempty"`
	// Closer is the producer append that closed the stream, on its end
	// frame, so that a retry of it is a duplicate rather than a conflict.
	Closer *Producer `json:"closer,omitempty"`
	// Append is random, one per append: two edges storing the same
	// producer's retried batch at once write different frames, so the one
	// whose frame was not stored learns it (chunklog.Writer tells an
	// append refused for another's from its own stored by its bytes).
	Append string `json:"append,omitempty"`
}

type producer struct {
	Epoch uint64 `json:"epoch"`
	Seq   uint64 `json:"seq"`
}

// Producer is an append's Producer-Id, Producer-Epoch and Producer-Seq.
type Producer struct {
	ID    string `json:"id"`
	Epoch uint64 `json:"epoch"`
	Seq   uint64 `json:"seq"`
}

// stateOf reads the state a frame carries; a frame without one (a
// generation's) has the empty state.
func stateOf(f wire.Frame) (state, error) {
	var st state
	if len(f.Durable) == 0 {
		return st, nil
	}
	if err := json.Unmarshal(f.Durable, &st); err != nil {
		return state{}, fmt.Errorf("durable: state of frame %d: %w", f.Seq, err)
	}
	return st, nil
}

// newAppendID returns a fresh state.Append.
func newAppendID() string {
	var b [8]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (st state) encode() json.RawMessage {
	b, err := json.Marshal(st)
	if err != nil {
		panic(fmt.Sprintf("durable: encode state: %v", err))
	}
	return b
}

// next is the writer state after an accepted append: st's producers and
// Stream-Seq, with the append's.
func (st state) next(p *Producer, streamSeq string) state {
	n := state{StreamSeq: st.StreamSeq}
	if streamSeq != "" {
		n.StreamSeq = streamSeq
	}
	if len(st.Producers) > 0 || p != nil {
		n.Producers = make(map[string]producer, len(st.Producers)+1)
		for id, s := range st.Producers {
			n.Producers[id] = s
		}
		if p != nil {
			n.Producers[p.ID] = producer{Epoch: p.Epoch, Seq: p.Seq}
		}
	}
	return n
}

// Verdict is the check of a producer's append against the state.
type Verdict int

const (
	// Accept: the next append of the producer (or the first of an epoch).
	Accept Verdict = iota
	// Duplicate: the producer's append is stored already (204).
	Duplicate
	// StaleEpoch: an older epoch than the producer's current one (403).
	StaleEpoch
	// SeqGap: a sequence past the next one (409).
	SeqGap
	// BadEpochStart: a new epoch that does not start at sequence 0 (400).
	BadEpochStart
)

// ProducerError refuses a producer's append; Verdict says why, Epoch is
// the producer's current epoch and Expected the sequence it must send next.
type ProducerError struct {
	Verdict  Verdict
	Epoch    uint64
	Expected uint64
	Received uint64
}

func (e *ProducerError) Error() string {
	switch e.Verdict {
	case StaleEpoch:
		return fmt.Sprintf("producer epoch is stale: the current epoch is %d", e.Epoch)
	case SeqGap:
		return fmt.Sprintf("producer sequence gap: expected %d, received %d", e.Expected, e.Received)
	default:
		return fmt.Sprintf("a new producer epoch must start at sequence 0, not %d", e.Received)
	}
}

// check judges p's append against the producers' state: the validation of
// the protocol's idempotent producers, with a producer never seen as one
// whose epoch is below every epoch. It returns the verdict and the
// producer's highest accepted sequence for a Duplicate.
func (st state) check(p Producer) (Verdict, uint64) {
	cur, known := st.Producers[p.ID]
	switch {
	case !known || p.Epoch > cur.Epoch:
		if p.Seq != 0 {
			if !known {
				return SeqGap, 0
			}
			return BadEpochStart, 0
		}
		return Accept, 0
	case p.Epoch < cur.Epoch:
		return StaleEpoch, 0
	case p.Seq <= cur.Seq:
		return Duplicate, cur.Seq
	case p.Seq == cur.Seq+1:
		return Accept, 0
	}
	return SeqGap, 0
}
