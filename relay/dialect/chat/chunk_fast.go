package chat

import (
	"encoding/json"
	"strings"
	"sync"

	"github.com/relaydev/relay/relay/jsonscan"
)

// parseChunkFast reads the shape nearly every chunk of every stream has —
// text members, one choice of index 0, a delta of text, tool calls or
// unknown members — in one pass over the bytes, without reflection, and
// copies what the Delta keeps in one allocation for all its text, one for
// its raw members and one for its unknown members, if it has any. A usage
// object, once per stream, is still decoded by encoding/json.
//
// ok is false for anything else: invalid JSON, an error payload, several
// choices, content as an array, escaped member names, a repeated chunk or
// choice member; parseChunkGeneral decides those. When ok, the Delta is
// the one parseChunkGeneral returns (FuzzParseChunkFast holds the two to
// it).
//
// It reads into d, which must be zero; when not ok, d holds whatever the
// path had set before it gave up.
func parseChunkFast(data []byte, d *Delta) bool {
	p := fastChunkPool.Get().(*fastChunk)
	defer p.release()
	p.data = data
	return p.chunk() && p.delta(d)
}

// fastChunkPool keeps fastChunks between parses. One is a few KiB of sets
// and spans: in the frame of the parse, which runs on a worker's job
// goroutine for every chunk, it would double the stack that goroutine
// keeps (relay/worker/stack.go).
var fastChunkPool = sync.Pool{New: func() any { return new(fastChunk) }}

// release drops p's references into the data it read and puts it back.
func (p *fastChunk) release() {
	clear(p.sets[:p.n])
	p.data, p.n, p.usage = nil, 0, nil
	fastChunkPool.Put(p)
}

// A fastTarget is the Delta member a value of the chunk goes to.
type fastTarget uint8

const (
	toModel fastTarget = iota
	toSystemFingerprint
	toFinishReason
	toRole
	toContent
	toRefusal
	toReasoning        // "reasoning": taken while Reasoning is still empty
	toReasoningContent // "reasoning_content": always taken
	toLogprobs
	toToolCalls
	toAnnotations
	toChunkExtra
	toChoiceExtra
	toDeltaExtra
)

// fastSet is one value for the Delta, applied in the order the chunk sent
// it, so a repeated delta member ends as parseChunkGeneral leaves it.
type fastSet struct {
	to fastTarget
	// value is the raw JSON value, nil for a text member's null and for a
	// raw member the Delta keeps as nil.
	value []byte
	// name is an extra's raw name.
	name []byte
}

// maxFastSets bounds the members one chunk may set before the fast path
// leaves it to the general one.
const maxFastSets = 24

// fastChunk is the state of one parseChunkFast: the values found, which
// delta copies out of the data once they are all known.
type fastChunk struct {
	data  []byte
	sets  [maxFastSets]fastSet
	n     int
	usage []byte // the raw usage object, nil when absent or null
	// spans are where delta wrote each set's name and text.
	spans [maxFastSets][2][2]int
}

// Bits of the members of a chunk and of a choice that must not repeat:
// parseChunkGeneral keeps only the last of each, where sets apply them all.
const (
	seenObject = 1 << iota
	seenModel
	seenSystemFingerprint
	seenChoices
	seenUsage
	seenError
	seenIndex
	seenDelta
	seenFinishReason
	seenLogprobs
)

// once marks bit in seen and returns i, or -1 when bit was marked
// before: a member that repeats is left to the general path.
func once(seen *int, bit, i int) int {
	if *seen&bit != 0 {
		return -1
	}
	*seen |= bit
	return i
}

// null reads a null at i; ok is false when the value there is not one
// (end is then the caller's to find).
func (p *fastChunk) null(i int) (end int, ok bool) {
	if i < len(p.data) && p.data[i] == 'n' {
		return jsonscan.Literal(p.data, i, "null"), true
	}
	return 0, false
}

// chunk reads the top-level object.
func (p *fastChunk) chunk() bool {
	i := jsonscan.SkipSpace(p.data, 0)
	var seen int
	i = p.object(i, func(name []byte, i int) int {
		bit := 0
		switch string(name) {
		case `"id"`, `"created"`, `"obfuscation"`, `"relay"`:
			return jsonscan.Value(p.data, i, 1)
		case `"object"`:
			bit, i = seenObject, p.objectType(i)
		case `"model"`:
			bit, i = seenModel, p.text1(i, toModel)
		case `"system_fingerprint"`:
			bit, i = seenSystemFingerprint, p.text1(i, toSystemFingerprint)
		case `"choices"`:
			bit, i = seenChoices, p.choices(i)
		case `"usage"`:
			bit = seenUsage
			end := jsonscan.Value(p.data, i, 1)
			if end > 0 && p.data[i] == '{' {
				p.usage = p.data[i:end]
			} else if end > 0 && p.data[i] != 'n' {
				return -1
			}
			i = end
		case `"error"`:
			bit, i = seenError, jsonscan.Literal(p.data, i, "null")
		default:
			return p.extra(toChunkExtra, name, i)
		}
		return once(&seen, bit, i)
	})
	return i >= 0 && jsonscan.SkipSpace(p.data, i) == len(p.data)
}

// objectType checks the chunk's object member: a string that says nothing
// of an error (vLLM's errors are {"object": "error", ...}), or null.
func (p *fastChunk) objectType(i int) int {
	if end, ok := p.null(i); ok {
		return end
	}
	end, escaped := jsonscan.String(p.data, i)
	if end < 0 || escaped || string(p.data[i:end]) == `"error"` {
		return -1
	}
	return end
}

// choices reads the choices array: null, empty, or choice 0 alone.
func (p *fastChunk) choices(i int) int {
	if end, ok := p.null(i); ok {
		return end
	}
	if i >= len(p.data) || p.data[i] != '[' {
		return -1
	}
	i = jsonscan.SkipSpace(p.data, i+1)
	if i < len(p.data) && p.data[i] == ']' {
		return i + 1
	}
	if i = p.choice(i); i < 0 {
		return -1
	}
	if i = jsonscan.SkipSpace(p.data, i); i >= len(p.data) || p.data[i] != ']' {
		return -1
	}
	return i + 1
}

// choice reads the one choice, which must be of index 0.
func (p *fastChunk) choice(i int) int {
	var seen int
	return p.object(i, func(name []byte, i int) int {
		bit := 0
		switch string(name) {
		case `"index"`:
			// Only a plain 0 is choice 0 here; a chunk of other choices
			// is for the general path.
			bit, i = seenIndex, jsonscan.Literal(p.data, i, "0")
		case `"delta"`:
			bit = seenDelta
			if end, ok := p.null(i); ok {
				i = end
			} else {
				i = p.object(i, p.deltaMember)
			}
		case `"finish_reason"`:
			bit, i = seenFinishReason, p.text1(i, toFinishReason)
		case `"logprobs"`:
			bit, i = seenLogprobs, p.raw1(i, toLogprobs, false)
		default:
			return p.extra(toChoiceExtra, name, i)
		}
		return once(&seen, bit, i)
	})
}

// deltaMember reads one member of choice 0's delta, as
// Delta.deltaMember does.
func (p *fastChunk) deltaMember(name []byte, i int) int {
	switch string(name) {
	case `"role"`:
		return p.text1(i, toRole)
	case `"content"`:
		return p.text1(i, toContent)
	case `"refusal"`:
		return p.text1(i, toRefusal)
	case `"tool_calls"`:
		return p.raw1(i, toToolCalls, true)
	case `"annotations"`:
		return p.raw1(i, toAnnotations, true)
	case `"reasoning_content"`, `"reasoning"`:
		if i < len(p.data) && p.data[i] != '"' && p.data[i] != 'n' {
			// Not text: some other use of the name, kept as it came.
			return p.extra(toDeltaExtra, name, i)
		}
		to := toReasoning
		if string(name) == `"reasoning_content"` {
			to = toReasoningContent
		}
		return p.text1(i, to)
	}
	return p.extra(toDeltaExtra, name, i)
}

// object reads the object at data[i], calling member with each raw name
// (quotes included) and the index of its value; member returns the index
// after the value, or -1. Escaped names are left to the general path,
// which compares names as raw bytes and would see them as unknown.
func (p *fastChunk) object(i int, member func(name []byte, i int) int) int {
	if i >= len(p.data) || p.data[i] != '{' {
		return -1
	}
	i = jsonscan.SkipSpace(p.data, i+1)
	if i < len(p.data) && p.data[i] == '}' {
		return i + 1
	}
	for {
		end, escaped := jsonscan.String(p.data, i)
		if end < 0 || escaped {
			return -1
		}
		name := p.data[i:end]
		if i = jsonscan.SkipSpace(p.data, end); i >= len(p.data) || p.data[i] != ':' {
			return -1
		}
		if i = member(name, jsonscan.SkipSpace(p.data, i+1)); i < 0 {
			return -1
		}
		switch i = jsonscan.SkipSpace(p.data, i); {
		case i >= len(p.data):
			return -1
		case p.data[i] == '}':
			return i + 1
		case p.data[i] != ',':
			return -1
		}
		i = jsonscan.SkipSpace(p.data, i+1)
	}
}

// text1 reads a string or null for the Delta's text member to.
func (p *fastChunk) text1(i int, to fastTarget) int {
	set, ok := p.set(to)
	if !ok {
		return -1
	}
	if end, ok := p.null(i); ok {
		return end
	}
	end, _ := jsonscan.String(p.data, i)
	if end < 0 {
		return -1
	}
	set.value = p.data[i:end]
	return end
}

// raw1 reads any value for the Delta's raw member to: kept unless null
// (or, for an array member, empty; see nonEmptyArray).
func (p *fastChunk) raw1(i int, to fastTarget, array bool) int {
	set, ok := p.set(to)
	if !ok {
		return -1
	}
	end := jsonscan.Value(p.data, i, 1)
	if end < 0 {
		return -1
	}
	if v := p.data[i:end]; !isNull(v) && (!array || nonEmptyArray(v) != nil) {
		set.value = v
	}
	return end
}

// extra keeps an unknown member, as field does.
func (p *fastChunk) extra(to fastTarget, name []byte, i int) int {
	set, ok := p.set(to)
	if !ok {
		return -1
	}
	end := jsonscan.Value(p.data, i, 1)
	if end < 0 {
		return -1
	}
	set.name, set.value = name, p.data[i:end]
	return end
}

// set returns the next fastSet, false when there is no room left.
func (p *fastChunk) set(to fastTarget) (*fastSet, bool) {
	if p.n == len(p.sets) {
		return nil, false
	}
	s := &p.sets[p.n]
	*s = fastSet{to: to}
	p.n++
	return s, true
}

// delta builds the Delta from the sets: all its text is one string, its
// raw members one slice and its extras one []Field, each allocated at its
// size.
func (p *fastChunk) delta(d *Delta) bool {
	if p.usage != nil {
		d.Usage = &Usage{}
		if err := json.Unmarshal(p.usage, d.Usage); err != nil {
			return false
		}
	}
	// Decoded text is no longer than its source, but where a byte of
	// invalid UTF-8 becomes U+FFFD (the Builder grows then).
	var textLen, rawLen int
	var nExtra [3]int
	for _, s := range p.sets[:p.n] {
		if s.to < toLogprobs {
			textLen += len(s.value)
			continue
		}
		rawLen += len(s.value)
		if s.to >= toChunkExtra {
			textLen += len(s.name)
			nExtra[s.to-toChunkExtra]++
		}
	}
	var (
		b   strings.Builder
		raw []byte
	)
	spans := &p.spans
	b.Grow(textLen)
	if rawLen > 0 {
		raw = make([]byte, 0, rawLen)
	}
	for k, s := range p.sets[:p.n] {
		spans[k] = [2][2]int{}
		if s.name != nil {
			spans[k][0] = writeSpan(&b, s.name[1:len(s.name)-1])
		}
		if s.to < toLogprobs && s.value != nil {
			spans[k][1] = writeSpan(&b, s.value[1:len(s.value)-1])
		}
	}
	text := b.String()
	var fields []Field
	if n := nExtra[0] + nExtra[1] + nExtra[2]; n > 0 {
		fields = make([]Field, 0, n)
	}
	extras := [3]*[]Field{&d.ChunkExtra, &d.ChoiceExtra, &d.DeltaExtra}
	for k, n := range nExtra {
		if n > 0 {
			*extras[k] = fields[len(fields) : len(fields) : len(fields)+n]
			fields = fields[:len(fields)+n]
		}
	}
	for k, s := range p.sets[:p.n] {
		t := text[spans[k][1][0]:spans[k][1][1]]
		var r json.RawMessage
		if s.to >= toLogprobs && s.value != nil {
			raw = append(raw, s.value...)
			r = raw[len(raw)-len(s.value) : len(raw) : len(raw)]
		}
		switch s.to {
		case toModel:
			d.Model = t
		case toSystemFingerprint:
			d.SystemFingerprint = t
		case toFinishReason:
			d.FinishReason = t
		case toRole:
			d.Role = t
		case toContent:
			d.Content = t
		case toRefusal:
			d.Refusal = t
		case toReasoning:
			if d.Reasoning == "" {
				d.Reasoning = t
			}
		case toReasoningContent:
			d.Reasoning = t
		case toLogprobs:
			d.Logprobs = r
		case toToolCalls:
			d.ToolCalls = r
		case toAnnotations:
			d.Annotations = r
		default:
			e := extras[s.to-toChunkExtra]
			*e = append(*e, Field{Name: text[spans[k][0][0]:spans[k][0][1]], Value: r})
		}
	}
	return true
}

// writeSpan writes the decoded JSON string of body (what is between its
// quotes) to b and returns where.
func writeSpan(b *strings.Builder, body []byte) [2]int {
	start := b.Len()
	jsonscan.Unquote(b, body)
	return [2]int{start, b.Len()}
}
