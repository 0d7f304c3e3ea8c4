package apikeys

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/provider"
)

func newRing(t *testing.T, p provider.Config) *Ring {
	t.Helper()
	r, err := NewRing(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func set(t *testing.T, r *Ring, key string, s State) {
	t.Helper()
	if _, _, ok := r.record(key, Result{State: s}); !ok {
		t.Fatalf("result of %s not recorded", key)
	}
}

func TestKeyPrefersAVerifiedKeyAndNeverAFailedOne(t *testing.T) {
	r := newRing(t, provider.Config{Name: "p", APIKeys: []string{"a", "b", "c"}})
	if k := r.Key(); k != "a" {
		t.Fatalf("Key() with nothing checked = %q, want a: unverified keys serve while none is verified", k)
	}
	set(t, r, "c", Verified)
	if k := r.Key(); k != "c" {
		t.Fatalf("Key() = %q, want c, the only verified key", k)
	}
	set(t, r, "a", Failed)
	if next, ok := r.Reject("c"); !ok || next != "b" {
		t.Fatalf("Reject(c) = %q, %v; want b: a failed its check", next, ok)
	}
	set(t, r, "b", Failed)
	if k := r.Key(); k != "c" {
		t.Fatalf("Key() = %q, want c: refused at run time, but the only key not failed", k)
	}
	if _, _, ok := r.record("c", Result{State: Failed}); ok {
		t.Fatal("a failed check was recorded over a verification")
	}
	if k := r.Key(); k != "c" {
		t.Fatalf("Key() = %q, want c: a failed check does not undo a verification", k)
	}
}

func TestKeyWithEveryCheckFailedIsTheFirst(t *testing.T) {
	r := newRing(t, provider.Config{Name: "p", APIKeys: []string{"a", "b"}})
	set(t, r, "a", Failed)
	set(t, r, "b", Failed)
	if k := r.Key(); k != "a" {
		t.Fatalf("Key() = %q, want a: the traffic judges when every check failed", k)
	}
	r.Accept("b")
	if k := r.Key(); k != "b" {
		t.Fatalf("Key() after a call with b succeeded = %q, want b", k)
	}
}

func TestPendingKeyWaitsWhileAVerifiedOneServes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	writeKeys(t, path, "good")
	r := newRing(t, provider.Config{Name: "p", APIKeysFile: path})
	set(t, r, "good", Verified)
	select {
	case <-r.changed: // the first read of the file
	default:
	}
	writeKeys(t, path, "new", "good")
	if changed, err := r.Reload(false); !changed || err != nil {
		t.Fatalf("Reload = %v, %v", changed, err)
	}
	select {
	case <-r.changed:
	default:
		t.Fatal("a new key did not wake the verifier")
	}
	if k := r.Key(); k != "good" {
		t.Fatalf("Key() = %q, want good: new is not verified yet", k)
	}
	if p := r.pending(); !slices.Equal(p, []string{"new"}) {
		t.Fatalf("pending = %q, want only the new key", p)
	}
	set(t, r, "new", Verified)
	if k := r.Key(); k != "new" {
		t.Fatalf("Key() = %q, want new once verified (first in the file)", k)
	}
	writeKeys(t, path, "good")
	if _, err := r.Reload(false); err != nil {
		t.Fatal(err)
	}
	st := r.Status()
	if len(st) != 1 || st[0].State != Verified || st[0].Index != 0 {
		t.Fatalf("status after the new key left = %+v, want good alone, still verified", st)
	}
}

func TestRecheckForgetsFailures(t *testing.T) {
	r := newRing(t, provider.Config{Name: "p", APIKeys: []string{"a", "b"}})
	set(t, r, "a", Failed)
	set(t, r, "b", Verified)
	r.Recheck()
	if p := r.pending(); !slices.Equal(p, []string{"a"}) {
		t.Fatalf("pending after Recheck = %q, want a", p)
	}
}

func TestStatusNamesKeysByFingerprint(t *testing.T) {
	off := false
	r := newRing(t, provider.Config{Name: "p", APIKeys: []string{"sk-secret-1", "sk-secret-2"}, VerifyKeys: &off})
	st := r.Status()
	if len(st) != 2 || st[0].State != Unchecked || st[1].Index != 1 {
		t.Fatalf("status = %+v, want two unchecked keys", st)
	}
	for _, s := range st {
		if strings.Contains(s.Fingerprint, "secret") || !strings.HasPrefix(s.Fingerprint, "sha256:") || len(s.Fingerprint) != len("sha256:")+12 {
			t.Fatalf("fingerprint %q", s.Fingerprint)
		}
	}
	if st[0].Fingerprint == st[1].Fingerprint || Fingerprint("sk-secret-1") != st[0].Fingerprint {
		t.Fatalf("fingerprints %q, %q: not one per key", st[0].Fingerprint, st[1].Fingerprint)
	}
	r.Accept("sk-secret-2")
	if st := r.Status(); st[1].State != Unchecked {
		t.Fatalf("a call verified a key although verify_keys is off: %+v", st[1])
	}
}
