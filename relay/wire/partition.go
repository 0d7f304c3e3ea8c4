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
//
// Generations (written by workers) and Durable Streams (written by edges,
// for the backends that append to them) never share a partition: the
// generations' are 0 to MaxPartitions-1, the Durable Streams' are
// DurablePartition(0) to DurablePartition(MaxPartitions-1), so that NATS
// permissions let each role write only its own streams' subjects, and an
// edge cannot append a frame to a generation and fence its worker off.

// MaxPartitions bounds the partitions of each kind: NATS permissions name
// every stream a role may read, so the shipped ones list this many of
// each.
const MaxPartitions = 8

// AllPartitions counts every partition there may be, of both kinds.
const AllPartitions = 2 * MaxPartitions

// DurablePartition is the k-th partition of Durable Streams, for k below
// MaxPartitions.
func DurablePartition(k int) int { return MaxPartitions + k }

// IsDurablePartition reports whether partition k holds Durable Streams.
func IsDurablePartition(k int) bool { return k >= MaxPartitions }

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
