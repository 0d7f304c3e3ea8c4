package mockupstream

import (
	"strings"
	"unicode/utf8"
)

// conversation is what the mock makes of a request's messages: which answer
// it owes, under which key it counts the request, and how much of the answer
// the client already has.
type conversation struct {
	key    string
	answer []string
	// prefix is the part of the answer the client sent back as an assistant
	// message; the response streams what follows it.
	prefix string
	// ignoredPrefill is set when the request ended with an assistant message
	// that is not a prefix of the answer; the mock then answers from the
	// start, which shows up in a test as duplicated text.
	ignoredPrefill bool
}

// resolveConversation recognises the two ways a client asks a model to
// continue an answer that was cut off:
//
//   - prefill: the last message is an assistant message holding the text so
//     far;
//   - prompt mode: an assistant message holding the text so far is followed by
//     one final user message asking to continue (in any wording). This only
//     counts when that text is a non-empty, strict prefix of the answer to
//     the messages before it; otherwise the user message starts a new turn,
//     so a multi-turn chat (whose assistant messages are whole answers) gets
//     a fresh answer on every turn.
//
// Either way the answer and the key come from the messages before the
// assistant message, so they are those of the request being continued.
func resolveConversation(messages []Message, tokens int) conversation {
	n := len(messages)
	if n >= 1 && messages[n-1].Role == roleAssistant {
		c := continueFrom(messages[:n-1], tokens, messages[n-1].Content)
		if c.prefix != messages[n-1].Content {
			c.ignoredPrefill = true
		}
		return c
	}
	if n >= 2 && messages[n-1].Role == roleUser && messages[n-2].Role == roleAssistant && messages[n-2].Content != "" {
		c := continueFrom(messages[:n-2], tokens, messages[n-2].Content)
		if c.prefix != "" && c.prefix != strings.Join(c.answer, "") {
			return c
		}
	}
	return continueFrom(messages, tokens, "")
}

// continueFrom computes the answer to history and keeps prefix only if the
// answer starts with it.
func continueFrom(history []Message, tokens int, prefix string) conversation {
	d := digest(history)
	c := conversation{key: conversationKey(d), answer: answerFor(d, tokens)}
	if strings.HasPrefix(strings.Join(c.answer, ""), prefix) {
		c.prefix = prefix
	}
	return c
}

// rest returns the tokens that follow prefix, which must be a prefix of
// their concatenation. When prefix ends inside a token, the rest of that
// token comes first, so prefix plus the result is exactly the answer.
func rest(tokens []string, prefix string) []string {
	n := len(prefix)
	for i, tok := range tokens {
		if n < len(tok) {
			return append([]string{tok[n:]}, tokens[i+1:]...)
		}
		n -= len(tok)
	}
	return nil
}

// lastRunes returns the last n runes of s, or all of s if it is shorter.
func lastRunes(s string, n int) string {
	i := len(s)
	for ; n > 0 && i > 0; n-- {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return s[i:]
}
