package tokenpb

import (
	"encoding/base64"
	"testing"
)

// FuzzParseIdentifiers feeds arbitrary bytes to every identifier parser:
// none may panic, and an AMRM identifier that parses must marshal to
// bytes that parse to the same identifier.
func FuzzParseIdentifiers(f *testing.F) {
	// The identifier of a real AMRMToken (appattempt_1577164554399_0013_000001).
	real, _ := base64.StdEncoding.DecodeString("Cg0KCQgNEJ+B1bLzLRABEPyn5rED")
	f.Add(real)
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		if id, err := ParseAMRMIdentifier(b); err == nil {
			enc, err := id.Marshal()
			if err != nil {
				t.Fatalf("marshal %+v: %v", id, err)
			}
			again, err := ParseAMRMIdentifier(enc)
			if err != nil || again != id {
				t.Fatalf("AMRM identifier %+v did not survive a round trip: %+v, %v", id, again, err)
			}
			_ = id.AttemptString()
		}
		if id, err := ParseNMIdentifier(b); err == nil {
			_ = id.AttemptString()
		}
		_, _ = ParseContainerIdentifier(b)
	})
}
