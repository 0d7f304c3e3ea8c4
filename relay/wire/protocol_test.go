package wire

import (
	"reflect"
	"strconv"
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
		NewStreamID() + "-0", NewStreamID() + "-16", NewStreamID() + "-99", NewStreamID() + "-08", NewStreamID() + "-010", NewStreamID() + "-100",
		NewStreamID() + "-", NewStreamID() + "-a", NewStreamID() + "-1a", NewStreamID() + "-*", NewStreamID() + ".1", NewStreamID() + "-1.2"} {
		if ValidStreamID(bad) {
			t.Errorf("ValidStreamID(%q) = true", bad)
		}
	}
}

// TestPartitionsNameTheirStreamsAndSubjects: an id carries its partition,
// of generations or of Durable Streams, and its frames' subject falls
// under that partition's stream's filter and under no other's.
func TestPartitionsNameTheirStreamsAndSubjects(t *testing.T) {
	names := map[string]bool{}
	for k := range AllPartitions {
		id := NewStreamIDIn(k)
		if !ValidStreamID(id) || Partition(id) != k {
			t.Fatalf("NewStreamIDIn(%d) = %q: valid %t, partition %d", k, id, ValidStreamID(id), Partition(id))
		}
		if ChunkStreamOf(id) != ChunkStreamName(k) || names[ChunkStreamName(k)] {
			t.Fatalf("partition %d: stream %q (of the id: %q), seen before: %t", k, ChunkStreamName(k), ChunkStreamOf(id), names[ChunkStreamName(k)])
		}
		names[ChunkStreamName(k)] = true
		if ValidGenerationID(id) == IsDurablePartition(k) {
			t.Fatalf("partition %d: ValidGenerationID(%q) = %t", k, id, ValidGenerationID(id))
		}
		for j := range AllPartitions {
			if got := subjectMatches(ChunkSubjects(j), ChunkSubject(id)); got != (j == k) {
				t.Errorf("%s under %s (partition %d's filter) = %t", ChunkSubject(id), ChunkSubjects(j), j, got)
			}
		}
	}
	if ChunkStreamName(0) != ChunkStream || ChunkSubject("sabcdefghijklmnopqrstuvwxyz") != "relay.chunks.sabcdefghijklmnopqrstuvwxyz" {
		t.Fatal("partition 0 is not where streams were stored before partitions")
	}
}

// TestDurablePartitionsFollowTheGenerations: the k-th partition of Durable
// Streams is RELAY_CHUNKS_<8+k> on relay.chunks.<8+k>.<id>, apart from
// every partition of generations.
func TestDurablePartitionsFollowTheGenerations(t *testing.T) {
	for k := range MaxPartitions {
		d := DurablePartition(k)
		if !IsDurablePartition(d) || IsDurablePartition(k) || d >= AllPartitions {
			t.Fatalf("DurablePartition(%d) = %d: durable %t, partition %d durable %t", k, d, IsDurablePartition(d), k, IsDurablePartition(k))
		}
		id := NewStreamIDIn(d)
		want := "-" + strconv.Itoa(MaxPartitions+k)
		if !strings.HasSuffix(id, want) || ChunkStreamOf(id) != "RELAY_CHUNKS_"+want[1:] || ChunkSubject(id) != "relay.chunks."+want[1:]+"."+id {
			t.Fatalf("durable partition %d: id %q, stream %s, subject %s", k, id, ChunkStreamOf(id), ChunkSubject(id))
		}
		if ValidGenerationID(id) || !ValidStreamID(id) {
			t.Fatalf("%q: a valid id %t, a generation's %t; want a valid Durable Stream's", id, ValidStreamID(id), ValidGenerationID(id))
		}
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
