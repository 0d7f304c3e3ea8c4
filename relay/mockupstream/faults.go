package mockupstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ending is how a stream ends early, if it does.
type ending int

const (
	endNormal    ending = iota
	endCut              // cut_after: the connection is dropped
	endEOF              // eof_after: the body ends cleanly, too early
	endMalformed        // malformed_after: a broken data line, then the end
	endError            // error_after: an error event (overloaded), then the end
)

// faults is a parsed fault spec. The zero value injects nothing.
type faults struct {
	spec string // as written, for logs

	status       int
	retryAfter   string // Retry-After header value, "" for none
	retryAfterMS string // retry-after-ms header value, "" for none

	end      ending
	endAfter int // content tokens sent before end

	stallBefore time.Duration
	// firstTokenAfter replaces the drawn first-token time (TTFT) when
	// firstTokenSet.
	firstTokenAfter time.Duration
	firstTokenSet   bool
	stallAfter      int
	stallFor        time.Duration

	splitUTF8     bool
	noDone        bool
	rejectPrefill bool
	// reset drops the connection before any byte of the response.
	reset   bool
	overlap int
	// reasoning is how many reasoning tokens precede the answer.
	reasoning int

	// times is how many of a conversation's first requests the faults apply
	// to; 0 means all of them.
	times int
	// model, if set, is the only model the faults apply to.
	model string
}

// before applies the faults that come before any byte of a response:
// stall_before, then reset. It reports false when the response is not to
// be sent (the client left, or it never gets one).
func (f faults) before(r *http.Request) bool {
	if wait(r.Context(), f.stallBefore, 0, nil) != nil {
		return false
	}
	if f.reset {
		// The server drops the connection (resets an HTTP/2 stream)
		// without a response, and logs nothing.
		panic(http.ErrAbortHandler)
	}
	return true
}

// parseFaults parses a fault spec: "key=value" items separated by commas,
// with optional spaces; a boolean key alone means key=true. Errors name the
// offending item.
func parseFaults(spec string) (faults, error) {
	f := faults{spec: strings.TrimSpace(spec), times: 1}
	seen := make(map[string]bool)
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, value, hasValue := strings.Cut(item, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if seen[key] {
			return faults{}, fmt.Errorf("directive %q: %s is given twice", item, key)
		}
		seen[key] = true
		if err := f.set(key, value, hasValue); err != nil {
			return faults{}, fmt.Errorf("directive %q: %w", item, err)
		}
	}
	if err := checkCombination(seen); err != nil {
		return faults{}, fmt.Errorf("directives %q: %w", f.spec, err)
	}
	return f, nil
}

// set applies one key=value item.
func (f *faults) set(key, value string, hasValue bool) error {
	var err error
	switch key {
	case "status":
		f.status, err = intIn(value, 400, 599)
	case "retry_after":
		f.retryAfter, err = header(value)
	case "retry_after_ms":
		f.retryAfterMS, err = header(value)
	case "cut_after":
		f.end = endCut
		f.endAfter, err = count(value)
	case "eof_after":
		f.end = endEOF
		f.endAfter, err = count(value)
	case "malformed_after":
		f.end = endMalformed
		f.endAfter, err = count(value)
	case "error_after":
		f.end = endError
		f.endAfter, err = count(value)
	case "stall_before":
		f.stallBefore, err = duration(value)
	case "first_token_after":
		f.firstTokenAfter, err = duration(value)
		f.firstTokenSet = true
	case "stall_after":
		f.stallAfter, err = count(value)
	case "stall_for":
		f.stallFor, err = duration(value)
	case "split_utf8":
		f.splitUTF8, err = boolean(value, hasValue)
	case "no_done":
		f.noDone, err = boolean(value, hasValue)
	case "reject_prefill":
		f.rejectPrefill, err = boolean(value, hasValue)
	case "reset":
		f.reset, err = boolean(value, hasValue)
	case "overlap":
		f.overlap, err = count(value)
	case "reasoning":
		f.reasoning, err = count(value)
	case "times":
		f.times, err = count(value)
	case "model":
		if value == "" {
			err = errors.New("needs a model name")
		}
		f.model = value
	default:
		return fmt.Errorf("unknown key %q (known: status, retry_after, retry_after_ms, cut_after, eof_after, malformed_after, error_after, "+
			"stall_before, first_token_after, stall_after, stall_for, split_utf8, no_done, reject_prefill, reset, overlap, reasoning, times, model)", key)
	}
	return err
}

// checkCombination rejects keys that make no sense together, so that a
// typo'd test fails loudly instead of testing nothing.
func checkCombination(seen map[string]bool) error {
	var ends []string
	for _, k := range [...]string{"cut_after", "eof_after", "malformed_after", "error_after"} {
		if seen[k] {
			ends = append(ends, k)
		}
	}
	switch {
	case len(ends) > 1:
		return fmt.Errorf("%s exclude each other", strings.Join(ends, " and "))
	case seen["stall_after"] != seen["stall_for"]:
		return errors.New("stall_after and stall_for go together")
	case (seen["retry_after"] || seen["retry_after_ms"]) && !seen["status"]:
		return errors.New("retry_after and retry_after_ms need a status")
	case seen["reset"] && seen["status"]:
		return errors.New("reset and status exclude each other: a reset sends no status")
	}
	return nil
}

func intIn(value string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(value)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("want an integer from %d to %d", lo, hi)
	}
	return n, nil
}

func count(value string) (int, error) {
	n, err := strconv.Atoi(value)
	if err != nil || n < 0 {
		return 0, errors.New("want a non-negative integer")
	}
	return n, nil
}

// header validates a non-negative integer and keeps it as written, ready to
// be sent as a header value.
func header(value string) (string, error) {
	if _, err := count(value); err != nil {
		return "", err
	}
	return value, nil
}

func duration(value string) (time.Duration, error) {
	d, err := time.ParseDuration(value)
	if err != nil || d < 0 {
		return 0, errors.New("want a non-negative Go duration such as 500ms or 2s")
	}
	return d, nil
}

func boolean(value string, hasValue bool) (bool, error) {
	if !hasValue {
		return true, nil
	}
	b, err := strconv.ParseBool(value)
	if err != nil {
		return false, errors.New("want true or false")
	}
	return b, nil
}

// SetFaults replaces the server-wide fault spec (Config.Faults) from now
// on: a provider that goes down and comes back while clients call it.
func (s *Server) SetFaults(spec string) error {
	f, err := parseFaults(spec)
	if err != nil {
		return err
	}
	s.faults.Store(&f)
	return nil
}

// handleFaults answers PUT /mock/faults, whose body is {"faults": spec}
// (SetFaults).
func (s *Server) handleFaults(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Faults string `json:"faults"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<10))
	dec.DisallowUnknownFields()
	err := dec.Decode(&in)
	if err == nil {
		err = s.SetFaults(in.Faults)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, badRequest("mock-upstream: faults: "+err.Error(), ""))
		return
	}
	writeJSON(w, http.StatusOK, in)
}
