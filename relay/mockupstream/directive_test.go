package mockupstream

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseFaults(t *testing.T) {
	for spec, want := range map[string]faults{
		"":    {times: 1},
		" , ": {spec: ",", times: 1},
		"status=429, retry_after=3, retry_after_ms=250, times=0": {
			spec: "status=429, retry_after=3, retry_after_ms=250, times=0", status: 429, retryAfter: "3", retryAfterMS: "250"},
		"cut_after=0":               {spec: "cut_after=0", end: endCut, times: 1},
		"eof_after = 7":             {spec: "eof_after = 7", end: endEOF, endAfter: 7, times: 1},
		"malformed_after=2,times=3": {spec: "malformed_after=2,times=3", end: endMalformed, endAfter: 2, times: 3},
		"error_after=4":             {spec: "error_after=4", end: endError, endAfter: 4, times: 1},
		"stall_before=1m, stall_after=4, stall_for=250ms": {
			spec: "stall_before=1m, stall_after=4, stall_for=250ms", stallBefore: time.Minute, stallAfter: 4, stallFor: 250 * time.Millisecond, times: 1},
		"split_utf8, no_done=true, reject_prefill=false, overlap=5": {
			spec: "split_utf8, no_done=true, reject_prefill=false, overlap=5", splitUTF8: true, noDone: true, overlap: 5, times: 1},
	} {
		got, err := parseFaults(spec)
		if err != nil {
			t.Errorf("parseFaults(%q): %v", spec, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("parseFaults(%q) = %+v, want %+v", spec, got, want)
		}
	}
}

func TestRequestFaultsReadsAllUserMessages(t *testing.T) {
	msgs := []Message{
		{Role: roleSystem, Content: "[[mock: status=500]]"}, // not a user message: ignored
		{Role: roleUser, Content: "a [[mock: cut_after=2]] b"},
		{Role: roleAssistant, Content: "[[mock: no_done]]"}, // ignored too
		{Role: roleUser, Content: "[[mock: times=0]] and [[mock: split_utf8]]"},
	}
	f, found, err := requestFaults(msgs)
	if err != nil || !found {
		t.Fatalf("found %v, err %v", found, err)
	}
	if f.status != 0 || f.end != endCut || f.endAfter != 2 || f.times != 0 || !f.splitUTF8 || f.noDone {
		t.Fatalf("faults = %+v", f)
	}
	if _, found, err := requestFaults(conv("no directive, [[mock without colon]]")); found || err != nil {
		t.Fatalf("plain text: found %v, err %v", found, err)
	}
}

// FuzzParseFaults checks that no spec crashes the parser, and that a spec
// means the same in Config.Faults and inside a directive.
func FuzzParseFaults(f *testing.F) {
	for _, seed := range []string{"", "status=503", "cut_after=3, times=0", "split_utf8", "stall_after=1,stall_for=1s", "x=", "=", ",,,", "times=1, times=2"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		plain, plainErr := parseFaults(spec)
		if strings.Contains(spec, "]") {
			return // could end the directive early
		}
		inDirective, found, err := requestFaults(conv(directiveOpen + spec + directiveClose))
		if (err == nil) != (plainErr == nil) || (err == nil && !found) {
			t.Fatalf("spec %q: directive found %v err %v; plain err %v", spec, found, err, plainErr)
		}
		if err == nil && !reflect.DeepEqual(plain, inDirective) {
			t.Fatalf("spec %q: %+v in a directive, %+v plain", spec, inDirective, plain)
		}
	})
}
