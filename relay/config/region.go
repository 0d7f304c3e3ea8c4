package config

import "fmt"

// validateRegion checks the region section (configs/README.md "Regions") and, for
// `relay dev`, that the embedded server runs the region's JetStream
// domain.
func (c Config) validateRegion(role Role) error {
	if err := c.Region.Validate("region"); err != nil {
		return err
	}
	if role != RoleDev {
		return nil
	}
	joined := c.EmbeddedNATS.Leaf.Listen != "" || len(c.EmbeddedNATS.Leaf.Remotes) > 0
	switch {
	case c.Region.Enabled() && c.EmbeddedNATS.Domain != c.Region.WithDefaults().Domain:
		return fmt.Errorf("embedded_nats.domain: %q, but the region's JetStream domain (region.domain, else region.name) is %q: they must match",
			c.EmbeddedNATS.Domain, c.Region.WithDefaults().Domain)
	case !c.Region.Enabled() && joined:
		return fmt.Errorf("region.name: required with embedded_nats.leaf (the processes must know their region)")
	}
	return nil
}
