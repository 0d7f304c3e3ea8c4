package anthropic

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"testing"
	"unicode/utf8"

	"github.com/relaydev/relay/relay/dialect/chat"
)

// FuzzDecoder: provider events come from outside. Whatever their data,
// the Decoder never panics, yields a Delta or one of the errors a stream
// reader knows (ErrNoDelta, io.EOF, ErrMalformed, the provider's
// *chat.Error), never both, and its raw members are JSON arrays.
func FuzzDecoder(f *testing.F) {
	fixture, err := os.ReadFile("testdata/messages_full.sse")
	if err != nil {
		f.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(fixture))
	for sc.Scan() {
		if data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
			f.Add(bytes.Clone(data), " \n")
		}
	}
	f.Add([]byte(`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"  hi"}}`), "  ")
	f.Add([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"x"}}`), "")
	f.Fuzz(func(t *testing.T, data []byte, trimmed string) {
		if !utf8.ValidString(trimmed) {
			return
		}
		dec := NewDecoder(trimmed)
		// Twice, so that state from the first event meets the second.
		for range 2 {
			d, err := dec.Decode("", data)
			var pe *chat.Error
			switch {
			case err == nil:
			case errors.Is(err, chat.ErrNoDelta), errors.Is(err, io.EOF), errors.Is(err, chat.ErrMalformed), errors.As(err, &pe):
				if d.HasContent() || d.FinishReason != "" || d.Usage != nil {
					t.Fatalf("Delta %+v with error %v", d, err)
				}
			default:
				t.Fatalf("error %v of no kind a stream reader knows", err)
			}
			for _, raw := range []json.RawMessage{d.ToolCalls, d.Citations, d.Annotations} {
				var a []json.RawMessage
				if raw != nil && json.Unmarshal(raw, &a) != nil {
					t.Fatalf("%s is not a JSON array", raw)
				}
			}
		}
	})
}
