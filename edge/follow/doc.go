// Package follow is the edge's reader of the durable log. A Hub takes the
// live frames of the streams followed on the edge, one core subscription
// per stream however many clients follow it; a Follower hands one client
// the history after its cursor, then those live frames, and repairs any
// gap by re-reading the log. A client gets its stream's frames in order,
// none twice and none missed.
package follow
