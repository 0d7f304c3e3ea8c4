package chunklog

// BackReads is how many of r's reads followed the chain back.
func BackReads(r *Reader) uint64 { return r.backReads.Load() }
