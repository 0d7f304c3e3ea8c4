package main

// tokenCounter counts the tokens of one stream's answer whose last byte has
// arrived, whatever the chunks that carried them: a chunk may carry
// several tokens (coalesced) or end inside one.
type tokenCounter struct {
	ends     []int // conversation.tokenEnds
	received int   // content bytes so far
	counted  int   // tokens complete so far
}

func newTokenCounter(conv conversation) *tokenCounter {
	return &tokenCounter{ends: conv.tokenEnds()}
}

// add takes one event's content and returns how many tokens it completed.
func (t *tokenCounter) add(content string) int {
	t.received += len(content)
	n := t.counted
	for n < len(t.ends) && t.ends[n] <= t.received {
		n++
	}
	done := n - t.counted
	t.counted = n
	return done
}
