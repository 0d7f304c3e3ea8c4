package natsserver

import (
	"fmt"

	"github.com/nats-io/nats-server/v2/server"
)

// # Encryption at rest
//
// JetStream keeps every prompt (RELAY_REQUESTS) and every answer
// (RELAY_CHUNKS, for streams.retention) in files under StoreDir, in
// cleartext unless the server encrypts them. With EncryptionKey set, the
// embedded server encrypts every stream file with ChaCha20-Poly1305 under
// a key derived from it, so the files read alone (a copied disk, a backup)
// give nothing away. The key must stay apart from the disk it protects
// (an environment variable: RELAY_EMBEDDED_NATS__ENCRYPTION_KEY) and the
// same across restarts: a server with another key, or none, cannot read
// the store, and one started with a key on a store written without one
// fails too (remove the store, or migrate it, first).

// minEncryptionKey is the shortest key accepted: a short one is guessed.
const minEncryptionKey = 16

// validateEncryption refuses a key too short to protect anything.
func (c Config) validateEncryption(prefix string) error {
	if c.EncryptionKey != "" && len(c.EncryptionKey) < minEncryptionKey {
		return fmt.Errorf("%s.encryption_key: %d characters; use at least %d (a random one: openssl rand -hex 32)",
			prefix, len(c.EncryptionKey), minEncryptionKey)
	}
	return nil
}

// applyEncryption turns on encryption at rest when a key is configured.
func applyEncryption(opts *server.Options, cfg Config) {
	if cfg.EncryptionKey == "" {
		return
	}
	opts.JetStreamKey, opts.JetStreamCipher = cfg.EncryptionKey, server.ChaCha
}
