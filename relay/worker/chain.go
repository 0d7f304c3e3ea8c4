package worker

import "strings"

// chain wraps outer and inner as fmt.Errorf("%w: %w") does, but names a
// package once: when inner starts with outer's package prefix ("worker: "
// after "worker: …", "fleet: " after "fleet: …"), its text leaves that out.
func chain(outer, inner error) error { return chained{outer, inner} }

type chained struct{ outer, inner error }

func (c chained) Error() string {
	outer, inner := c.outer.Error(), c.inner.Error()
	if prefix, _, ok := strings.Cut(outer, ": "); ok {
		inner = strings.TrimPrefix(inner, prefix+": ")
	}
	return outer + ": " + inner
}

func (c chained) Unwrap() []error { return []error{c.outer, c.inner} }
