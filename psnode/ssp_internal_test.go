package psnode

import "testing"

func TestSSPCommandRoundTrip(t *testing.T) {
	for _, c := range []Clock{{0, 0}, {1, 7}, {3, MaxSteps - 1}, {4, 0}, {1001, 12345}} {
		e, s, idle, ok := sspDecode(sspCommand(c))
		if !ok || idle || e != uint8(c.Epoch&3) || s != int64(c.Step) {
			t.Errorf("%+v: decoded epoch %d step %d idle %v ok %v", c, e, s, idle, ok)
		}
	}
	for epoch := 0; epoch < 9; epoch++ {
		e, _, idle, ok := sspDecode(sspIdleCommand(epoch))
		if !ok || !idle || e != uint8(epoch&3) {
			t.Errorf("idle in epoch %d: decoded epoch %d idle %v ok %v", epoch, e, idle, ok)
		}
	}
	for _, cmd := range []int32{-5, -1 << 31, 1<<30 + 1, 1<<31 - 1} {
		if _, _, _, ok := sspDecode(cmd); ok {
			t.Errorf("command %d decoded as a bounded-delay command", cmd)
		}
	}
}

// FuzzSSPDecode: any command decodes without panicking, and a decoded
// command encodes back to itself.
func FuzzSSPDecode(f *testing.F) {
	for _, c := range []int32{0, 1, -1, -4, -5, 1 << 30, 1<<30 + 1} {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, cmd int32) {
		e, s, idle, ok := sspDecode(cmd)
		if !ok {
			return
		}
		back := sspIdleCommand(int(e))
		if !idle {
			back = sspCommand(Clock{Epoch: int(e), Step: int(s)})
		}
		if back != cmd {
			t.Fatalf("command %d decodes to epoch %d step %d idle %v, which encodes to %d", cmd, e, s, idle, back)
		}
	})
}
