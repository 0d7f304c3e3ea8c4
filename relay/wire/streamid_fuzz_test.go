package wire

import (
	"strings"
	"testing"
)

// FuzzStreamIDPartition: a stream id reaches a subject from a URL, a
// header or a message anyone can write. Only the shape NewStreamIDIn makes
// is valid; a valid id's frames fall under exactly one partition's filter,
// the one its id names, whose kind (generations or Durable Streams) is the
// one ValidGenerationID tells, and its subject is two or three tokens of
// the chunk prefix and the id, with no wildcard.
func FuzzStreamIDPartition(f *testing.F) {
	for _, id := range []string{
		"sabcdefghijklmnopqrstuvwxyz", "sabcdefghijklmnopqrstuvwxyz-1", "sabcdefghijklmnopqrstuvwxyz-7", "sabcdefghijklmnopqrstuvwxyz-8",
		"sabcdefghijklmnopqrstuvwxyz-15", "sabcdefghijklmnopqrstuvwxyz-16", "sabcdefghijklmnopqrstuvwxyz-08", "sabcdefghijklmnopqrstuvwxyz-0",
		"sabcdefghijklmnopqrstuvwxyz-1.*", "sabcdefghijklmnopqrstuvwxyz->", "sabcdefghijklmnopqrstuvwxyz-١", "",
	} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		valid := ValidStreamID(id)
		if valid != validIDShape(id) {
			t.Fatalf("ValidStreamID(%q) = %t", id, valid)
		}
		if !valid {
			if ValidGenerationID(id) {
				t.Fatalf("ValidGenerationID(%q) = true for an invalid id", id)
			}
			return
		}
		k, subject := Partition(id), ChunkSubject(id)
		if k < 0 || k >= AllPartitions || ValidGenerationID(id) == IsDurablePartition(k) {
			t.Fatalf("%q: partition %d, a generation's %t", id, k, ValidGenerationID(id))
		}
		tokens := strings.Split(subject, ".")
		if !strings.HasPrefix(subject, chunkPrefix) || tokens[len(tokens)-1] != id || len(tokens) > 4 || strings.ContainsAny(subject, "*> ") {
			t.Fatalf("%q: subject %q", id, subject)
		}
		for j := range AllPartitions {
			if got := subjectMatches(ChunkSubjects(j), subject); got != (j == k) {
				t.Fatalf("%q: %s under partition %d's filter %s = %t", id, subject, j, ChunkSubjects(j), got)
			}
		}
	})
}
