package dfs

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/spindle-ps/spindle/internal/hadoop/creds"
	hpb "github.com/spindle-ps/spindle/internal/hadoop/proto"
	"github.com/spindle-ps/spindle/internal/hadoop/sasl"
)

// saslAnswer is a DataNode's message of the exchange, length-delimited.
func saslAnswer(t testing.TB, status hpb.DataTransferEncryptorMessageProto_DataTransferEncryptorStatus, payload []byte, msg string) []byte {
	m, err := proto.Marshal(&hpb.DataTransferEncryptorMessageProto{Status: status.Enum(), Payload: payload, Message: proto.String(msg)})
	if err != nil {
		t.Fatal(err)
	}
	return append(protowire.AppendVarint(nil, uint64(len(m))), m...)
}

// TestDataNodeSASLExchange: the client opens with the magic number and
// an empty SUCCESS message, answers the DataNode's challenge for the qop
// it accepts, and fails, saying why, when the DataNode refuses the token,
// offers no qop it accepts, or sends a malformed or oversized answer.
func TestDataNodeSASLExchange(t *testing.T) {
	t.Parallel()
	tok := &blockToken{identifier: []byte("id"), password: []byte("pw")}
	challenge := []byte(`realm="0",nonce="bm9uY2U=",qop="auth-conf",charset=utf-8,cipher="rc4",algorithm=md5-sess`)
	for _, tc := range []struct {
		name    string
		answers func(t testing.TB) []byte // what the DataNode sends, all at once
		prefer  []string
		want    string
	}{
		{"token refused", func(t testing.TB) []byte {
			return saslAnswer(t, hpb.DataTransferEncryptorMessageProto_ERROR, nil, "Block token with block_token_identifier (expiryDate=1) is expired.")
		}, []string{sasl.QOPPrivacy}, "the DataNode refused: Block token with"},
		{"unknown key", func(t testing.TB) []byte {
			return saslAnswer(t, hpb.DataTransferEncryptorMessageProto_ERROR_UNKNOWN_KEY, nil, "Can't re-compute encryption key")
		}, []string{sasl.QOPPrivacy}, "does not know the key: Can't"},
		{"qop", func(t testing.TB) []byte {
			return saslAnswer(t, hpb.DataTransferEncryptorMessageProto_SUCCESS, challenge, "")
		}, []string{sasl.QOPIntegrity}, "server offers qop [auth-conf], the client accepts [auth-int] (dfs.data.transfer.protection)"},
		{"wrong rspauth", func(t testing.TB) []byte {
			return append(saslAnswer(t, hpb.DataTransferEncryptorMessageProto_SUCCESS, challenge, ""),
				saslAnswer(t, hpb.DataTransferEncryptorMessageProto_SUCCESS, []byte("rspauth=00000000000000000000000000000000"), "")...)
		}, []string{sasl.QOPPrivacy}, "rspauth"},
		{"oversized", func(testing.TB) []byte { return protowire.AppendVarint(nil, maxSASLMessage+1) }, []string{sasl.QOPPrivacy}, "exceeds"},
		{"malformed", func(testing.TB) []byte { return []byte{3, 0xff, 0xff, 0xff} }, []string{sasl.QOPPrivacy}, "the DataNode's answer"},
		{"cut off", func(testing.TB) []byte { return []byte{10, 8} }, []string{sasl.QOPPrivacy}, io.ErrUnexpectedEOF.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, dn := net.Pipe()
			defer client.Close()
			client.SetDeadline(time.Now().Add(10 * time.Second))
			sent := make(chan []byte, 1)
			go func() {
				defer dn.Close()
				// The opening: magic, then an empty SUCCESS message.
				br := bufio.NewReader(dn)
				head := make([]byte, 4)
				io.ReadFull(br, head)
				n, _ := binary.ReadUvarint(br)
				m := make([]byte, n)
				io.ReadFull(br, m)
				sent <- append(head, m...)
				go io.Copy(io.Discard, br) // the client's answer, if any
				dn.Write(tc.answers(t))
			}()
			_, err := saslHandshake(client, tok, tc.prefer, false)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("handshake: %v; want an error saying %q", err, tc.want)
			}
			opening := <-sent
			if binary.BigEndian.Uint32(opening) != saslMagic {
				t.Errorf("opened with %x, want the magic number", opening[:4])
			}
			m := &hpb.DataTransferEncryptorMessageProto{}
			if err := proto.Unmarshal(opening[4:], m); err != nil || m.GetStatus() != hpb.DataTransferEncryptorMessageProto_SUCCESS || len(m.GetPayload()) != 0 {
				t.Errorf("the opening message: %v, %v; want an empty SUCCESS", m, err)
			}
		})
	}
}

// TestBlockTokenExpiry reads the expiry date from both forms of a block
// token identifier and refuses what is neither.
func TestBlockTokenExpiry(t *testing.T) {
	t.Parallel()
	when := time.UnixMilli(1_800_000_000_123)
	writable := creds.AppendVLong(nil, when.UnixMilli())
	writable = creds.AppendVLong(writable, 7) // keyId
	writable = append(writable, 5, 'a', 'l', 'i', 'c', 'e')
	pb := protowire.AppendTag(nil, 1, protowire.VarintType)
	pb = protowire.AppendVarint(pb, uint64(when.UnixMilli()))
	pb = protowire.AppendTag(pb, 2, protowire.VarintType)
	pb = protowire.AppendVarint(pb, 7)
	for _, tc := range []struct {
		name string
		id   []byte
		ok   bool
	}{
		{"writable", writable, true},
		{"protobuf", pb, true},
		{"empty", nil, false},
		{"small number", []byte{8, 1}, false},
		{"garbage", bytes.Repeat([]byte{0xff}, 12), false},
	} {
		got, ok := blockTokenExpiry(tc.id)
		if ok != tc.ok || (ok && !got.Equal(when)) {
			t.Errorf("%s: %v, %v; want %v, %v", tc.name, got, ok, when, tc.ok)
		}
	}
	if (&blockToken{expiry: time.Now().Add(blockTokenMargin / 2)}).fresh(time.Now()) {
		t.Error("a token about to expire counts as fresh")
	}
}

// FuzzReadSASLMessage reads arbitrary bytes as a DataNode's answer:
// nothing panics, and a payload comes only from a SUCCESS message that
// fits the bound.
func FuzzReadSASLMessage(f *testing.F) {
	f.Add(saslAnswer(f, hpb.DataTransferEncryptorMessageProto_SUCCESS, []byte("realm=\"0\""), ""))
	f.Add(saslAnswer(f, hpb.DataTransferEncryptorMessageProto_ERROR, nil, "no"))
	f.Add(protowire.AppendVarint(nil, maxSASLMessage+1))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		payload, err := readSASLMessage(bytes.NewReader(b))
		if err != nil {
			return
		}
		n, k := protowire.ConsumeVarint(b)
		if k < 0 || n > maxSASLMessage || len(payload) > int(n) {
			t.Fatalf("accepted %x: payload of %d bytes", b, len(payload))
		}
	})
}

// clearLayer is a sasl.Layer that wraps nothing, for the cipher
// negotiation's tests: the keys it unwraps are the bytes given.
type clearLayer struct{}

func (clearLayer) Wrap(m []byte) ([]byte, error)   { return m, nil }
func (clearLayer) Unwrap(t []byte) ([]byte, error) { return t, nil }

// TestAESStreams: after a SASL exchange that chose AES-CTR, the client
// writes with the DataNode's "in" key and IV and reads with its "out"
// ones, as Hadoop's AES/CTR/NoPadding streams count (the IV the first
// counter block: NIST SP 800-38A, F.5.1); a cipher option it cannot use
// fails the connection with what is wrong.
func TestAESStreams(t *testing.T) {
	t.Parallel()
	hexb := func(s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	key := hexb("2b7e151628aed2a6abf7158809cf4f3c")
	iv := hexb("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")
	plain := hexb("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51")
	cipherText := hexb("874d6191b620e3261bef6864990db6ce9806f66b7970fdff8617187bb9fffdff")
	other := bytes.Repeat([]byte{7}, 16)
	opt := func(inKey, inIV, outKey, outIV []byte) *hpb.CipherOptionProto {
		return &hpb.CipherOptionProto{Suite: hpb.CipherSuiteProto_AES_CTR_NOPADDING.Enum(), InKey: inKey, InIv: inIV, OutKey: outKey, OutIv: outIV}
	}

	// Writes: the client's plaintext leaves encrypted with the in key.
	client, dn := net.Pipe()
	defer client.Close()
	c, err := aesStreams(client, clearLayer{}, opt(key, iv, other, other))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(cipherText))
		_, err := io.ReadFull(dn, b)
		if err != nil {
			b = nil
		}
		got <- b
	}()
	// In two pieces: the stream goes on across writes.
	if _, err := c.Write(plain[:5]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(plain[5:]); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, cipherText) {
		t.Fatalf("sent %x, want %x", b, cipherText)
	}
	// Reads: what the DataNode sends decrypts with the out key.
	client2, dn2 := net.Pipe()
	defer client2.Close()
	c2, err := aesStreams(client2, clearLayer{}, opt(other, other, key, iv))
	if err != nil {
		t.Fatal(err)
	}
	go func() { dn2.Write(cipherText); dn2.Close() }()
	if b, err := io.ReadAll(c2); err != nil || !bytes.Equal(b, plain) {
		t.Fatalf("read %x, %v; want %x", b, err, plain)
	}
	// A write that fails fails every later one.
	dn.Close()
	if _, err := c.Write(plain); err == nil {
		t.Fatal("a write to a closed DataNode succeeded")
	}
	if _, err := c.Write(plain); err == nil || !strings.Contains(err.Error(), "encrypted DataNode connection") {
		t.Fatalf("the write after a failed one: %v; want the first failure again", err)
	}

	for _, tc := range []struct {
		name string
		opt  *hpb.CipherOptionProto
		want string
	}{
		{"suite", &hpb.CipherOptionProto{Suite: hpb.CipherSuiteProto_UNKNOWN.Enum(), InKey: key, InIv: iv, OutKey: key, OutIv: iv}, "chose cipher suite UNKNOWN"},
		{"short IV", opt(key, iv[:8], key, iv), "IV has 8 bytes, want 16"},
		{"no out IV", opt(key, iv, key, nil), "IV has 0 bytes"},
		{"key length", opt(key[:5], iv, key, iv), "AES key"},
		{"no key", opt(key, iv, nil, iv), "AES key"},
	} {
		p, _ := net.Pipe()
		if _, err := aesStreams(p, clearLayer{}, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error saying %q", tc.name, err, tc.want)
		}
		p.Close()
	}
}
