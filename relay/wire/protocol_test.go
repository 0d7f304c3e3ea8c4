package wire

import (
	"reflect"
	"strings"
	"testing"
)

func TestStreamIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewStreamID()
		if !ValidStreamID(id) {
			t.Fatalf("NewStreamID() = %q is not valid", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
	for _, bad := range []string{"", "s", "sabc", "s" + "a*cdefghijklmnopqrstuvwxyz", "x" + NewStreamID()[1:], NewStreamID() + "a", "s.bcdefghijklmnopqrstuvwxyz",
		NewStreamID() + "-0", NewStreamID() + "-8", NewStreamID() + "-12", NewStreamID() + "-", NewStreamID() + "-a", NewStreamID() + ".1"} {
		if ValidStreamID(bad) {
			t.Errorf("ValidStreamID(%q) = true", bad)
		}
	}
}

// TestPartitionsNameTheirStreamsAndSubjects: an id carries its partition,
// and its frames' subject falls under that partition's stream's filter
// and under no other's.
func TestPartitionsNameTheirStreamsAndSubjects(t *testing.T) {
	names := map[string]bool{}
	for k := range MaxPartitions {
		id := NewStreamIDIn(k)
		if !ValidStreamID(id) || Partition(id) != k {
			t.Fatalf("NewStreamIDIn(%d) = %q: valid %t, partition %d", k, id, ValidStreamID(id), Partition(id))
		}
		if ChunkStreamOf(id) != ChunkStreamName(k) || names[ChunkStreamName(k)] {
			t.Fatalf("partition %d: stream %q (of the id: %q), seen before: %t", k, ChunkStreamName(k), ChunkStreamOf(id), names[ChunkStreamName(k)])
		}
		names[ChunkStreamName(k)] = true
		for j := range MaxPartitions {
			if got := subjectMatches(ChunkSubjects(j), ChunkSubject(id)); got != (j == k) {
				t.Errorf("%s under %s (partition %d's filter) = %t", ChunkSubject(id), ChunkSubjects(j), j, got)
			}
		}
	}
	if ChunkStreamName(0) != ChunkStream || ChunkSubject("sabcdefghijklmnopqrstuvwxyz") != "relay.chunks.sabcdefghijklmnopqrstuvwxyz" {
		t.Fatal("partition 0 is not where streams were stored before partitions")
	}
}

// subjectMatches reports whether subject matches filter, whose wildcards
// are "*" tokens only.
func subjectMatches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	if len(f) != len(s) {
		return false
	}
	for i := range f {
		if f[i] != "*" && f[i] != s[i] {
			return false
		}
	}
	return true
}

func TestFrameRoundTrip(t *testing.T) {
	in := Frame{Kind: KindEnd, Status: StatusIncomplete, Error: &Error{Message: "gave up", Type: TypeIncomplete}, Usage: &Usage{PromptTokens: 3, CompletionTokens: 5, TotalTokens: 8,
		CompletionTokensDetails: TokenCounts{{Name: "reasoning_tokens", N: 2}}}}
	out, err := DecodeFrame(in.Encode())
	if err != nil || out.Status != in.Status || out.Error.Message != "gave up" || !reflect.DeepEqual(out.Usage, in.Usage) {
		t.Fatalf("round trip = %+v, %v", out, err)
	}
	if _, err := DecodeFrame([]byte(`{"kind":"bogus"}`)); err == nil {
		t.Fatal("unknown kind decoded")
	}
}
