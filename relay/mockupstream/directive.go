package mockupstream

import (
	"errors"
	"fmt"
	"strings"
)

// The delimiters of a fault directive inside a user message.
const (
	directiveOpen  = "[[mock:"
	directiveClose = "]]"
)

// requestFaults returns the faults written as [[mock: ...]] directives in the
// user messages, and whether there was any directive at all: a request with
// one, even an empty [[mock:]], does not get the server-wide faults.
func requestFaults(messages []Message) (faults, bool, error) {
	var specs []string
	for _, m := range messages {
		if m.Role != roleUser {
			continue
		}
		text := m.Content
		for {
			_, after, ok := strings.Cut(text, directiveOpen)
			if !ok {
				break
			}
			spec, tail, ok := strings.Cut(after, directiveClose)
			if !ok {
				return faults{}, false, errors.New("unterminated " + directiveOpen + " directive: missing " + directiveClose)
			}
			specs = append(specs, spec)
			text = tail
		}
	}
	if len(specs) == 0 {
		return faults{}, false, nil
	}
	f, err := parseFaults(strings.Join(specs, ","))
	if err != nil {
		return faults{}, false, fmt.Errorf("invalid %s ...%s %w", directiveOpen, directiveClose, err)
	}
	return f, true, nil
}
