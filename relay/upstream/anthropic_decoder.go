package upstream

import (
	"github.com/relaydev/relay/relay/dialect/anthropic"
	"github.com/relaydev/relay/relay/dialect/chat"
)

// anthropicDecoder reads an Anthropic provider's events with the
// dialect's Decoder.
type anthropicDecoder struct{ *anthropic.Decoder }

func newAnthropicDecoder(trimmed string) anthropicDecoder {
	return anthropicDecoder{anthropic.NewDecoder(trimmed)}
}

func (d anthropicDecoder) decode(ev Event) (chat.Delta, error) {
	return d.Decode(ev.Event, ev.Data)
}

// toolBlock is a tool call being streamed, of the Responses decoder
// (responses_stream.go): its chat index, and whether argument text came
// for it.
type toolBlock struct {
	index   int
	hasArgs bool
}
