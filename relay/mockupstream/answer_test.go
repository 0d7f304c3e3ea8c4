package mockupstream

import (
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestAnswerIsDeterministic(t *testing.T) {
	msgs := conv("Tell me about relays.")
	a, b := Answer(msgs, 40), Answer(conv("Tell me about relays."), 40)
	if !slices.Equal(a, b) {
		t.Fatalf("same conversation, different answers:\n%q\n%q", a, b)
	}
	if len(a) != 40 {
		t.Fatalf("len = %d, want 40", len(a))
	}
	if other := Answer(conv("Tell me about brokers."), 40); slices.Equal(a, other) {
		t.Fatal("different user messages gave the same answer")
	}
	if other := Answer([]Message{{Role: roleUser, Content: "You are a mock."}, {Role: roleUser, Content: "Tell me about relays."}}, 40); slices.Equal(a, other) {
		t.Fatal("the role of a message does not change the answer")
	}
}

func TestAnswerIgnoresAssistantMessages(t *testing.T) {
	msgs := conv("Hi")
	withAssistant := with(msgs, Message{Role: roleAssistant, Content: "anything"})
	if !slices.Equal(Answer(msgs, 20), Answer(withAssistant, 20)) {
		t.Fatal("an assistant message changed the answer")
	}
	if ConversationKey(msgs) != ConversationKey(withAssistant) {
		t.Fatal("an assistant message changed the conversation key")
	}
	if ConversationKey(msgs) == ConversationKey(conv("Ho")) {
		t.Fatal("different conversations share a key")
	}
}

func TestAnswerGrowsByExtension(t *testing.T) {
	msgs := conv("extension")
	long := Answer(msgs, 50)
	for n := range 50 {
		if short := Answer(msgs, n); !slices.Equal(short, long[:n]) {
			t.Fatalf("Answer(m, %d) is not a prefix of Answer(m, 50)", n)
		}
	}
}

func TestAnswerTokensAreValidMixedUTF8(t *testing.T) {
	for _, user := range []string{"a", "b", "Grüß Gott", "你好", "🚀"} {
		tokens := Answer(conv(user), 8)
		for _, tok := range tokens {
			if !utf8.ValidString(tok) || utf8.RuneCountInString(tok) < 2 {
				t.Errorf("token %q: want valid UTF-8 of at least two runes", tok)
			}
		}
		text := strings.Join(tokens, "")
		if text != AnswerText(conv(user), 8) {
			t.Errorf("AnswerText differs from the joined Answer")
		}
		scripts := map[string]func(rune) bool{
			"ASCII letter": func(r rune) bool { return r < utf8.RuneSelf && unicode.IsLetter(r) },
			"umlaut or ß":  func(r rune) bool { return strings.ContainsRune("äöüÄÖÜß", r) },
			"CJK":          func(r rune) bool { return unicode.In(r, unicode.Han, unicode.Hangul, unicode.Hiragana) },
			"4-byte emoji": func(r rune) bool { return utf8.RuneLen(r) == 4 },
		}
		for name, is := range scripts {
			if !strings.ContainsFunc(text, is) {
				t.Errorf("answer %q to %q has no %s", text, user, name)
			}
		}
	}
}
