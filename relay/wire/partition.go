package wire

import "strconv"

// # Partitions
//
// Every frame of a stream is stored in one of several chunk streams, its
// partition, so that the raft rounds of a cluster's chunks are spread over
// as many leaders as there are partitions, each placed by JetStream on a
// server of its own when it can. The partition is part of the stream id:
// every role finds a stream's frames from its id alone, and the number of
// partitions can change for new streams while the old ones stay where they
// are. Partition 0 is RELAY_CHUNKS on relay.chunks.<id>, as before there
// were partitions; partition k is RELAY_CHUNKS_<k> on
// relay.chunks.<k>.<id>. Every partition republishes to relay.live.<id>, so
// a reader of live frames does not care where a stream is stored.

// MaxPartitions bounds the chunk streams: NATS permissions name every
// stream a role may read, so the shipped ones list this many.
const MaxPartitions = 8

// ChunkStreamName is the name of partition k's chunk stream.
func ChunkStreamName(k int) string {
	if k == 0 {
		return ChunkStream
	}
	return ChunkStream + "_" + strconv.Itoa(k)
}

// ChunkSubjects is the subject filter of partition k's chunk stream.
func ChunkSubjects(k int) string {
	if k == 0 {
		return chunkPrefix + "*"
	}
	return chunkPrefix + strconv.Itoa(k) + ".*"
}

// Partition is the partition a stream id names: 0 for an id without a
// suffix. It assumes a valid id (ValidStreamID).
func Partition(streamID string) int {
	if len(streamID) <= streamIDLen {
		return 0
	}
	k, _ := strconv.Atoi(streamID[streamIDLen+1:])
	return k
}

// ChunkStreamOf is the chunk stream that stores the stream's frames.
func ChunkStreamOf(streamID string) string { return ChunkStreamName(Partition(streamID)) }

// ChunkSubject is the stored subject of one stream's frames, in its
// partition.
func ChunkSubject(streamID string) string {
	k := Partition(streamID)
	if k == 0 {
		return chunkPrefix + streamID
	}
	return chunkPrefix + strconv.Itoa(k) + "." + streamID
}
