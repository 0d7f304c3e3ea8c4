package upstream

import (
	"errors"
	"github.com/relaydev/relay/relay/dialect/chat"
	"regexp"
	"strconv"
	"strings"
)

// TooLong reports whether err is a provider saying that the request does
// not fit the model's context window: a request fault for this model that a
// model with a larger window may answer. needed is the number of tokens the
// provider said the request takes (prompt plus the requested output), zero
// when its message does not say.
//
// The shapes recognised: OpenAI's code context_length_exceeded (chat and
// Responses, in a non-2xx body or mid-stream), vLLM's "maximum context
// length" message, llama.cpp's exceed_context_size_error type, and
// Anthropic's invalid_request_error "prompt is too long" and "exceed
// context limit".
func TooLong(err error) (needed int, ok bool) {
	var e chat.Error
	if se := (*StatusError)(nil); errors.As(err, &se) {
		if se.Status != 400 && se.Status != 413 {
			return 0, false
		}
		e = se.Err
	} else if oe := (*chat.Error)(nil); errors.As(err, &oe) {
		e = *oe
	} else {
		return 0, false
	}
	msg := strings.ToLower(e.Message)
	switch {
	case e.Code == "context_length_exceeded", e.Type == "exceed_context_size_error",
		strings.Contains(msg, "maximum context length"),
		strings.Contains(msg, "prompt is too long"),
		strings.Contains(msg, "exceed context limit"):
		return neededTokens(msg), true
	}
	return 0, false
}

// The token counts providers put in their messages:
//
//	"... However, your messages resulted in 9000 tokens."       (OpenAI)
//	"... However, you requested 5000 tokens (4000 in the ..."   (vLLM)
//	"prompt is too long: 208310 tokens > 200000 maximum"        (Anthropic)
//	"input length and `max_tokens` exceed context limit: 197626 + 21333 > 200000"
var (
	resultedIn = regexp.MustCompile(`(?:resulted in|requested) (\d+) tokens`)
	overMax    = regexp.MustCompile(`(\d+) tokens > \d+`)
	sumOverMax = regexp.MustCompile(`(\d+) \+ (\d+) > \d+`)
)

// neededTokens is the token count a lower-cased message gives, 0 if none.
func neededTokens(msg string) int {
	if m := sumOverMax.FindStringSubmatch(msg); m != nil {
		a, _ := strconv.Atoi(m[1])
		b, _ := strconv.Atoi(m[2])
		return a + b
	}
	for _, re := range []*regexp.Regexp{resultedIn, overMax} {
		if m := re.FindStringSubmatch(msg); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
	}
	return 0
}
