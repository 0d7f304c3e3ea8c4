package chat

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/wire"
)

// Shapes of the frames FuzzRenderChunk renders.
const (
	fuzzChunk  = iota // a chunk frame
	fuzzDone          // a done end frame
	fuzzFailed        // an end frame that is not done (encoding/json only)
	fuzzShapes
)

// Bits of FuzzRenderChunk's flags.
const (
	fuzzCached      = 1 << iota // the frame is a kept answer's
	fuzzGap                     // LogprobsGap
	fuzzUsage                   // the end frame has usage
	fuzzDetails                 // the usage has details
	fuzzToolCalls               // a raw member: encoding/json only
	fuzzChunkExtra              // a provider's unknown chunk member: encoding/json only
	fuzzLogprobs                // logprobs: encoding/json only
	fuzzResumeToken             // the first event of a POST's stream
)

// FuzzRenderChunk checks that a chunk rendered by hand (AppendObject) is
// byte for byte what encoding/json renders from the same frame, and that
// the common shapes take the hand-written path.
func FuzzRenderChunk(f *testing.F) {
	for _, s := range []struct {
		shape                                           uint8
		flags                                           uint8
		content, reasoning, model, provider, seam, name string
		seq, jsseq                                      uint64
		created                                         int64
		cost                                            float64
	}{
		{fuzzChunk, 0, "Hello", "", "gpt-4o-mini", "openai", "", "", 1, 17, 1700000000, 0},
		{fuzzChunk, fuzzResumeToken, "", "", "gpt-4o", "openai", "", "", 1, 3, 1700000000, 0},
		{fuzzChunk, fuzzCached | fuzzGap, `<b>"x" & y</b>\`, "think\n\tmore", "m", "p", "continuation", "", 9, 1 << 40, -1, 0},
		{fuzzChunk, 0, "\x00\x01\x08\x0c\x1f\x7f line\u2028para\u2029", "\xff\xfe bad utf-8 \xe2\x82", "m\u00e9", "\U0001F600", "retry", "", 2, 2, 0, 0},
		{fuzzChunk, fuzzToolCalls, "", "", "m", "p", "", "", 3, 30, 1, 0},
		{fuzzChunk, fuzzChunkExtra | fuzzLogprobs, "x", "", "m", "p", "", "", 4, 40, 1, 0},
		{fuzzDone, fuzzUsage, "", "", "gpt-4o-mini", "", "", "cached_tokens", 21, 210, 1700000000, 0.00042},
		{fuzzDone, fuzzUsage | fuzzDetails | fuzzResumeToken, "", "", "m", "", "", "reasoning<&>", 5, 50, 1, 1e-7},
		{fuzzDone, fuzzCached, "", "", "m", "", "", "", 6, 60, 1, 1e21},
		{fuzzDone, 0, "", "", "m", "", "", "", 6, 60, 1, math.Copysign(0, -1)},
		{fuzzDone, 0, "", "", "m", "", "", "", 6, 60, 1, 123456789.125},
		{fuzzFailed, fuzzUsage, "", "", "m", "", "", "", 7, 70, 1, 0.5},
	} {
		f.Add(s.shape, s.flags, s.content, s.reasoning, s.model, s.provider, s.seam, s.name, s.seq, s.jsseq, s.created, s.cost)
	}
	f.Fuzz(func(t *testing.T, shape, flags uint8, content, reasoning, model, provider, seam, name string,
		seq, jsseq uint64, created int64, cost float64) {
		s := Stream{ID: "01JD" + provider, Meta: wire.Meta{Model: model, Created: created}, Cursors: testCursors}
		f := fuzzFrame(shape%fuzzShapes, flags, content, reasoning, provider, seam, name, seq, cost)
		f.Model = model + reasoning
		c := wire.Cursor{Seq: f.Seq, JSSeq: jsseq}
		if flags&fuzzResumeToken != 0 {
			s.ResumeToken = "tok." + content
		}
		_, common := s.appendCommon(nil, c, &f)
		raw := flags&(fuzzToolCalls|fuzzChunkExtra|fuzzLogprobs) != 0
		finite := !math.IsNaN(cost) && !math.IsInf(cost, 0)
		wantCommon := shape%fuzzShapes == fuzzChunk && !raw || shape%fuzzShapes == fuzzDone && finite
		if common != wantCommon {
			t.Fatalf("rendered by hand: %v, want %v (shape %d, flags %08b, cost %v)", common, wantCommon, shape%fuzzShapes, flags, cost)
		}
		if !finite && shape%fuzzShapes != fuzzChunk {
			return // encoding/json refuses it too (marshal panics), and the edge never stores one
		}
		want := marshal(s.object(c, &f))
		if got := s.AppendObject([]byte("prefix"), c, &f); !bytes.Equal(got[len("prefix"):], want) || string(got[:len("prefix")]) != "prefix" {
			t.Fatalf("rendered by hand:\n%s\nencoding/json:\n%s", got, want)
		}
	})
}

// fuzzFrame builds a frame of shape from FuzzRenderChunk's inputs.
func fuzzFrame(shape, flags uint8, content, reasoning, provider, seam, name string, seq uint64, cost float64) wire.Frame {
	f := wire.Frame{Kind: wire.KindChunk, Seq: seq, Cached: flags&fuzzCached != 0}
	switch shape {
	case fuzzChunk:
		f.Content, f.Reasoning, f.Provider, f.Seam = content, reasoning, provider, wire.Seam(seam)
		f.Refusal = strings.Repeat(reasoning, int(flags>>6))
		f.Attempt = int(seq % 7)
		f.LogprobsGap = flags&fuzzGap != 0
		if seq%2 == 1 {
			f.Role, f.SystemFingerprint = "assistant", "fp_"+provider
		}
		if flags&fuzzToolCalls != 0 {
			f.ToolCalls = json.RawMessage(`[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]`)
		}
		if flags&fuzzChunkExtra != 0 {
			f.ChunkExtra = json.RawMessage(`{"service_tier":"default"}`)
		}
		if flags&fuzzLogprobs != 0 {
			f.Logprobs = json.RawMessage(`{"content":[],"refusal":null}`)
		}
		return f
	case fuzzDone:
		f.Kind, f.Status, f.FinishReason = wire.KindEnd, wire.StatusDone, seam
	default:
		f.Kind, f.Status = wire.KindEnd, wire.StatusFailed
		f.Error = &wire.Error{Message: content, Type: wire.TypeUpstream, Status: 502}
	}
	f.Cost, f.Attempts = cost, int(seq%5)
	if flags&fuzzUsage != 0 {
		n := int(seq % 1000)
		f.Usage = &wire.Usage{PromptTokens: n, CompletionTokens: 2 * n, TotalTokens: 3 * n}
		if flags&fuzzDetails != 0 {
			f.Usage.PromptTokensDetails = wire.TokenCounts{{Name: name, N: n}, {Name: "audio_tokens"}}
			f.Usage.CompletionTokensDetails = wire.TokenCounts{{Name: "reasoning_tokens", N: -n}}
			f.Usage.ServerToolUse = wire.TokenCounts{{Name: name + content, N: 1}}
		}
	}
	return f
}

// TestRenderAppendKnowsEveryField fails when a member is added to a type
// a chunk is rendered from: render_append.go renders each member by hand,
// and must learn the new one (FuzzRenderChunk then checks it).
func TestRenderAppendKnowsEveryField(t *testing.T) {
	for _, c := range []struct {
		v    any
		want []string
	}{
		{Chunk{}, []string{"id", "object", "created", "model", "system_fingerprint", "choices", "usage", "relay"}},
		{ChunkChoice{}, []string{"index", "delta", "logprobs", "finish_reason"}},
		{ChunkDelta{}, []string{"role", "content", "reasoning_content", "refusal", "tool_calls", "annotations"}},
		{ChunkRelay{}, []string{"stream_id", "seq", "cursor", "provider", "model", "requested_model", "attempt", "seam", "status", "logprobs_gap", "resume_token"}},
		{EndRelay{}, []string{"stream_id", "seq", "cursor", "status", "attempts", "cost", "requested_model", "resume_token"}},
		{wire.Usage{}, []string{"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details", "server_tool_use"}},
	} {
		typ := reflect.TypeOf(c.v)
		var got []string
		for f := range typ.Fields() {
			if f.IsExported() {
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				got = append(got, name)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s renders %v; render_append.go knows %v", typ, got, c.want)
		}
	}
}

// testCursors stands for a cluster's cursor key.
var testCursors = func() *wire.CursorKey {
	k, err := wire.NewCursorKey([]byte("0123456789abcdef"))
	if err != nil {
		panic(err)
	}
	return k
}()
