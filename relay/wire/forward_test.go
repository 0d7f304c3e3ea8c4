package wire

import "testing"

func TestForwardReplySubject(t *testing.T) {
	if s := ForwardReplySubject("abc"); s != "relay.forward.reply.abc" || !IsForwardReplySubject(s) {
		t.Fatalf("ForwardReplySubject(abc) = %q", s)
	}
	for _, s := range []string{"", "_INBOX.x", "relay.forward.reply.", "relay.forward.reply.a.b", "relay.forward.reply.*", "relay.requests"} {
		if IsForwardReplySubject(s) {
			t.Errorf("IsForwardReplySubject(%q) = true", s)
		}
	}
}

func TestForwardPieceSizeLeavesRoomForHeaders(t *testing.T) {
	if got := ForwardPieceSize(1 << 20); got >= 1<<20 || got < 1<<19 {
		t.Fatalf("ForwardPieceSize(1 MiB) = %d", got)
	}
	if got := ForwardPieceSize(100); got <= 0 || got >= 100 {
		t.Fatalf("ForwardPieceSize(100) = %d", got)
	}
}
