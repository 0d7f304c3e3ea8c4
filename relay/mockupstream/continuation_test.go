package mockupstream

import (
	"slices"
	"testing"
	"unicode/utf8"
)

// TestPrefillContinuationIsExact continues the answer from every rune
// boundary, token boundaries and points inside tokens alike.
func TestPrefillContinuationIsExact(t *testing.T) {
	const tokens = 8
	s, ts := newTestServer(t, fullSpeed(tokens))
	msgs := conv("continue me")
	answer := Answer(msgs, tokens)
	full := AnswerText(msgs, tokens)
	requests := 0
	for cut := 0; cut <= len(full); {
		prefix := full[:cut]
		r := stream(t, ts, chatBody(true, with(msgs, Message{Role: roleAssistant, Content: prefix})))
		requests++
		if got := prefix + r.text(); got != full {
			t.Fatalf("cut %d: prefix+streamed = %q, want %q", cut, got, full)
		}
		// A continuation streams the tokens not yet complete: the partial
		// one, if any, then the rest.
		wantChunks := tokens - completeTokens(answer, cut)
		if len(r.content()) != wantChunks || r.usage() == nil || r.usage().CompletionTokens != wantChunks {
			t.Fatalf("cut %d: %d chunks, usage %+v; want %d", cut, len(r.content()), r.usage(), wantChunks)
		}
		if r.finish() != "stop" || !r.done {
			t.Fatalf("cut %d: finish %q, done %v", cut, r.finish(), r.done)
		}
		if cut == len(full) {
			break
		}
		_, size := utf8.DecodeRuneInString(full[cut:])
		cut += size
	}
	if got := s.Stats().ByConversation[ConversationKey(msgs)]; got != requests {
		t.Fatalf("continuations counted %d times under the conversation key, want %d", got, requests)
	}
}

// completeTokens counts the tokens that lie entirely in the first cut bytes.
func completeTokens(answer []string, cut int) int {
	n := 0
	for i, tok := range answer {
		n += len(tok)
		if n > cut {
			return i
		}
	}
	return len(answer)
}

func TestPrefillThatIsNotAPrefixGetsWholeAnswer(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(6))
	msgs := conv("mismatch")
	r := stream(t, ts, chatBody(true, with(msgs, Message{Role: roleAssistant, Content: "not the answer"})))
	if want := AnswerText(msgs, 6); r.text() != want {
		t.Fatalf("text = %q, want %q", r.text(), want)
	}
}

func TestContinuationOnFallbackModel(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(10))
	msgs := conv("fallback")
	full := AnswerText(msgs, 10)
	answer := Answer(msgs, 10)
	_, size := utf8.DecodeRuneInString(answer[1])
	prefix := answer[0] + answer[1][:size] // inside the second token
	body := chatBody(true, with(msgs, Message{Role: roleAssistant, Content: prefix}))
	body["model"] = "mock-2"
	r := stream(t, ts, body)
	if prefix+r.text() != full {
		t.Fatalf("mock-2 continued %q with %q, want the rest of %q", prefix, r.text(), full)
	}
	if r.chunks[0].Model != "mock-2" {
		t.Fatalf("model = %q, want mock-2", r.chunks[0].Model)
	}
}

func TestPromptModeContinuation(t *testing.T) {
	s, ts := newTestServer(t, fullSpeed(10))
	msgs := conv("prompt mode")
	answer := Answer(msgs, 10)
	full := AnswerText(msgs, 10)
	for _, cut := range []int{len(answer[0]), len(answer[0]) + len(answer[1]) + 1, len(full) - 1} {
		prefix := full[:cut]
		cont := with(msgs,
			Message{Role: roleAssistant, Content: prefix},
			Message{Role: roleUser, Content: "Continue exactly where you stopped."})
		r := stream(t, ts, chatBody(true, cont))
		if prefix+r.text() != full {
			t.Fatalf("cut %d: prefix+streamed = %q, want %q", cut, prefix+r.text(), full)
		}
	}
	if got := s.Stats().ByConversation[ConversationKey(msgs)]; got != 3 {
		t.Fatalf("prompt-mode requests counted %d times under the conversation key, want 3", got)
	}
}

// A whole answer followed by a user message is the next turn of a chat,
// not a continuation: it gets a fresh answer.
func TestWholeAnswerThenUserMessageIsNewTurn(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(10))
	first := conv("first")
	turn2 := with(first,
		Message{Role: roleAssistant, Content: AnswerText(first, 10)},
		Message{Role: roleUser, Content: "and now?"})
	r := stream(t, ts, chatBody(true, turn2))
	if want := AnswerText(turn2, 10); r.text() != want || want == AnswerText(first, 10) {
		t.Fatalf("text = %q, want the fresh answer %q", r.text(), want)
	}
}

func TestPromptModeWithForeignAssistantIsNewTurn(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(10))
	turn2 := with(conv("first"),
		Message{Role: roleAssistant, Content: "something the mock never said"},
		Message{Role: roleUser, Content: "second"})
	r := stream(t, ts, chatBody(true, turn2))
	if want := AnswerText(turn2, 10); r.text() != want {
		t.Fatalf("text = %q, want the answer to the whole conversation %q", r.text(), want)
	}
}

func TestRestAndLastRunes(t *testing.T) {
	tokens := []string{" ab", "äö", " 🚀"}
	for prefix, want := range map[string][]string{
		"":        {" ab", "äö", " 🚀"},
		" a":      {"b", "äö", " 🚀"},
		" abä":    {"ö", " 🚀"},
		" abäö":   {" 🚀"},
		" abäö 🚀": nil,
	} {
		if got := rest(tokens, prefix); !slices.Equal(got, want) {
			t.Errorf("rest(%q) = %q, want %q", prefix, got, want)
		}
	}
	for n, want := range map[int]string{0: "", 1: "🚀", 3: "ö 🚀", 9: "aäö 🚀"} {
		if got := lastRunes("aäö 🚀", n); got != want {
			t.Errorf("lastRunes(%d) = %q, want %q", n, got, want)
		}
	}
}
