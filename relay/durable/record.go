package durable

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/relaydev/relay/relay/wire"
)

// Record is a Durable Stream's entry in wire.MetaBucket: the relay stream
// its path names and the configuration its PUT gave. The frames hold the
// rest (data, writer state, closure).
type Record struct {
	// ID is the relay stream the frames are stored on.
	ID          string `json:"id"`
	Tenant      string `json:"tenant,omitempty"`
	Path        string `json:"path"`
	ContentType string `json:"content_type"`
	// TTL is the sliding time to live in seconds (Stream-TTL), counted
	// from Touched; ExpiresAt the absolute expiry (Stream-Expires-At).
	TTL       *int64     `json:"ttl,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Touched is the last read or write, Unix milliseconds.
	Touched int64 `json:"touched"`
	// Fork is set on a fork: the stream it inherits from.
	Fork *Fork `json:"fork,omitempty"`
	// Forks counts the forks that read this stream's data.
	Forks int `json:"forks,omitempty"`
	// Deleted marks a stream deleted while forks still read it (soft
	// deletion): gone to clients, kept for the forks.
	Deleted bool `json:"deleted,omitempty"`
}

// Fork is what a fork inherits: its source's data up to Offset, and
// SubOffset bytes or messages past it (copied into the fork's first
// chunk).
type Fork struct {
	Source string `json:"source"`
	// SourceID is the source's stream, so that a stream made later at
	// the source's path is not taken for it.
	SourceID  string      `json:"source_id"`
	Offset    wire.Offset `json:"offset"`
	SubOffset int64       `json:"sub_offset,omitempty"`
}

// keyOf is the record's key in wire.MetaBucket: a hash, as a path may
// hold any character and a key few; stream ids never start with "ds.".
func keyOf(tenant, path string) string {
	sum := sha256.Sum256([]byte(tenant + "\x00" + path))
	return "ds." + hex.EncodeToString(sum[:20])
}

// Key is the record's key.
func (r Record) Key() string { return keyOf(r.Tenant, r.Path) }

// expired reports whether the stream's TTL or expiry has passed at now.
func (r Record) expired(now time.Time) bool {
	if r.ExpiresAt != nil && !now.Before(*r.ExpiresAt) {
		return true
	}
	return r.TTL != nil && now.UnixMilli() >= r.Touched+*r.TTL*1000
}

// isJSON reports whether the stream keeps JSON message boundaries.
func (r Record) isJSON() bool { return IsJSON(r.ContentType) }
