package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// # Published example credentials
//
// configs/ ships example API keys and resume token secrets so that its
// files load and its README commands work. Anyone can read them, so an
// edge that runs with one unchanged accepts a key the whole internet knows,
// or verifies resume tokens anyone can forge for any tenant and any
// lifetime. Outside `relay dev` they are refused by name, unless
// edge.allow_example_credentials says the deployment is a local demo (the
// compose cluster).

// exampleKeys are the example client keys of configs/: their hashes are in
// configs/edge.yaml and configs/compose/edge.yaml.
var exampleKeys = []string{"sk-relay-example-acme", "sk-relay-example-beta"}

// exampleSecrets are the resume token secrets configs/ publishes.
var exampleSecrets = []string{
	"example-only-replace-with-openssl-rand-hex-32",
	"compose-example-only-replace-with-openssl-rand-hex-32",
}

// exampleKeyHashes are the hex SHA-256 of exampleKeys.
var exampleKeyHashes = func() map[string]string {
	m := map[string]string{}
	for _, k := range exampleKeys {
		sum := sha256.Sum256([]byte(k))
		m[hex.EncodeToString(sum[:])] = k
	}
	return m
}()

// refuseExampleCredentials names the first published example credential
// the edge is configured with.
func (c Config) refuseExampleCredentials() error {
	e := c.Edge
	if e.AllowExampleCredentials {
		return nil
	}
	for _, s := range exampleSecrets {
		if e.ResumeTokenSecret == s {
			return fmt.Errorf("edge.resume_token_secret: the published example secret of configs/; anyone can forge resume tokens with it: " +
				"replace it (`openssl rand -hex 32`, the same on every edge)")
		}
	}
	for i, k := range e.APIKeys {
		if key, ok := exampleKeyHashes[strings.ToLower(k.KeySHA256)]; ok {
			return fmt.Errorf("edge.api_keys[%d].key_sha256: the hash of the published example key %s; anyone can use it: "+
				"replace it with the hash of a key of your own (`printf %%s \"$KEY\" | sha256sum`)", i, key)
		}
	}
	return nil
}
