package worker

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/upstream"
	"github.com/relaydev/relay/relay/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// anthropicFramesGolden holds the frames of the Anthropic fixture; the
// edge's TestMessagesFromAnthropicProvider renders them back into it.
const anthropicFramesGolden = "testdata/anthropic_messages_full.frames.jsonl"

// TestAnthropicStreamFrames is the worker's step of the Anthropic
// pass-through golden test: the fixture (every event and field of a
// Messages stream), served by a provider of type anthropic and read as an
// attempt reads it, becomes the frames of anthropicFramesGolden, with
// nothing dropped: the signature after its thinking, the redacted
// thinking in a chunk of its own, the citations before the text of the
// block they start, the stop sequence and the cache counts in the end
// frame.
func TestAnthropicStreamFrames(t *testing.T) {
	fixture, err := os.ReadFile("../dialect/anthropic/testdata/messages_full.sse")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(fixture)
	}))
	t.Cleanup(srv.Close)
	stream, err := upstream.NewClient(nil).Stream(t.Context(), upstream.Target{Provider: "claude", BaseURL: srv.URL, Dialect: upstream.DialectAnthropic},
		[]byte(`{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"Is the grass green?"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stream.Close() })

	j := &job{attempts: 1}
	pub := newPublisher(nil, wire.Frame{Provider: "claude", Model: "claude-sonnet-4-5", Attempt: 1}, "")
	if err := j.read(streamAnswer{stream}, pub, provider.Price{}, nil); err != nil {
		t.Fatalf("read: %v", err)
	}
	frames := append(takeAll(t, pub), j.endFrame(outcome{finishReason: stream.FinishReason(), stopSequence: stream.StopSequence()}))
	frames[0].Role = "assistant" // as run marks a stream's first chunk
	var got bytes.Buffer
	for i := range frames {
		frames[i].Seq = uint64(i + 1)
		b, err := json.Marshal(frames[i])
		if err != nil {
			t.Fatal(err)
		}
		got.Write(append(b, '\n'))
	}
	if *update {
		if err := os.WriteFile(anthropicFramesGolden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(anthropicFramesGolden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("%s differs (-update rewrites it)\ngot:\n%s\nwant:\n%s", anthropicFramesGolden, got.Bytes(), want)
	}
}

// streamAnswer reads a stream as the answer of a call, without a race.
type streamAnswer struct{ *upstream.Stream }

func (s streamAnswer) next(d *chat.Delta) (err error) {
	*d, err = s.Next()
	return err
}
