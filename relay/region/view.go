package region

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// Regional is the JetStream a process uses in its region. Outside the
// home region, a shared bucket (SharedStateBuckets) is a RegionalKV:
// reads and watches are local, writes go to the home, and to the region's
// overlay while the home is unreachable; creating a shared bucket makes
// sure it is the home's mirror instead. Everything else is the region's
// own JetStream, unchanged. In the home region, and without regions,
// Regional passes everything through to js.
//
// Run reconciles the overlay into the home once the home answers again.
type Regional struct {
	jetstream.JetStream
	region  Region
	topo    streams.Topology
	shared  map[string]bool
	logger  *slog.Logger
	home    jetstream.JetStream // the home domain's API
	active  bool
	kvPre   string // "$JS.<home>API" + "." for raw publishes to shared keys
	homeTry atomic.Int64

	mu    sync.Mutex
	views map[string]*RegionalKV

	// ReconcileInterval is how often Run looks at the overlay while it
	// holds entries (zero: 1s). Set before Run.
	ReconcileInterval time.Duration
}

// NewRegional wraps js for region r. logger may be nil.
func NewRegional(js jetstream.JetStream, t streams.Topology, r Region, logger *slog.Logger) (*Regional, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	g := &Regional{JetStream: js, region: r.WithDefaults(), topo: t.WithDefaults(), logger: logger, views: map[string]*RegionalKV{}}
	if !r.Enabled() || r.IsHome() {
		return g, nil
	}
	home, err := jetstream.NewWithDomain(js.Conn(), g.region.HomeDomain)
	if err != nil {
		return nil, fmt.Errorf("region: home domain %s: %w", g.region.HomeDomain, err)
	}
	g.home, g.active = home, true
	g.kvPre = "$JS." + g.region.HomeDomain + ".API."
	g.shared = map[string]bool{}
	for _, b := range wire.SharedStateBuckets {
		g.shared[b] = true
	}
	return g, nil
}

// Region is the region the process runs in, with defaults applied.
func (g *Regional) Region() Region { return g.region }

// OwnsBucket reports whether g sets up the bucket itself: in a region that
// is not the home, a shared bucket is a mirror of the home's
// (streams.BucketOwner).
func (g *Regional) OwnsBucket(name string) bool { return g.active && g.shared[name] }

// KeyValue returns a shared bucket as the region sees it; any other
// bucket as it is.
func (g *Regional) KeyValue(ctx context.Context, bucket string) (jetstream.KeyValue, error) {
	if !g.active || !g.shared[bucket] {
		return g.JetStream.KeyValue(ctx, bucket)
	}
	return g.view(ctx, bucket)
}

// CreateKeyValue creates a bucket; a shared one is made the home's
// mirror, with its overlay, and keeps only cfg's history and TTL.
func (g *Regional) CreateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	if !g.active || !g.shared[cfg.Bucket] {
		return g.JetStream.CreateKeyValue(ctx, cfg)
	}
	return g.ensureShared(ctx, cfg)
}

// UpdateKeyValue is CreateKeyValue for a shared bucket.
func (g *Regional) UpdateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	if !g.active || !g.shared[cfg.Bucket] {
		return g.JetStream.UpdateKeyValue(ctx, cfg)
	}
	return g.ensureShared(ctx, cfg)
}

// CreateOrUpdateKeyValue is CreateKeyValue for a shared bucket.
func (g *Regional) CreateOrUpdateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	if !g.active || !g.shared[cfg.Bucket] {
		return g.JetStream.CreateOrUpdateKeyValue(ctx, cfg)
	}
	return g.ensureShared(ctx, cfg)
}

// Publish sends a message to a shared bucket's key ($KV.<bucket>.<key>)
// to the home, where the bucket is stored; other subjects as they are.
func (g *Regional) Publish(ctx context.Context, subject string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return g.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: data}, opts...)
}

// PublishMsg is Publish with headers (e.g. a TTL and an expected last
// sequence, to renew a lease on a shared key). Like RegionalKV's writes,
// a publish goes to the overlay while the home is unreachable, and so does
// one whose expected last sequence is an overlay revision; the expected
// sequence is then checked against what the region sees.
func (g *Regional) PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	bucket, key, ok := g.sharedKey(msg.Subject)
	if !ok {
		return g.JetStream.PublishMsg(ctx, msg, opts...)
	}
	home := *msg
	home.Subject = g.kvPre + msg.Subject
	home.Header = cloneHeader(msg.Header)
	hctx, cancel := context.WithTimeout(ctx, g.region.HomeTimeout)
	// No retries on "no responders": without a leaf connection the home
	// is gone, not electing a leader.
	ack, err := g.JetStream.PublishMsg(hctx, &home, append(opts, jetstream.WithRetryAttempts(0))...)
	cancel()
	// home.Header now holds what opts asked for.
	expected, hasExpected := expectedSequence(home.Header)
	tagged := hasExpected && expected&overlayRevision != 0
	switch {
	case err == nil:
		g.homeAnswered()
		return ack, nil
	case unreachable(ctx, err):
		g.homeFailed()
	case !tagged:
		g.homeAnswered()
		return nil, err
	}
	v, err := g.view(ctx, bucket)
	if err != nil {
		return nil, err
	}
	m, o, err := v.entries(ctx, key)
	if err != nil {
		return nil, err
	}
	out := nats.Msg{Subject: "$KV." + OverlayBucket(bucket) + "." + key, Data: msg.Data, Header: home.Header}
	if hasExpected {
		last := uint64(0) // the overlay's last message on the key
		if o != nil {
			last = o.Revision() &^ overlayRevision
		}
		if !tagged {
			// A home revision: it must be what the region sees of the home.
			current := uint64(0)
			if m != nil {
				current = m.Revision()
			}
			if current != expected || newer(m, o) != m {
				return nil, wrongRevision(bucket, key, expected)
			}
		} else if expected&^overlayRevision != last {
			return nil, wrongRevision(bucket, key, expected)
		}
		out.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
	}
	ack, err = g.JetStream.PublishMsg(ctx, &out)
	if err != nil {
		return nil, err
	}
	ack.Sequence |= overlayRevision
	return ack, nil
}

// sharedKey splits a subject of a shared bucket's key.
func (g *Regional) sharedKey(subject string) (bucket, key string, ok bool) {
	if !g.active {
		return "", "", false
	}
	rest, ok := strings.CutPrefix(subject, "$KV.")
	if !ok {
		return "", "", false
	}
	bucket, key, ok = strings.Cut(rest, ".")
	return bucket, key, ok && g.shared[bucket]
}

func expectedSequence(h nats.Header) (uint64, bool) {
	v := h.Get(jetstream.ExpectedLastSubjSeqHeader)
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n, err == nil
}

func cloneHeader(h nats.Header) nats.Header {
	out := nats.Header{}
	for k, v := range h {
		out[k] = slices.Clone(v)
	}
	return out
}

func (g *Regional) ensureShared(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	limit := g.topo.Storage.StateBytes()
	want := jetstream.KeyValueConfig{Bucket: cfg.Bucket, History: cfg.History, TTL: cfg.TTL, MaxValueSize: cfg.MaxValueSize, MaxBytes: limit}
	if err := ensureMirror(ctx, g.JetStream, g.topo, g.region, want, g.logger); err != nil {
		return nil, err
	}
	if err := ensureOverlay(ctx, g.JetStream, g.topo, cfg.Bucket, cfg.LimitMarkerTTL, limit); err != nil {
		return nil, err
	}
	return g.view(ctx, cfg.Bucket)
}

func (g *Regional) view(ctx context.Context, bucket string) (*RegionalKV, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if v := g.views[bucket]; v != nil {
		return v, nil
	}
	mirror, err := g.JetStream.KeyValue(ctx, bucket)
	if err != nil {
		return nil, err
	}
	mirrorStream, err := g.JetStream.Stream(ctx, kvStream(bucket))
	if err != nil {
		return nil, fmt.Errorf("region: bucket %s: %w", bucket, err)
	}
	overlay, err := g.JetStream.KeyValue(ctx, OverlayBucket(bucket))
	if err != nil {
		return nil, fmt.Errorf("region: overlay of %s: %w", bucket, err)
	}
	overlayStream, err := g.JetStream.Stream(ctx, kvStream(OverlayBucket(bucket)))
	if err != nil {
		return nil, fmt.Errorf("region: overlay of %s: %w", bucket, err)
	}
	v := &RegionalKV{
		KeyValue: mirror, g: g, name: bucket,
		mirrorStream: mirrorStream, overlay: overlay, overlayStream: overlayStream,
	}
	g.views[bucket] = v
	return v, nil
}

// homeRetry is how long writes go straight to the overlay after the home
// was found unreachable, unless Run finds the home answering again first
// (it tries every ReconcileInterval while the overlay holds entries, which
// it does once a write went there).
const homeRetry = 10 * time.Second

// homeReachable reports whether a write should try the home first.
func (g *Regional) homeReachable() bool {
	return time.Now().UnixNano() >= g.homeTry.Load()
}

func (g *Regional) homeFailed() {
	if g.homeTry.Swap(time.Now().Add(homeRetry).UnixNano()) == 0 {
		g.logger.Warn("home region unreachable; the region's writes of shared state go to its overlay", "home_domain", g.region.HomeDomain)
	}
}

func (g *Regional) homeAnswered() {
	if g.homeTry.Swap(0) != 0 {
		g.logger.Info("home region reachable again; the region's writes of shared state go to the home", "home_domain", g.region.HomeDomain)
	}
}

// unreachable reports whether err means the home did not answer (as
// opposed to answering with an error, such as a revision mismatch).
func unreachable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false // the caller gave up: not the home's doing
	}
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
}
