package mockupstream

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// claudeAnswer is what a Messages answer says beyond a chat reply: the
// thinking block's signature, the stop sequence that cut the answer, and
// the prompt cache's counts, so that a relay in front of the mock sees
// everything Anthropic sends.
type claudeAnswer struct {
	reply
	// signature signs the thinking (reply.reasoning), when there is some.
	signature string
	// stopSequence is the request's stop sequence that ended the answer.
	stopSequence string
	usage        claudeUsage
}

// newClaudeAnswer completes rep for a Messages request: the answer stops
// before the first of stopSequences it holds, and with the reasoning
// directive the thinking is signed and the usage has cache counts: the
// tokens of the messages before the last are written to the cache by the
// first request of a conversation, read from it by a continuation.
func newClaudeAnswer(rep reply, msgs []Message, stopSequences []string) claudeAnswer {
	a := claudeAnswer{reply: rep}
	a.cutAtStop(stopSequences)
	prompt := rep.usage.PromptTokens
	if d := rep.usage.PromptTokensDetails; d != nil {
		a.signature = signature(strings.Join(rep.reasoning, ""))
		a.usage.CacheReadInputTokens = d.CachedTokens
		if d.CachedTokens == 0 {
			a.usage.CacheCreationInputTokens = promptTokens(msgs[:len(msgs)-1])
		}
	}
	a.usage.InputTokens = prompt - a.usage.CacheReadInputTokens - a.usage.CacheCreationInputTokens
	a.usage.OutputTokens = a.reply.usage.CompletionTokens
	return a
}

// cutAtStop ends the answer before the earliest stop sequence it holds,
// as Anthropic does (the sequence itself is not sent).
func (a *claudeAnswer) cutAtStop(stopSequences []string) {
	text := strings.Join(a.tokens, "")
	at := -1
	for _, s := range stopSequences {
		if i := strings.Index(text, s); s != "" && i >= 0 && (at < 0 || i < at) {
			at, a.stopSequence = i, s
		}
	}
	if at < 0 {
		return
	}
	var kept []string
	for n := 0; n < at; {
		tok := a.tokens[len(kept)]
		if n+len(tok) > at {
			tok = tok[:at-n]
		}
		kept = append(kept, tok)
		n += len(tok)
	}
	a.reply.usage.CompletionTokens -= len(a.tokens) - len(kept)
	a.reply.usage.TotalTokens -= len(a.tokens) - len(kept)
	a.tokens, a.finish = kept, "stop"
}

// stopReason is the answer's stop reason.
func (a claudeAnswer) stopReason() *string {
	if a.stopSequence != "" {
		return ptr("stop_sequence")
	}
	return claudeStop(a.finish)
}

// stopSeq is the answer's stop_sequence, null unless one stopped it.
func (a claudeAnswer) stopSeq() *string {
	if a.stopSequence == "" {
		return nil
	}
	return &a.stopSequence
}

// signature stands for Anthropic's signature of a thinking block: opaque,
// and the same for the same thinking.
func signature(thinking string) string {
	sum := sha256.Sum256([]byte("signature:" + thinking))
	return base64.StdEncoding.EncodeToString(sum[:])
}
