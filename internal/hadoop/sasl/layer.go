package sasl

import (
	"crypto/cipher"
	"crypto/des"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rc4"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"math/bits"
	"sync"
)

// Layer protects a connection's messages after the handshake: the
// security layer of qop auth-int (RFC 2831 §2.3) or auth-conf (§2.4).
//
// A Layer counts the messages of each direction, so every message must
// go through it once and in the order it is sent or received. Wrap and
// Unwrap may run at the same time as each other. An Unwrap that fails
// changes nothing; the connection should still be closed, as its peer or
// someone between them no longer follows the protocol.
type Layer interface {
	Wrap(msg []byte) ([]byte, error)     // client → server
	Unwrap(token []byte) ([]byte, error) // server → client; error if the MAC or sequence number is wrong
}

// MaxMessage bounds a message given to Wrap and a token given to Unwrap:
// far above what Hadoop sends in one piece (its clients split requests to
// the server's maxbuf), and far below what would overflow.
const MaxMessage = 1 << 28

// The parts of a wrapped token besides the message (RFC 2831 §2.3).
const (
	macLen     = 10 // HMAC-MD5 truncated
	trailerLen = 6  // message type 0x0001, then the sequence number
)

// RawSendSize returns the largest message to give l.Wrap at a time, so
// that the wrapped token fits the server's maxbuf: what Java's DIGEST-MD5
// reports as javax.security.sasl.rawsendsize and Hadoop's client splits
// its requests into. It returns 0 for a nil Layer or one not made by
// Respond.
func RawSendSize(l Layer) int {
	if dl, ok := l.(*digestLayer); ok {
		return dl.rawSendSize
	}
	return 0
}

// Confidential reports whether l encrypts (qop auth-conf), as a Layer
// made by Respond does.
func Confidential(l Layer) bool {
	dl, ok := l.(*digestLayer)
	return ok && dl.open != nil && dl.seal != nil
}

// Magic constants of the key derivations (RFC 2831 §2.3, §2.4).
const (
	clientSignMagic = "Digest session key to client-to-server signing key magic constant"
	serverSignMagic = "Digest session key to server-to-client signing key magic constant"
	clientSealMagic = "Digest H(A1) to client-to-server sealing key magic constant"
	serverSealMagic = "Digest H(A1) to server-to-client sealing key magic constant"
)

// digestLayer is the Layer of auth-int (seal and open nil) and auth-conf.
// The send and receive halves share nothing, so Wrap and Unwrap each lock
// only their own.
type digestLayer struct {
	rawSendSize int

	sendMu  sync.Mutex
	sendMAC hash.Hash // HMAC-MD5 keyed with Kic
	sendSeq uint64    // the next sequence number; past 2^32-1 none is left
	seal    sealer

	recvMu  sync.Mutex
	recvMAC hash.Hash // HMAC-MD5 keyed with Kis
	recvSeq uint64
	open    opener
}

// sealer encrypts one message's plaintext in place, going on from the
// previous one (RC4's stream, CBC's chain).
type sealer interface {
	blockSize() int
	seal(b []byte)
}

// opener decrypts one message's ciphertext into a new slice without
// changing its state; commit then advances it past that message.
type opener interface {
	blockSize() int
	open(b []byte) (plain []byte, commit func())
}

// newLayer makes the client's Layer for qop (auth-int or auth-conf) and
// cipher from H(A1), the raw MD5 of A1, for a server of maxbuf maxBuf.
func newLayer(ha1 [md5.Size]byte, qop, cipherName string, maxBuf int) (*digestLayer, error) {
	overhead := macLen + trailerLen // 16, as Java counts it for auth-int
	if qop == QOPPrivacy {
		overhead = 26 // and for auth-conf, whatever the cipher's padding
	}
	if maxBuf <= overhead {
		return nil, fmt.Errorf("sasl: server maxbuf %d leaves no room for a message with %s", maxBuf, qop)
	}
	l := &digestLayer{
		rawSendSize: maxBuf - overhead,
		sendMAC:     hmac.New(md5.New, kdf(ha1[:], clientSignMagic)),
		recvMAC:     hmac.New(md5.New, kdf(ha1[:], serverSignMagic)),
	}
	if qop != QOPPrivacy {
		return l, nil
	}
	// Kcc and Kcs use the first n bytes of H(A1): all 16 for rc4 and 3des.
	kcc, kcs := kdf(ha1[:16], clientSealMagic), kdf(ha1[:16], serverSealMagic)
	switch cipherName {
	case CipherRC4:
		enc, err := rc4.NewCipher(kcc)
		if err != nil {
			return nil, err
		}
		dec, err := rc4.NewCipher(kcs)
		if err != nil {
			return nil, err
		}
		l.seal, l.open = &rc4Stream{c: *enc}, &rc4Stream{c: *dec}
	case Cipher3DES:
		enc, err := newDES3Chain(kcc)
		if err != nil {
			return nil, err
		}
		dec, err := newDES3Chain(kcs)
		if err != nil {
			return nil, err
		}
		l.seal, l.open = enc, dec
	default:
		return nil, fmt.Errorf("sasl: cipher %q is not supported", cipherName)
	}
	return l, nil
}

// kdf returns MD5(key || magic).
func kdf(key []byte, magic string) []byte {
	h := md5.New()
	h.Write(key)
	h.Write([]byte(magic))
	return h.Sum(nil)
}

// mac returns the first 10 bytes of HMAC-MD5(key, seq || msg), with h keyed.
func mac(h hash.Hash, seq uint32, msg []byte) []byte {
	h.Reset()
	var s [4]byte
	binary.BigEndian.PutUint32(s[:], seq)
	h.Write(s[:])
	h.Write(msg)
	return h.Sum(nil)[:macLen]
}

// Wrap protects msg, the next message from the client to the server:
//
//	auth-int:  msg || MAC || 0x0001 || seq
//	auth-conf: CIPHER(Kcc, msg || padding || MAC) || 0x0001 || seq
//
// with MAC = HMAC-MD5(Kic, seq || msg)[:10] and seq the message's
// sequence number, 4 bytes big-endian, from 0.
func (l *digestLayer) Wrap(msg []byte) ([]byte, error) {
	if len(msg) > MaxMessage {
		return nil, fmt.Errorf("sasl: message of %d bytes to wrap exceeds %d", len(msg), MaxMessage)
	}
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	if l.sendSeq > 1<<32-1 {
		return nil, errors.New("sasl: no sequence number left to wrap a message with: reconnect")
	}
	seq := uint32(l.sendSeq)
	m := mac(l.sendMAC, seq, msg)
	pad := 0
	if l.seal != nil {
		if bs := l.seal.blockSize(); bs > 1 {
			pad = bs - (len(msg)+macLen)%bs // 1 to bs
		}
	}
	out := make([]byte, len(msg)+pad+macLen+trailerLen)
	n := copy(out, msg)
	for i := 0; i < pad; i++ {
		out[n+i] = byte(pad)
	}
	n += pad
	n += copy(out[n:], m)
	if l.seal != nil {
		l.seal.seal(out[:n])
	}
	binary.BigEndian.PutUint16(out[n:], 1)
	binary.BigEndian.PutUint32(out[n+2:], seq)
	l.sendSeq++
	return out, nil
}

// Unwrap checks token, the next message from the server to the client,
// and returns the message it carries. It fails, changing nothing, when
// the token is malformed, its MAC is not the server's, or its sequence
// number is not the next one (a message lost, replayed or reordered).
func (l *digestLayer) Unwrap(token []byte) ([]byte, error) {
	if len(token) > MaxMessage {
		return nil, fmt.Errorf("sasl: wrapped message of %d bytes exceeds %d", len(token), MaxMessage)
	}
	if len(token) < macLen+trailerLen {
		return nil, fmt.Errorf("sasl: wrapped message of %d bytes is shorter than its MAC and trailer", len(token))
	}
	l.recvMu.Lock()
	defer l.recvMu.Unlock()
	body, trailer := token[:len(token)-trailerLen], token[len(token)-trailerLen:]
	if t := binary.BigEndian.Uint16(trailer); t != 1 {
		return nil, fmt.Errorf("sasl: wrapped message of type %d, want 1", t)
	}
	seq := binary.BigEndian.Uint32(trailer[2:])
	if l.recvSeq > 1<<32-1 {
		return nil, errors.New("sasl: no sequence number left to unwrap a message with: reconnect")
	}
	var commit func()
	if l.open != nil {
		bs := l.open.blockSize()
		if len(body)%bs != 0 {
			return nil, fmt.Errorf("sasl: encrypted message of %d bytes is not a whole number of %d-byte blocks", len(body), bs)
		}
		body, commit = l.open.open(body)
	}
	msg, got := body[:len(body)-macLen], body[len(body)-macLen:]
	ok := 1
	if l.open != nil {
		if bs := l.open.blockSize(); bs > 1 {
			var pad int
			pad, ok = checkPadding(msg, bs)
			msg = msg[:len(msg)-pad]
		}
	}
	// The same error for bad padding and a bad MAC: which of them failed
	// says something about the plaintext.
	if ok&subtle.ConstantTimeCompare(got, mac(l.recvMAC, seq, msg)) != 1 {
		return nil, errors.New("sasl: wrapped message fails its integrity check (MAC): it is not the server's, or was altered")
	}
	if uint64(seq) != l.recvSeq {
		return nil, fmt.Errorf("sasl: wrapped message has sequence number %d, want %d: a message was lost, replayed or reordered", seq, l.recvSeq)
	}
	if commit != nil {
		commit()
	}
	l.recvSeq++
	if l.open == nil {
		return append([]byte(nil), msg...), nil // not an alias of token
	}
	return msg, nil
}

// checkPadding reads the padding at the end of b (1 to bs bytes, each
// equal to its length, RFC 2831 §2.4) and returns its length, or 0 and
// ok=0 when it is not well formed, in time independent of the padding.
func checkPadding(b []byte, bs int) (pad, ok int) {
	if len(b) == 0 {
		return 0, 0
	}
	p := int(b[len(b)-1])
	ok = subtle.ConstantTimeLessOrEq(1, p) & subtle.ConstantTimeLessOrEq(p, bs) & subtle.ConstantTimeLessOrEq(p, len(b))
	for i := 1; i <= bs && i <= len(b); i++ {
		inPad := subtle.ConstantTimeLessOrEq(i, p)
		same := subtle.ConstantTimeByteEq(b[len(b)-i], byte(p))
		ok &= same | (inPad ^ 1)
	}
	return subtle.ConstantTimeSelect(ok, p, 0), ok
}

// rc4Stream is one direction's RC4 stream, keyed once for the session.
type rc4Stream struct{ c rc4.Cipher }

func (s *rc4Stream) blockSize() int { return 1 }

func (s *rc4Stream) seal(b []byte) { s.c.XORKeyStream(b, b) }

func (s *rc4Stream) open(b []byte) ([]byte, func()) {
	next := s.c // the stream after this message, kept until commit
	out := make([]byte, len(b))
	next.XORKeyStream(out, b)
	return out, func() { s.c = next }
}

// des3Chain is one direction's 3DES-EDE in CBC mode, chained across
// messages: each message's last ciphertext block is the next one's IV.
type des3Chain struct {
	block cipher.Block
	iv    [des.BlockSize]byte
}

// newDES3Chain keys 3DES as Java's DIGEST-MD5 does from Kcc or Kcs: K1
// from its bytes 0-6 and K2 from bytes 7-13, each widened to a DES key
// with parity bits, used as K1, K2, K1; the IV is its bytes 8-15.
func newDES3Chain(kc []byte) (*des3Chain, error) {
	k1, k2 := desKey(kc[0:7]), desKey(kc[7:14])
	key := make([]byte, 0, 24)
	key = append(append(append(key, k1[:]...), k2[:]...), k1[:]...)
	b, err := des.NewTripleDESCipher(key)
	if err != nil {
		return nil, err
	}
	c := &des3Chain{block: b}
	copy(c.iv[:], kc[8:16])
	return c, nil
}

// desKey spreads 7 bytes (56 key bits) over 8, 7 bits in the high bits
// of each byte, and sets each byte's low bit for odd parity.
func desKey(k []byte) [8]byte {
	var v uint64
	for _, b := range k[:7] {
		v = v<<8 | uint64(b)
	}
	var out [8]byte
	for i := range out {
		b := byte(v>>(49-7*uint(i))) << 1
		out[i] = b | byte(bits.OnesCount8(b)&1^1)
	}
	return out
}

func (c *des3Chain) blockSize() int { return des.BlockSize }

func (c *des3Chain) seal(b []byte) {
	cipher.NewCBCEncrypter(c.block, c.iv[:]).CryptBlocks(b, b)
	copy(c.iv[:], b[len(b)-des.BlockSize:])
}

func (c *des3Chain) open(b []byte) ([]byte, func()) {
	out := make([]byte, len(b))
	cipher.NewCBCDecrypter(c.block, c.iv[:]).CryptBlocks(out, b)
	var next [des.BlockSize]byte
	copy(next[:], b[len(b)-des.BlockSize:])
	return out, func() { c.iv = next }
}
