package mockupstream

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"strings"
)

// vocabulary holds the tokens answers are made of, one list per script. Every
// answer mixes all four, so that a relay that splits, buffers or re-encodes
// text wrongly breaks umlauts, CJK or 4-byte emoji in the first test that
// looks. Every token is at least two runes long, so a continuation can start
// inside any token, and words carry their leading space as BPE tokens do.
var vocabulary = [...][]string{
	{" the", " relay", " stream", " token", " durable", " answer", " quick", " brown", " fox", " jumps", " over", " lazy", " dog", " and", " then", " again."},
	{" über", " Grüße", " Straße", " schön", " Mädchen", " Fußball", " Äpfel", " Öl", " müde", " weiß", " Übung", " Größe"},
	{"数据", "流式", "你好", "世界", "東京", "日本語", "中继", "令牌", "서울", "한국어"},
	{" 🚀", " 🎉", " 👍🏽", "🙂!", " 🦀", " 🌍", " ✨", " 🔥🔥", " 👩‍💻"},
}

// Answer returns the answer the mock gives to a conversation, as the list of
// tokens it streams. It is a pure function of the contents of the system,
// developer and user messages and of tokens: not of the model, so a fallback
// to another model continues the same answer, and not of assistant messages,
// so a continuation request has the same answer as the request it continues.
// Pass the messages of the original request, before any continuation was
// appended. Answer(m, n) is a prefix of Answer(m, n+k).
func Answer(messages []Message, tokens int) []string {
	return answerFor(digest(messages), tokens)
}

// AnswerText returns the concatenation of Answer(messages, tokens): the text
// a client has received once the stream has finished.
func AnswerText(messages []Message, tokens int) string {
	return strings.Join(Answer(messages, tokens), "")
}

// ConversationKey returns the key under which Stats counts the requests of
// the conversation made of messages, and by which times=K counts them. Like
// Answer, it depends only on system, developer and user messages, so pass
// the messages of the original request.
func ConversationKey(messages []Message) string {
	return conversationKey(digest(messages))
}

// Reasoning returns the reasoning the mock sends before the answer to a
// conversation with the directive reasoning=N: N tokens drawn like an
// answer's, but from a seed of their own, so that reasoning text is never
// a part of the answer.
func Reasoning(messages []Message, tokens int) []string {
	return reasoningFor(ConversationKey(messages), tokens)
}

func reasoningFor(key string, tokens int) []string {
	return answerFor(sha256.Sum256([]byte("reasoning:"+key)), tokens)
}

// tokenLogprobs is the logprobs entry of a token: a logprob that depends
// only on the token, and top alternatives drawn from the first script,
// each less likely than the one before.
func tokenLogprobs(token string, top int) tokenLogprob {
	lp := func(s string, rank int) tokenLogprob {
		b := make([]int, len(s))
		for i := range len(s) {
			b[i] = int(s[i])
		}
		return tokenLogprob{Token: s, Logprob: -float64(len(s)%5+1)/8 - float64(rank), Bytes: b}
	}
	t := lp(token, 0)
	t.TopLogprobs = []tokenLogprob{}
	for rank := range top {
		alt := token
		if rank > 0 {
			alt = vocabulary[0][rank%len(vocabulary[0])]
		}
		t.TopLogprobs = append(t.TopLogprobs, lp(alt, rank))
	}
	return t
}

// digest hashes the messages that decide the answer. Each field is
// length-prefixed so that moving text from one message to the next changes
// the hash.
func digest(messages []Message) [sha256.Size]byte {
	h := sha256.New()
	var n [8]byte
	for _, m := range messages {
		if !decidesAnswer(m.Role) {
			continue
		}
		for _, field := range [...]string{m.Role, m.Content} {
			binary.LittleEndian.PutUint64(n[:], uint64(len(field)))
			h.Write(n[:])
			h.Write([]byte(field))
		}
	}
	return [sha256.Size]byte(h.Sum(nil))
}

func conversationKey(d [sha256.Size]byte) string {
	return hex.EncodeToString(d[:8])
}

// answerFor draws the tokens from a PRNG seeded by the digest. Each group of
// four tokens holds one token of every script in a random order, so even a
// short answer mixes them all. Draws are sequential, so a longer answer
// extends a shorter one.
func answerFor(d [sha256.Size]byte, tokens int) []string {
	rng := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(d[0:8]), binary.LittleEndian.Uint64(d[8:16])))
	out := make([]string, 0, max(tokens, 0))
	for len(out) < tokens {
		for _, script := range rng.Perm(len(vocabulary)) {
			if len(out) == tokens {
				break
			}
			words := vocabulary[script]
			out = append(out, words[rng.IntN(len(words))])
		}
	}
	return out
}
