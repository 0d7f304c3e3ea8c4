package provider

import "fmt"

// Continuation is how the relay asks a provider to continue an answer that
// was cut: the request is sent again with the text already published, and
// the provider is asked to go on from there.
type Continuation string

const (
	// Prefill sends the partial answer as a final assistant message, which
	// the model extends. Most precise, but not every provider accepts an
	// assistant message last; one that answers 400 to it makes the request
	// switch to Prompt.
	Prefill Continuation = "prefill"
	// Prompt sends the partial answer as an assistant message followed by
	// a user message (ContinuePrompt) asking to continue exactly where it
	// stopped. Models may then repeat a little; the relay strips the
	// repeat.
	Prompt Continuation = "prompt"
)

// DefaultContinuePrompt is the user message of prompt-mode continuations.
const DefaultContinuePrompt = "Your previous message was cut off. Continue it exactly where it stopped, " +
	"starting with the very next character: do not repeat anything, do not add a preamble."

func (c Continuation) validate(key string) error {
	switch c {
	case "", Prefill, Prompt:
		return nil
	}
	return fmt.Errorf("%s: %q is not prefill or prompt", key, c)
}
