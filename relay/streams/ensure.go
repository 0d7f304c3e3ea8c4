package streams

import (
	"context"
	"errors"
	"reflect"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// Every role sets the JetStream assets up at start (Setup), but under the
// shipped least-privilege NATS users (configs/nats) only the coordinator
// may create or update them. So each asset is looked up first and written
// only when it is missing or its settings differ: an edge or a worker
// coming up after the coordinator needs nothing but read rights, and one
// coming up before it keeps retrying until the coordinator has set up.

// ensureStream returns the stream want names, creating or updating it
// unless it exists with want's settings.
func ensureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, want.Name)
	switch {
	case err == nil && streamSettled(s.CachedInfo().Config, want):
		return s, nil
	case err != nil && !errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, err
	}
	return js.CreateOrUpdateStream(ctx, want)
}

// BucketOwner is a JetStream handle that sets up some buckets itself. In
// a region that is not the home, a shared bucket is a mirror of the
// home's, which the region's handle (region.Regional) creates.
type BucketOwner interface {
	OwnsBucket(name string) bool
}

// ensureKV creates or updates the bucket cfg names unless it exists with
// cfg's settings or as a mirror. A bucket that js owns (BucketOwner) is
// left to it; a mirror seen without its owner is left as it is.
func ensureKV(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) error {
	if o, ok := js.(BucketOwner); ok && o.OwnsBucket(cfg.Bucket) {
		_, err := js.CreateOrUpdateKeyValue(ctx, cfg)
		return err
	}
	s, err := js.Stream(ctx, kvStream(cfg.Bucket))
	switch {
	case err == nil && (s.CachedInfo().Config.Mirror != nil || streamSettled(s.CachedInfo().Config, kvStreamConfig(cfg))):
		return nil
	case err != nil && !errors.Is(err, jetstream.ErrStreamNotFound):
		return err
	}
	_, err = js.CreateOrUpdateKeyValue(ctx, cfg)
	return err
}

// ensureConsumer returns the durable consumer want names on s, creating or
// updating it unless it exists with want's settings.
func ensureConsumer(ctx context.Context, s jetstream.Stream, want jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	c, err := s.Consumer(ctx, want.Durable)
	if err == nil {
		have := c.CachedInfo().Config
		if have.AckPolicy == want.AckPolicy && have.AckWait == want.AckWait && have.MaxDeliver == want.MaxDeliver &&
			have.MaxWaiting == want.MaxWaiting && have.MaxAckPending == want.MaxAckPending &&
			(have.Replicas == want.Replicas || have.Replicas == 0) {
			return c, nil
		}
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, err
	}
	return s.CreateOrUpdateConsumer(ctx, want)
}

// kvStreamConfig is the part of the stream behind the bucket cfg that
// Setup's buckets set, as nats.go derives it.
func kvStreamConfig(cfg jetstream.KeyValueConfig) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:                   kvStream(cfg.Bucket),
		Subjects:               []string{"$KV." + cfg.Bucket + ".>"},
		MaxMsgsPerSubject:      int64(max(cfg.History, 1)),
		MaxAge:                 cfg.TTL,
		MaxBytes:               cfg.MaxBytes,
		Discard:                jetstream.DiscardNew,
		Storage:                cfg.Storage,
		Replicas:               max(cfg.Replicas, 1),
		AllowDirect:            true,
		AllowMsgTTL:            cfg.LimitMarkerTTL != 0,
		SubjectDeleteMarkerTTL: cfg.LimitMarkerTTL,
	}
}

// streamSettled reports whether a stream configured as have already has
// every setting Setup gives it in want. Settings want leaves zero are the
// server's to choose.
func streamSettled(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) &&
		have.Retention == want.Retention &&
		have.Storage == want.Storage &&
		have.Replicas == max(want.Replicas, 1) &&
		have.MaxAge == want.MaxAge &&
		have.MaxBytes == unlimitedIfZero(want.MaxBytes) && have.Discard == want.Discard &&
		(want.MaxMsgsPerSubject == 0 || have.MaxMsgsPerSubject == want.MaxMsgsPerSubject) &&
		(want.Duplicates == 0 || have.Duplicates == want.Duplicates) &&
		have.AllowDirect == want.AllowDirect &&
		have.AllowMsgTTL == want.AllowMsgTTL &&
		have.AllowAtomicPublish == want.AllowAtomicPublish &&
		have.SubjectDeleteMarkerTTL == want.SubjectDeleteMarkerTTL &&
		reflect.DeepEqual(have.RePublish, want.RePublish) &&
		hasMetadata(have.Metadata, want.Metadata)
}

// hasMetadata reports whether have holds every entry of want; the server
// adds entries of its own.
func hasMetadata(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// unlimitedIfZero is the MaxBytes the server stores for n: -1, no limit,
// for zero.
func unlimitedIfZero(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}

// kvStream is the stream behind a KV bucket.
func kvStream(bucket string) string { return "KV_" + bucket }
