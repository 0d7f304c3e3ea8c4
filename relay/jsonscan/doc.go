// Package jsonscan reads JSON by hand, for the relay's hot paths.
//
// Two readers run once per token of every stream: a worker parses each
// provider's chunk (relay/dialect/chat's fast path) and an edge decodes each
// chunk frame (relay/wire). Both read a few JSON shapes, and
// encoding/json, which reads by reflection, was a large share of their
// processor time. They read those shapes with the functions of this
// package instead, and leave everything they do not accept to
// encoding/json, so an input costs more there but never means something
// else.
//
// The functions work on indexes into the data: each takes the index where
// a piece of JSON starts and returns the index after it, or -1 where the
// data is not valid JSON (or nests deeper than MaxDepth). They follow RFC
// 8259 exactly as encoding/json does; the fuzz tests hold them to
// json.Valid and json.Unmarshal.
package jsonscan
