package config

import (
	"errors"
	"fmt"
)

// validateFrontDoor checks what the edge needs to face the internet.
// Outside `relay dev` clients must authenticate: edge.api_keys, or an
// explicit edge.allow_anonymous; with keys, every edge must verify the
// resume tokens the others issue, so they share edge.resume_token_secret.
// An idempotency window longer than streams.retention would name streams
// that are gone (an unset window is capped by the retention, as its
// records expire with it), and a resume token that outlives them is only
// a longer-lived credential.
func (c Config) validateFrontDoor(role Role) error {
	e := c.Edge
	if role != RoleDev {
		if len(e.APIKeys) == 0 && !e.AllowAnonymous {
			return errors.New("edge.api_keys: required outside `relay dev`: list {tenant, key_sha256} entries " +
				"(or set edge.allow_anonymous: true to serve clients without authentication)")
		}
		if len(e.APIKeys) > 0 && e.ResumeTokenSecret == "" {
			return errors.New("edge.resume_token_secret: required with edge.api_keys outside `relay dev`, " +
				"the same on every edge (generate one with `openssl rand -hex 32`)")
		}
		if err := c.refusePublishedCredentials(); err != nil { // examples.go
			return err
		}
	}
	retention := c.Streams.WithDefaults().Retention
	if e.IdempotencyWindow > retention {
		return fmt.Errorf("edge.idempotency_window: %v is longer than streams.retention (%v)", e.IdempotencyWindow, retention)
	}
	if e.ResumeTokenTTL > retention {
		return fmt.Errorf("edge.resume_token_ttl: %v is longer than streams.retention (%v), past which there is nothing to resume", e.ResumeTokenTTL, retention)
	}
	return nil
}
