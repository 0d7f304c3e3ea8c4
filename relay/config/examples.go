package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// # Published credentials
//
// The repository publishes client keys and resume token secrets so that
// its examples load, its README commands work and its tests and CI run.
// Anyone can read them, so an edge that runs with one accepts a key the
// whole internet knows, or verifies resume tokens anyone can forge for any
// tenant. Outside `relay dev` they are refused by name, unless
// edge.allow_example_credentials says the deployment is a local demo (the
// compose cluster) or a test. A test (TestPublishedCredentialsAreListed)
// fails when configs/ or a README publishes one these lists miss.

// publishedKeys are the client keys the repository publishes or published
// (the key itself, or only its hash), with where; a removed file stays
// here, as its keys may have been copied.
var publishedKeys = map[string]string{
	"sk-relay-example-acme": "an example key configs/edge.yaml publishes",
	"sk-relay-example-beta": "an example key configs/edge.yaml publishes",
	"test-acme":             "a test key configs/testdata/credentials.yaml published",
	"test-beta":             "a test key configs/testdata/credentials.yaml published",
	"sk-relay-ci-acme":      "an operator key the Helm chart's CI values publish",
}

// publishedSecrets are the resume token secrets the repository publishes
// or published, with where.
var publishedSecrets = map[string]string{
	"example-only-replace-with-openssl-rand-hex-32":         "an example secret configs/edge.yaml publishes",
	"compose-example-only-replace-with-openssl-rand-hex-32": "an example secret configs/compose/edge.yaml publishes",
	"test-only-0123456789abcdef0123456789abcdef":            "a test secret configs/testdata/credentials.yaml published",
	"ci-only-0123456789abcdef0123456789abcdef":              "a secret the Helm chart's CI values publish",
}

// publishedKeyHashes are the hex SHA-256 of publishedKeys, to the key.
var publishedKeyHashes = func() map[string]string {
	m := map[string]string{}
	for k := range publishedKeys {
		sum := sha256.Sum256([]byte(k))
		m[hex.EncodeToString(sum[:])] = k
	}
	return m
}()

// refusePublishedCredentials names the first published credential the
// edge is configured with, and says how to make one of its own.
func (c Config) refusePublishedCredentials() error {
	e := c.Edge
	if e.AllowExampleCredentials {
		return nil
	}
	if where, ok := publishedSecrets[e.ResumeTokenSecret]; ok {
		return fmt.Errorf("edge.resume_token_secret: %s; anyone can forge resume tokens with it: "+
			"generate one of your own (`openssl rand -hex 32`, the same on every edge)", where)
	}
	for i, k := range e.APIKeys {
		if key, ok := publishedKeyHashes[strings.ToLower(k.KeySHA256)]; ok {
			return fmt.Errorf("edge.api_keys[%d].key_sha256: the hash of %s, %s; anyone can use it: "+
				"generate a key of your own (`openssl rand -hex 32`) and configure its hash (`printf %%s \"$KEY\" | sha256sum`)",
				i, key, publishedKeys[key])
		}
	}
	return nil
}
