package region

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// Region places a process in one of several regions. The zero value means
// a single region: nothing is mirrored. All processes of a region agree
// on it.
type Region struct {
	// Name of this region, for logs and the status; setting it turns
	// regions on (zero: a single region, and every other field must be
	// zero).
	Name string `koanf:"name"`
	// Domain is the JetStream domain of this region's NATS servers (zero:
	// Name). It must match the servers' jetstream.domain (or
	// embedded_nats.domain).
	Domain string `koanf:"domain"`
	// HomeDomain is the JetStream domain of the region that holds the
	// shared state (zero: Domain, so this region is the home).
	HomeDomain string `koanf:"home_domain"`
	// HomeTimeout bounds a write to the home before it goes to the
	// region's overlay instead (zero: 1s). Without a leaf connection, a
	// write fails within about 0.5s anyway (no responders, retried twice);
	// this covers a home that accepts the write but does not answer.
	HomeTimeout time.Duration `koanf:"home_timeout"`
}

// DefaultHomeTimeout is Region.HomeTimeout's default.
const DefaultHomeTimeout = time.Second

// WithDefaults fills zero fields.
func (r Region) WithDefaults() Region {
	if r.Name == "" {
		return r
	}
	if r.Domain == "" {
		r.Domain = r.Name
	}
	if r.HomeDomain == "" {
		r.HomeDomain = r.Domain
	}
	if r.HomeTimeout == 0 {
		r.HomeTimeout = DefaultHomeTimeout
	}
	return r
}

// Enabled reports whether regions are configured.
func (r Region) Enabled() bool { return r.Name != "" }

// IsHome reports whether this region holds the shared state itself: the
// home region, or a single region.
func (r Region) IsHome() bool {
	r = r.WithDefaults()
	return r.HomeDomain == r.Domain
}

// Validate names the first invalid field under prefix (e.g. "region").
func (r Region) Validate(prefix string) error {
	if r.Name == "" {
		if r.Domain != "" || r.HomeDomain != "" || r.HomeTimeout != 0 {
			return fmt.Errorf("%s.name: required when any other %s key is set", prefix, prefix)
		}
		return nil
	}
	for _, f := range []struct{ key, value string }{{"name", r.Name}, {"domain", r.Domain}, {"home_domain", r.HomeDomain}} {
		if f.value != "" && !isToken(f.value) {
			return fmt.Errorf("%s.%s: %q must be letters, digits, - and _", prefix, f.key, f.value)
		}
	}
	switch {
	case r.HomeTimeout < 0:
		return fmt.Errorf("%s.home_timeout: must not be negative", prefix)
	case r.HomeTimeout > 0 && r.HomeTimeout < 10*time.Millisecond:
		return fmt.Errorf("%s.home_timeout: %v is below 10ms", prefix, r.HomeTimeout)
	}
	return nil
}

func isToken(s string) bool {
	for _, c := range s {
		if !(c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return s != ""
}

// RegionLocalSubjects are the subjects that must not cross a leaf node
// connection between regions: every region has its own request queue,
// chunk log, liveness and cancellations on the same subjects, and a
// message that crossed would be stored, or acted on, in both. KV subjects
// ($KV.>) and the plain JetStream API never cross between domains anyway;
// shared state crosses as domain-prefixed API traffic.
func RegionLocalSubjects() []string { return []string{"relay.>"} }

// OverlayBucket is the region-local bucket that holds a region's writes to
// shared bucket while the home is unreachable.
func OverlayBucket(shared string) string { return shared + "_overlay" }

// overlayRevision marks a revision that names an overlay entry rather than
// a home one, so that an Update with it goes to the overlay. JetStream
// sequences never reach it.
const overlayRevision = uint64(1) << 62

// SetupRegion prepares a region that is not the home: each shared bucket
// (SharedStateBuckets) becomes a mirror of the home domain's bucket of the
// same name, and gets its overlay. It is idempotent; in the home region,
// or without regions, it does nothing. The request and chunk streams and
// the other buckets stay the region's own, as Setup made them.
//
// Setup, or whatever creates shared buckets, must see them through
// Regional (Regional.CreateOrUpdateKeyValue leaves a mirror alone), or a
// plain bucket it creates first is turned into a mirror here, losing
// what the region wrote into it.
func SetupRegion(ctx context.Context, js jetstream.JetStream, t streams.Topology, r Region) error {
	if !r.Enabled() || r.IsHome() {
		return nil
	}
	logger := slog.New(slog.DiscardHandler)
	if g, ok := js.(*Regional); ok {
		js, logger = g.JetStream, g.logger
	}
	r = r.WithDefaults()
	limit := t.Storage.StateBytes()
	for _, b := range wire.SharedStateBuckets {
		if regionReady(ctx, js, r, b, limit) {
			continue
		}
		want := jetstream.KeyValueConfig{Bucket: b}
		if home, err := homeBucketConfig(ctx, js, r.HomeDomain, b); err == nil {
			want = home
		}
		want.MaxBytes = limit
		if err := ensureMirror(ctx, js, t, r, want, logger); err != nil {
			return err
		}
		if err := ensureOverlay(ctx, js, t, b, want.LimitMarkerTTL, limit); err != nil {
			return err
		}
	}
	return nil
}

// regionReady reports whether shared bucket is already the home's mirror
// and has its overlay, both with the byte limit maxBytes.
func regionReady(ctx context.Context, js jetstream.JetStream, r Region, bucket string, maxBytes int64) bool {
	s, err := js.Stream(ctx, kvStream(bucket))
	if err != nil {
		return false
	}
	c := s.CachedInfo().Config
	if m := c.Mirror; m == nil || m.Name != kvStream(bucket) || mirrorDomain(m) != r.HomeDomain || c.MaxBytes != maxBytes {
		return false
	}
	o, err := js.Stream(ctx, kvStream(OverlayBucket(bucket)))
	return err == nil && o.CachedInfo().Config.MaxBytes == maxBytes
}

// ensureMirror makes bucket want.Bucket a mirror of the home's bucket of
// the same name, with want's history, TTL, value size and byte limit. A
// bucket that exists as a mirror of the home only gets want's byte limit.
func ensureMirror(ctx context.Context, js jetstream.JetStream, t streams.Topology, r Region, want jetstream.KeyValueConfig, logger *slog.Logger) error {
	name := want.Bucket
	stream, err := js.Stream(ctx, kvStream(name))
	switch {
	case err == nil:
		m := stream.CachedInfo().Config.Mirror
		if m != nil && m.Name == kvStream(name) && mirrorDomain(m) == r.HomeDomain {
			c := stream.CachedInfo().Config
			if c.MaxBytes == want.MaxBytes {
				return nil
			}
			c.MaxBytes = want.MaxBytes
			if _, err := js.UpdateStream(ctx, c); err != nil {
				return fmt.Errorf("region: byte limit of mirror %s: %w", name, err)
			}
			return nil
		}
		// A plain bucket (made before regions were configured, or by a
		// setup that does not know them) would silently diverge from the
		// home: the home's state wins, the region's copy is dropped.
		logger.Warn("shared bucket is not a mirror of the home; replacing it", "bucket", name, "home_domain", r.HomeDomain)
		if err := js.DeleteKeyValue(ctx, name); err != nil {
			return fmt.Errorf("region: replace bucket %s by a mirror: %w", name, err)
		}
	case !errors.Is(err, jetstream.ErrStreamNotFound):
		return fmt.Errorf("region: bucket %s: %w", name, err)
	}
	cfg := want
	if t, err = t.On(ctx, js); err != nil {
		return err
	}
	_, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:       name,
		Description:  "mirror of " + name + " in JetStream domain " + r.HomeDomain,
		History:      cfg.History,
		TTL:          cfg.TTL,
		MaxValueSize: cfg.MaxValueSize,
		MaxBytes:     cfg.MaxBytes,
		Storage:      t.StorageType(),
		Replicas:     t.Replicas,
		Mirror:       &jetstream.StreamSource{Name: name, Domain: r.HomeDomain},
	})
	if err != nil && !errors.Is(err, jetstream.ErrBucketExists) {
		return fmt.Errorf("region: mirror %s of domain %s: %w", name, r.HomeDomain, err)
	}
	return nil
}

// homeBucketConfig reads the home's configuration of bucket, if the home
// answers within a second (else the mirror and overlay get defaults).
func homeBucketConfig(ctx context.Context, js jetstream.JetStream, home, bucket string) (jetstream.KeyValueConfig, error) {
	hjs, err := jetstream.NewWithDomain(js.Conn(), home)
	if err != nil {
		return jetstream.KeyValueConfig{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	kv, err := hjs.KeyValue(ctx, bucket)
	if err != nil {
		return jetstream.KeyValueConfig{}, err
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return jetstream.KeyValueConfig{}, err
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return jetstream.KeyValueConfig{}, fmt.Errorf("region: bucket %s: unexpected status %T", bucket, st)
	}
	info := bs.StreamInfo()
	return jetstream.KeyValueConfig{
		Bucket:         bucket,
		History:        uint8(st.History()),
		TTL:            st.TTL(),
		MaxValueSize:   info.Config.MaxMsgSize,
		LimitMarkerTTL: info.Config.SubjectDeleteMarkerTTL,
	}, nil
}

// ensureOverlay creates the region-local overlay of shared bucket. It
// keeps every key's latest write only; markerTTL > 0 lets writes carry a
// TTL (KeyTTL), as the shared bucket's LimitMarkerTTL does. An existing
// overlay is only ever given a longer marker TTL (JetStream cannot turn
// message TTLs off again). Its byte limit is maxBytes.
func ensureOverlay(ctx context.Context, js jetstream.JetStream, t streams.Topology, shared string, markerTTL time.Duration, maxBytes int64) error {
	name := OverlayBucket(shared)
	if s, err := js.Stream(ctx, kvStream(name)); err == nil {
		c := s.CachedInfo().Config
		if markerTTL <= c.SubjectDeleteMarkerTTL && c.MaxBytes == maxBytes {
			return nil
		}
		markerTTL = max(markerTTL, c.SubjectDeleteMarkerTTL)
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("region: overlay of %s: %w", shared, err)
	}
	t, err := t.On(ctx, js)
	if err != nil {
		return err
	}
	_, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         name,
		Description:    "writes to " + shared + " while the home region was unreachable",
		History:        1,
		MaxBytes:       maxBytes,
		Storage:        t.StorageType(),
		Replicas:       t.Replicas,
		LimitMarkerTTL: markerTTL,
	})
	if err != nil {
		return fmt.Errorf("region: overlay of %s: %w", shared, err)
	}
	return nil
}

func kvStream(bucket string) string { return "KV_" + bucket }

// mirrorDomain is the JetStream domain a mirror reads from ("" if none).
func mirrorDomain(m *jetstream.StreamSource) string {
	if m.External == nil {
		return ""
	}
	// nats.go turns Domain into the API prefix "$JS.<domain>API".
	d, ok := strings.CutPrefix(m.External.APIPrefix, "$JS.")
	if !ok {
		return ""
	}
	d, _ = strings.CutSuffix(d, ".API")
	return d
}
