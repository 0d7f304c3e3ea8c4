package region

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// RegionalKV is a shared bucket as a region that is not the home sees it:
// the local mirror of the home's bucket, with the region's overlay on top.
//
//   - Get, Watch*, Keys and ListKeys* give, per key, the newer by stored
//     time of the mirror's entry and the overlay's (a tie goes to the
//     home). Revisions of overlay entries carry a marker bit, so an Update
//     with one goes to the overlay; treat revisions as opaque.
//   - Put, Create, Update, Delete and Purge go to the home (nats.go sends
//     a mirror's writes to its origin's domain). When the home does not
//     answer within Region.HomeTimeout, they go to the overlay instead,
//     with the same compare-and-set rules against what the region sees;
//     later writes go straight to the overlay until Regional.Run finds the
//     home answering again (or 10s passed).
//     While the home is unreachable, Delete and Purge are unconditional,
//     and both leave a delete marker in the overlay.
//   - GetRevision, History and Status read the mirror alone.
type RegionalKV struct {
	jetstream.KeyValue // the mirror
	g                  *Regional
	name               string
	mirrorStream       jetstream.Stream
	overlay            jetstream.KeyValue
	overlayStream      jetstream.Stream
	home               jetstream.Stream // the home's stream, once looked up (Regional.mu)
}

// Overlay is the region-local bucket that holds the region's writes made
// while the home was unreachable.
func (v *RegionalKV) Overlay() jetstream.KeyValue { return v.overlay }

// toHome runs write against the home within the home timeout. handled is
// false when the home is unreachable: the write then belongs to the
// overlay.
func (v *RegionalKV) toHome(ctx context.Context, write func(context.Context) (uint64, error)) (rev uint64, handled bool, err error) {
	if !v.g.homeReachable() {
		return 0, false, nil
	}
	hctx, cancel := context.WithTimeout(ctx, v.g.region.HomeTimeout)
	defer cancel()
	rev, err = write(hctx)
	if err != nil && unreachable(ctx, err) {
		v.g.homeFailed()
		return 0, false, nil
	}
	v.g.homeAnswered()
	return rev, true, err
}

// Get returns the key's entry as the region sees it.
func (v *RegionalKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	m, o, err := v.entries(ctx, key)
	if err != nil {
		return nil, err
	}
	e := newer(m, o)
	if e == nil || e.Operation() != jetstream.KeyValuePut {
		return nil, jetstream.ErrKeyNotFound
	}
	return e, nil
}

// entries reads the key's latest mirror and overlay entries (nil where
// there is none), deletes and purges included.
func (v *RegionalKV) entries(ctx context.Context, key string) (mirror, overlay jetstream.KeyValueEntry, err error) {
	mirror, err = lastEntry(ctx, v.mirrorStream, v.name, key, "$KV."+v.name+".", 0)
	if err != nil {
		return nil, nil, err
	}
	overlay, err = lastEntry(ctx, v.overlayStream, v.name, key, "$KV."+OverlayBucket(v.name)+".", overlayRevision)
	if err != nil {
		return nil, nil, err
	}
	return mirror, overlay, nil
}

// Put writes value to the home, or to the overlay while the home is
// unreachable.
func (v *RegionalKV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, ok, err := v.toHome(ctx, func(ctx context.Context) (uint64, error) { return v.KeyValue.Put(ctx, key, value) })
	if ok {
		return rev, err
	}
	return tagged(v.overlay.Put(ctx, key, value))
}

// PutString is Put with a string.
func (v *RegionalKV) PutString(ctx context.Context, key, value string) (uint64, error) {
	return v.Put(ctx, key, []byte(value))
}

// Create writes value if the key has no value, in the home; while the
// home is unreachable, if it has none as the region sees it (so two
// regions cut apart may both create it: see configs/README.md "Regions").
func (v *RegionalKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	rev, ok, err := v.toHome(ctx, func(ctx context.Context) (uint64, error) { return v.KeyValue.Create(ctx, key, value, opts...) })
	if ok {
		return rev, err
	}
	m, o, err := v.entries(ctx, key)
	if err != nil {
		return 0, err
	}
	if e := newer(m, o); e != nil && e.Operation() == jetstream.KeyValuePut {
		return 0, fmt.Errorf("region: %s/%s: %w", v.name, key, jetstream.ErrKeyExists)
	}
	if o != nil && o.Operation() == jetstream.KeyValuePut {
		// An older overlay value, shadowed by a newer delete in the home.
		return tagged(v.overlay.Update(ctx, key, value, o.Revision()&^overlayRevision))
	}
	return tagged(v.overlay.Create(ctx, key, value, opts...))
}

// Update writes value if revision is the key's latest: in the home for a
// home revision; in the overlay for an overlay revision, or for a home
// revision while the home is unreachable.
func (v *RegionalKV) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	if revision&overlayRevision != 0 {
		return tagged(v.overlay.Update(ctx, key, value, revision&^overlayRevision))
	}
	rev, ok, err := v.toHome(ctx, func(ctx context.Context) (uint64, error) { return v.KeyValue.Update(ctx, key, value, revision) })
	if ok {
		return rev, err
	}
	m, o, err := v.entries(ctx, key)
	if err != nil {
		return 0, err
	}
	current := uint64(0)
	if m != nil {
		current = m.Revision()
	}
	if current != revision || newer(m, o) != m {
		return 0, wrongRevision(v.name, key, revision)
	}
	if o == nil {
		return tagged(v.overlay.Create(ctx, key, value))
	}
	// A purge marker, or an older entry the home's latest shadows.
	return tagged(v.overlay.Update(ctx, key, value, o.Revision()&^overlayRevision))
}

// Delete deletes the key in the home, or marks it deleted in the overlay
// while the home is unreachable (then ignoring opts).
func (v *RegionalKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	_, ok, err := v.toHome(ctx, func(ctx context.Context) (uint64, error) { return 0, v.KeyValue.Delete(ctx, key, opts...) })
	if ok {
		return err
	}
	return v.overlay.Delete(ctx, key)
}

// Purge purges the key in the home, or marks it deleted in the overlay
// while the home is unreachable (then ignoring opts).
func (v *RegionalKV) Purge(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	_, ok, err := v.toHome(ctx, func(ctx context.Context) (uint64, error) { return 0, v.KeyValue.Purge(ctx, key, opts...) })
	if ok {
		return err
	}
	return v.overlay.Delete(ctx, key)
}

// Watch watches keys (a subject filter) as the region sees them; see
// mergedWatch for how opts apply.
func (v *RegionalKV) Watch(ctx context.Context, keys string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	return v.watch(ctx, func(kv jetstream.KeyValue) (jetstream.KeyWatcher, error) { return kv.Watch(ctx, keys, opts...) })
}

// WatchAll watches every key as the region sees it.
func (v *RegionalKV) WatchAll(ctx context.Context, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	return v.watch(ctx, func(kv jetstream.KeyValue) (jetstream.KeyWatcher, error) { return kv.WatchAll(ctx, opts...) })
}

// WatchFiltered watches the keys matching any of filters.
func (v *RegionalKV) WatchFiltered(ctx context.Context, filters []string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	return v.watch(ctx, func(kv jetstream.KeyValue) (jetstream.KeyWatcher, error) {
		// nats.go turns the filters into subjects in place.
		return kv.WatchFiltered(ctx, slices.Clone(filters), opts...)
	})
}

// Keys lists the keys that have a value as the region sees it.
func (v *RegionalKV) Keys(ctx context.Context, opts ...jetstream.WatchOpt) ([]string, error) {
	l, err := v.ListKeys(ctx, opts...)
	if err != nil {
		return nil, err
	}
	var keys []string
	for k := range l.Keys() {
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, jetstream.ErrNoKeysFound
	}
	return keys, nil
}

// ListKeys lists the keys that have a value as the region sees it.
func (v *RegionalKV) ListKeys(ctx context.Context, opts ...jetstream.WatchOpt) (jetstream.KeyLister, error) {
	w, err := v.WatchAll(ctx, append(opts, jetstream.MetaOnly())...)
	if err != nil {
		return nil, err
	}
	return listKeys(w), nil
}

// ListKeysFiltered lists the keys matching any of filters.
func (v *RegionalKV) ListKeysFiltered(ctx context.Context, filters ...string) (jetstream.KeyLister, error) {
	w, err := v.WatchFiltered(ctx, filters, jetstream.MetaOnly())
	if err != nil {
		return nil, err
	}
	return listKeys(w), nil
}

// newer is the entry the region sees for a key: the overlay's if it is
// newer than the mirror's (a purged overlay entry counts as none).
func newer(mirror, overlay jetstream.KeyValueEntry) jetstream.KeyValueEntry {
	if overlay == nil || overlay.Operation() == jetstream.KeyValuePurge {
		return mirror
	}
	if mirror == nil || overlay.Created().After(mirror.Created()) {
		return overlay
	}
	return mirror
}

// tagged marks an overlay revision.
func tagged(rev uint64, err error) (uint64, error) {
	if err != nil {
		return 0, err
	}
	return rev | overlayRevision, nil
}

// wrongRevision is the error JetStream gives a compare-and-set that
// lost, so callers check it the same way (errors.Is ErrKeyExists, or
// APIError code 10071).
func wrongRevision(bucket, key string, rev uint64) error {
	return &jetstream.APIError{
		Code:        400,
		ErrorCode:   jetstream.JSErrCodeStreamWrongLastSequence,
		Description: fmt.Sprintf("wrong last sequence: %s/%s is not at revision %d", bucket, key, rev),
	}
}

// lastEntry reads the latest message of key from a KV stream with a
// direct get, as an entry of bucket (revision ORed with mark).
func lastEntry(ctx context.Context, s jetstream.Stream, bucket, key, prefix string, mark uint64) (jetstream.KeyValueEntry, error) {
	m, err := s.GetLastMsgForSubject(ctx, prefix+key)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("region: %s/%s: %w", bucket, key, err)
	}
	e := &entry{bucket: bucket, key: key, value: m.Data, revision: m.Sequence | mark, created: m.Time}
	switch m.Header.Get("KV-Operation") {
	case "DEL":
		e.op = jetstream.KeyValueDelete
	case "PURGE":
		e.op = jetstream.KeyValuePurge
	default:
		switch m.Header.Get(jetstream.MarkerReasonHeader) {
		case "MaxAge", "Purge":
			e.op = jetstream.KeyValuePurge
		case "Remove":
			e.op = jetstream.KeyValueDelete
		}
	}
	return e, nil
}

type entry struct {
	bucket, key string
	value       []byte
	revision    uint64
	created     time.Time
	op          jetstream.KeyValueOp
}

func (e *entry) Bucket() string                  { return e.bucket }
func (e *entry) Key() string                     { return e.key }
func (e *entry) Value() []byte                   { return e.value }
func (e *entry) Revision() uint64                { return e.revision }
func (e *entry) Created() time.Time              { return e.created }
func (e *entry) Delta() uint64                   { return 0 }
func (e *entry) Operation() jetstream.KeyValueOp { return e.op }

// overlayEntry is an overlay entry presented as one of the shared bucket.
type overlayEntry struct {
	jetstream.KeyValueEntry
	bucket string
}

func (e overlayEntry) Bucket() string   { return e.bucket }
func (e overlayEntry) Revision() uint64 { return e.KeyValueEntry.Revision() | overlayRevision }
