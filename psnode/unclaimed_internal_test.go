package psnode

import (
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// TestUnclaimedBounds: a server keeps the messages for apps it has not
// created yet within the bound of one app's queue, of a count over every
// app and of their bytes (but always one message when nothing else
// waits); a request beyond them is answered at once with an error naming
// the app, and what was kept is let go after appGrace.
func TestUnclaimedBounds(t *testing.T) {
	n := fuzzNode(t, fuzzServerRunning, "", false)
	defer n.Close()
	w := transport.WorkerID(0)
	req := func(app int32, data ...[]byte) *transport.Message {
		return &transport.Message{Meta: transport.Meta{Sender: w, Recver: n.me.ID, AppID: app, Request: true, Push: true, Timestamp: 9}, Data: data}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	wantDropped := func(what string, m *transport.Message) {
		t.Helper()
		r := n.holdLocked(m)
		if r == nil || r.Meta.Status != 1 || r.Meta.Recver != w || r.Meta.Timestamp != 9 ||
			!strings.Contains(string(r.Meta.Body), "runs no app") {
			t.Fatalf("%s: reply %v, want an error to worker 0 naming the app", what, r)
		}
	}

	// One app: its queue's worth.
	for i := 0; i < customerQueue; i++ {
		if r := n.holdLocked(req(7)); r != nil {
			t.Fatalf("message %d for app 7 dropped: %s", i, r.Meta.Body)
		}
	}
	wantDropped("one more for app 7", req(7))

	// Many apps: maxUnclaimed over all.
	for app := int32(100); n.heldMsgs < maxUnclaimed; app++ {
		if r := n.holdLocked(req(app)); r != nil {
			t.Fatalf("message %d for app %d dropped: %s", n.heldMsgs, app, r.Meta.Body)
		}
	}
	wantDropped("a message for yet another app", req(1<<30))
	if resp := n.holdLocked(&transport.Message{Meta: transport.Meta{Sender: w, AppID: 1 << 29}}); resp != nil {
		t.Fatalf("a dropped response was answered: %v", resp)
	}

	// After appGrace everything goes, each request answered.
	replies := n.expireUnclaimedLocked(n.now().Add(appGrace + time.Second))
	if len(replies) != maxUnclaimed || n.heldMsgs != 0 || n.heldBytes != 0 || len(n.unclaimed) != 0 {
		t.Fatalf("after appGrace: %d replies, %d messages of %d bytes in %d apps kept, want %d replies and nothing kept",
			len(replies), n.heldMsgs, n.heldBytes, len(n.unclaimed), maxUnclaimed)
	}

	// Bytes: a message larger than the bound is kept alone, nothing after it.
	huge := make([]byte, maxUnclaimedBytes+1) // never written: the pages stay untouched
	if r := n.holdLocked(req(3, huge)); r != nil {
		t.Fatalf("a large message waiting alone dropped: %s", r.Meta.Body)
	}
	wantDropped("a message after a large one", req(4, []byte{1}))
	n.expireUnclaimedLocked(n.now().Add(appGrace + time.Second))
	mib := make([]byte, 1<<20) // the messages share it; each counts its size
	for i := 0; i < maxUnclaimedBytes>>20; i++ {
		if r := n.holdLocked(req(5, mib)); r != nil {
			t.Fatalf("MiB %d dropped: %s", i, r.Meta.Body)
		}
	}
	wantDropped("one MiB more than the bound", req(6, mib))
	if n.heldBytes != maxUnclaimedBytes {
		t.Fatalf("%d bytes kept, want %d", n.heldBytes, maxUnclaimedBytes)
	}
}
