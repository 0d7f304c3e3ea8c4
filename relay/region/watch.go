package region

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// watch merges a watcher of the mirror and one of the overlay, both
// started by start (so with the caller's options), into the view Get
// gives: for each key, every change of the newer of the two entries.
// The initial values of both come first, then one nil entry once both
// have sent theirs (never with UpdatesOnly). A key's overlay entry that
// is purged (reconciled) hands the key back to the mirror; with
// IgnoreDeletes that hand-over is not seen, which changes nothing once
// the mirror holds the reconciled write, as it does before the purge.
func (v *RegionalKV) watch(ctx context.Context, start func(jetstream.KeyValue) (jetstream.KeyWatcher, error)) (jetstream.KeyWatcher, error) {
	mw, err := start(v.KeyValue)
	if err != nil {
		return nil, err
	}
	ow, err := start(v.overlay)
	if err != nil {
		mw.Stop()
		return nil, err
	}
	w := &mergedWatcher{
		name:    v.name,
		mirror:  mw,
		overlay: ow,
		updates: make(chan jetstream.KeyValueEntry, 256),
		stop:    make(chan struct{}),
	}
	w.wg.Add(1)
	go w.run(ctx.Done())
	return w, nil
}

type mergedWatcher struct {
	name            string
	mirror, overlay jetstream.KeyWatcher
	updates         chan jetstream.KeyValueEntry
	stop            chan struct{}
	once            sync.Once
	wg              sync.WaitGroup
}

func (w *mergedWatcher) Updates() <-chan jetstream.KeyValueEntry { return w.updates }

// Stop stops both watchers and closes Updates. It is idempotent.
func (w *mergedWatcher) Stop() error {
	var err error
	w.once.Do(func() {
		close(w.stop)
		err = w.mirror.Stop()
		if oerr := w.overlay.Stop(); err == nil {
			err = oerr
		}
	})
	w.wg.Wait()
	return err
}

func (w *mergedWatcher) run(done <-chan struct{}) {
	defer w.wg.Done()
	defer close(w.updates)
	type pair struct{ mirror, overlay jetstream.KeyValueEntry }
	latest := map[string]*pair{}
	shown := map[string]jetstream.KeyValueEntry{}
	mch, och := w.mirror.Updates(), w.overlay.Updates()
	mInit, oInit, marked := false, false, false
	send := func(e jetstream.KeyValueEntry) bool {
		select {
		case w.updates <- e:
			return true
		case <-w.stop:
		case <-done:
		}
		return false
	}
	for mch != nil || och != nil {
		var e jetstream.KeyValueEntry
		var ok, fromOverlay bool
		select {
		case <-w.stop:
			return
		case <-done:
			return
		case e, ok = <-mch:
			if !ok {
				return // the mirror's watcher ended: so does the view
			}
		case e, ok = <-och:
			if !ok {
				och = nil // keep showing the mirror
				continue
			}
			fromOverlay = true
		}
		if e == nil {
			if fromOverlay {
				oInit = true
			} else {
				mInit = true
			}
			if mInit && oInit && !marked {
				marked = true
				if !send(nil) {
					return
				}
			}
			continue
		}
		p := latest[e.Key()]
		if p == nil {
			p = &pair{}
			latest[e.Key()] = p
		}
		if fromOverlay {
			e = overlayEntry{KeyValueEntry: e, bucket: w.name}
			p.overlay = e
		} else {
			p.mirror = e
		}
		show := newer(p.mirror, p.overlay)
		if show == nil {
			show = e // an overlay purge with nothing in the mirror
		}
		if prev, seen := shown[e.Key()]; seen && sameEntry(prev, show) {
			continue
		}
		shown[e.Key()] = show
		if !send(show) {
			return
		}
	}
}

func sameEntry(a, b jetstream.KeyValueEntry) bool {
	return a.Revision() == b.Revision() && a.Operation() == b.Operation()
}

// listKeys lists the keys with a value among w's initial values.
func listKeys(w jetstream.KeyWatcher) jetstream.KeyLister {
	l := &keyLister{w: w, keys: make(chan string, 256), stop: make(chan struct{})}
	go func() {
		defer close(l.keys)
		defer w.Stop()
		have := map[string]bool{}
		var order []string
		for e := range w.Updates() {
			if e == nil {
				break
			}
			if _, seen := have[e.Key()]; !seen {
				order = append(order, e.Key())
			}
			have[e.Key()] = e.Operation() == jetstream.KeyValuePut
		}
		for _, k := range order {
			if !have[k] {
				continue
			}
			select {
			case l.keys <- k:
			case <-l.stop:
				return
			}
		}
	}()
	return l
}

type keyLister struct {
	w    jetstream.KeyWatcher
	keys chan string
	stop chan struct{}
	once sync.Once
}

func (l *keyLister) Keys() <-chan string { return l.keys }

func (l *keyLister) Stop() error {
	l.once.Do(func() { close(l.stop) })
	return l.w.Stop()
}
