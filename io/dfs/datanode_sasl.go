package dfs

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/spindle-ps/spindle/internal/hadoop/creds"
	"github.com/spindle-ps/spindle/internal/hadoop/hrpc"
	hpb "github.com/spindle-ps/spindle/internal/hadoop/proto"
	"github.com/spindle-ps/spindle/internal/hadoop/sasl"
)

// Talking to DataNodes that sign or encrypt (dfs.data.transfer.protection
// integrity or privacy, without dfs.encrypt.data.transfer) goes through a
// SASL layer of this package's own: the HDFS client's loses bytes when a
// read spans two of the DataNode's wrapped tokens, and races on its
// deadlines while a block is written. The client is then told to do no
// SASL, and every DataNode connection it dials is authenticated and
// wrapped here, as Hadoop's SaslDataTransferClient does, with a block
// access token. At privacy, where the client's configuration names
// AES/CTR/NoPadding, the exchange also negotiates AES-CTR streams, which
// then replace the layer (saslHandshake).
//
// The DataNode checks the SASL credentials as a block token of its block
// pool that has not expired; which block the token names matters only to
// the request that follows, which carries the token of its own block. So
// one token serves every connection: taken when a file with blocks is
// opened (or, for a new file's first block, by the dial, from a file
// being written), and renewed by the open, read or dial that finds it
// about to expire.

// protectedTransfer returns the qualities of protection to accept, best
// first, where o's DataNodes need this package's SASL layer, and nil
// where they do not. With dfs.encrypt.data.transfer the client library
// runs the exchange whatever it is told (the NameNode's server defaults
// ask it to): its AES stream reads right, its DIGEST-MD5 one does not
// (see ErrProtectedReads).
func protectedTransfer(o HDFSOptions) []string {
	if o.EncryptDataTransfer {
		return nil
	}
	switch o.DataTransferProtection {
	case "privacy":
		return []string{sasl.QOPPrivacy}
	case "integrity":
		return []string{sasl.QOPIntegrity, sasl.QOPPrivacy}
	}
	return nil
}

// aesSuite reports whether suites (dfs.encrypt.data.transfer.cipher.suites)
// has AES/CTR/NoPadding, which DataNodes then encrypt blocks with.
func aesSuite(suites string) bool {
	for _, s := range strings.Split(suites, ",") {
		if strings.EqualFold(strings.TrimSpace(s), "AES/CTR/NoPadding") {
			return true
		}
	}
	return false
}

// blockToken is a block access token and when it expires.
type blockToken struct {
	identifier, password []byte
	expiry               time.Time
}

// blockTokenMargin is how long before its expiry a block token is
// replaced: longer than a read (bounded by IOTimeout) and the dials and
// handshakes within it take.
const blockTokenMargin = 5 * time.Minute

// blockTokenFallbackLife is how long a token whose expiry cannot be read
// is used: far below Hadoop's dfs.block.access.token.lifetime (10 h).
const blockTokenFallbackLife = 10 * time.Minute

func (t *blockToken) fresh(now time.Time) bool {
	return t != nil && now.Add(blockTokenMargin).Before(t.expiry)
}

// blockTokenExpiry reads the expiry date of a block token's identifier:
// the first field of BlockTokenIdentifier, a vlong of Unix milliseconds
// in its Writable form, field 1 of its protobuf form
// (dfs.block.access.token.protobuf.enable).
func blockTokenExpiry(id []byte) (time.Time, bool) {
	plausible := func(ms int64) bool { return ms > 1e12 && ms < 1e13 } // 2001 to 2286
	if ms, err := creds.ReadVLong(bytes.NewReader(id)); err == nil && plausible(ms) {
		return time.UnixMilli(ms), true
	}
	if num, typ, n := protowire.ConsumeTag(id); n > 0 && num == 1 && typ == protowire.VarintType {
		if v, m := protowire.ConsumeVarint(id[n:]); m > 0 && plausible(int64(v)) {
			return time.UnixMilli(int64(v)), true
		}
	}
	return time.Time{}, false
}

// ensureBlockToken makes h.blockTok a token that is not about to expire,
// asking the NameNode for the block locations of name if needed. A file
// without blocks leaves it as it is: nothing will be read from it.
func (h *HDFS) ensureBlockToken(ctx context.Context, name string) error {
	if h.blockTok.Load().fresh(time.Now()) {
		return nil
	}
	var tok *blockToken
	err := h.namenodeCall(ctx, "block access token", func(ctx context.Context, _ string, c *hrpc.Conn) error {
		resp := &hpb.GetBlockLocationsResponseProto{}
		req := &hpb.GetBlockLocationsRequestProto{Src: proto.String(name), Offset: proto.Uint64(0), Length: proto.Uint64(1)}
		if err := c.Call(ctx, "getBlockLocations", req, resp); err != nil {
			return err
		}
		// A file being written has its newest block apart.
		locs := resp.GetLocations()
		for _, b := range append(locs.GetBlocks(), locs.GetLastBlock()) {
			bt := b.GetBlockToken()
			if len(bt.GetIdentifier()) == 0 {
				continue
			}
			tok = &blockToken{identifier: bt.GetIdentifier(), password: bt.GetPassword()}
			var ok bool
			if tok.expiry, ok = blockTokenExpiry(tok.identifier); !ok {
				tok.expiry = time.Now().Add(blockTokenFallbackLife)
			}
			return nil
		}
		return nil
	})
	if err != nil {
		return err
	}
	if tok != nil {
		h.blockTok.Store(tok)
	}
	return nil
}

// datanodeSASL runs the SASL exchange that opens a connection to a
// DataNode, authenticating with the current block token, and returns
// the connection wrapped in the negotiated security layer. DataNodes on
// privileged ports (below 1024) are trusted as Hadoop trusts them, with
// no exchange.
func (h *HDFS) datanodeSASL(c net.Conn, addr string) (net.Conn, error) {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok && ta.Port < 1024 {
		return c, nil
	}
	tok, err := h.dialToken()
	if err != nil {
		return nil, fmt.Errorf("DataNode %s: %w", addr, err)
	}
	wrapped, err := saslHandshake(c, tok, h.saslQOPs, h.aesSuite)
	if err != nil {
		return nil, fmt.Errorf("DataNode %s: %w", addr, err)
	}
	if _, ok := wrapped.(*ctrConn); ok {
		h.aesConns.Add(1)
	}
	return wrapped, nil
}

// noteWriting counts name as open for writing (delta 1) or no longer
// (-1).
func (h *HDFS) noteWriting(name string, delta int) {
	if h.saslQOPs == nil {
		return
	}
	h.writingMu.Lock()
	defer h.writingMu.Unlock()
	if h.writing == nil {
		h.writing = make(map[string]int)
	}
	if h.writing[name] += delta; h.writing[name] <= 0 {
		delete(h.writing, name)
	}
}

// dialToken returns the block token to open a DataNode connection with:
// the current one while it is fresh, else one asked for with a file
// being written (a dial for its new block follows the block's
// allocation, so the file has a block with a token by then). A stale
// token is better than none: the DataNode says if it has expired.
func (h *HDFS) dialToken() (*blockToken, error) {
	if t := h.blockTok.Load(); t.fresh(time.Now()) {
		return t, nil
	}
	h.writingMu.Lock()
	names := make([]string, 0, len(h.writing))
	for n := range h.writing {
		names = append(names, n)
	}
	h.writingMu.Unlock()
	var errs []error
	for _, n := range names {
		// The client dials with no context; a NameNode call is bounded by
		// RPCTimeout, and DialTimeout bounds this when RPCTimeout does not.
		ctx, cancel := context.WithTimeout(context.Background(), max(h.opts.RPCTimeout, h.opts.DialTimeout))
		err := h.ensureBlockToken(ctx, n)
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if t := h.blockTok.Load(); t.fresh(time.Now()) {
			return t, nil
		}
	}
	if t := h.blockTok.Load(); t != nil {
		return t, nil
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("no block access token to authenticate with: %w", errors.Join(errs...))
	}
	return nil, errors.New("no block access token to authenticate with (no file with blocks opened or being written)")
}

// saslMagic opens the DataNode's SASL exchange (SaslDataTransferServer's
// SASL_TRANSFER_MAGIC_NUMBER).
const saslMagic = 0xDEADBEEF

// maxSASLMessage bounds a message of the exchange read from a DataNode.
const maxSASLMessage = 64 << 10

// saslHandshake authenticates c with DIGEST-MD5 and tok, accepting the
// qops of prefer, and returns c behind the negotiated layer (c itself for
// qop auth). With offerAES (AES/CTR/NoPadding in
// dfs.encrypt.data.transfer.cipher.suites) the client offers the DataNode
// to stream with AES-CTR once privacy is negotiated, as Hadoop's client
// does; a DataNode configured with the suite then answers with keys for
// each direction, sent under the SASL layer, and the connection is
// encrypted with them instead of the layer's own cipher (rc4 or 3des).
func saslHandshake(c net.Conn, tok *blockToken, prefer []string, offerAES bool) (net.Conn, error) {
	first := binary.BigEndian.AppendUint32(nil, saslMagic)
	first, err := appendSASLMessage(first, nil, nil)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write(first); err != nil {
		return nil, fmt.Errorf("sasl: %w", err)
	}
	challenge, err := readSASLMessage(c)
	if err != nil {
		return nil, err
	}
	ch, err := sasl.ParseChallenge(challenge)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	d := sasl.Digest{
		Username:  base64.StdEncoding.EncodeToString(tok.identifier),
		Password:  base64.StdEncoding.EncodeToString(tok.password),
		DigestURI: "hdfs/0", // the DataNode's protocol and server id
		CNonce:    base64.StdEncoding.EncodeToString(nonce),
	}
	resp, rspauth, layer, err := d.Respond(ch, prefer)
	if err != nil {
		return nil, fmt.Errorf("%w (dfs.data.transfer.protection)", err)
	}
	var offer []*hpb.CipherOptionProto
	if offerAES && slices.Contains(prefer, sasl.QOPPrivacy) {
		offer = append(offer, &hpb.CipherOptionProto{Suite: hpb.CipherSuiteProto_AES_CTR_NOPADDING.Enum()})
	}
	msg, err := appendSASLMessage(nil, resp, offer)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write(msg); err != nil {
		return nil, fmt.Errorf("sasl: %w", err)
	}
	final, err := readSASLAnswer(c)
	if err != nil {
		return nil, err
	}
	if err := sasl.VerifyRspAuth(final.GetPayload(), rspauth); err != nil {
		return nil, err
	}
	if opts := final.GetCipherOption(); len(opts) > 0 {
		if offer == nil || !sasl.Confidential(layer) {
			return nil, errors.New("sasl: the DataNode chose a cipher the client did not offer, or without privacy")
		}
		return aesStreams(c, layer, opts[0])
	}
	if layer == nil {
		return c, nil
	}
	return sasl.NewConn(c, layer), nil
}

// aesStreams returns c encrypted with the AES-CTR keys and IVs of opt,
// whose keys came wrapped by layer: the client writes with the "in" key
// and IV (the DataNode's input) and reads with the "out" ones.
func aesStreams(c net.Conn, layer sasl.Layer, opt *hpb.CipherOptionProto) (net.Conn, error) {
	if opt.GetSuite() != hpb.CipherSuiteProto_AES_CTR_NOPADDING {
		return nil, fmt.Errorf("sasl: the DataNode chose cipher suite %v, the client offered AES/CTR/NoPadding", opt.GetSuite())
	}
	// The DataNode wraps the in key, then the out key: unwrapped in that
	// order, they take the layer's sequence numbers 0 and 1.
	inKey, err := layer.Unwrap(opt.GetInKey())
	if err != nil {
		return nil, fmt.Errorf("sasl: the DataNode's AES key: %w", err)
	}
	outKey, err := layer.Unwrap(opt.GetOutKey())
	if err != nil {
		return nil, fmt.Errorf("sasl: the DataNode's AES key: %w", err)
	}
	w, err := ctrStream(inKey, opt.GetInIv())
	if err != nil {
		return nil, err
	}
	r, err := ctrStream(outKey, opt.GetOutIv())
	if err != nil {
		return nil, err
	}
	return &ctrConn{Conn: c, r: r, w: w}, nil
}

// ctrStream is AES-CTR with key and iv as Hadoop's AES/CTR/NoPadding
// streams use them: the IV is the first counter block, counted up as one
// 128-bit big-endian number.
func ctrStream(key, iv []byte) (cipher.Stream, error) {
	if len(iv) != aes.BlockSize {
		return nil, fmt.Errorf("sasl: the DataNode's AES IV has %d bytes, want %d", len(iv), aes.BlockSize)
	}
	b, err := aes.NewCipher(key) // 16, 24 or 32 bytes (dfs.encrypt.data.transfer.cipher.key.bitlength)
	if err != nil {
		return nil, fmt.Errorf("sasl: the DataNode's AES key: %w", err)
	}
	return cipher.NewCTR(b, iv), nil
}

// ctrConn encrypts what is written to a connection and decrypts what is
// read from it, each direction with its own stream. A Read and a Write
// may run at once (the client reads a block's acks while it writes);
// neither may run alongside another of its kind. A write that fails
// leaves the stream behind what the peer has: the connection fails for
// good then.
type ctrConn struct {
	net.Conn
	r, w cipher.Stream
	buf  []byte
	werr error
}

// ctrWriteChunk is the most a Write encrypts before sending it.
const ctrWriteChunk = 64 << 10

func (c *ctrConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.r.XORKeyStream(b[:n], b[:n])
	return n, err
}

func (c *ctrConn) Write(b []byte) (int, error) {
	if c.werr != nil {
		return 0, c.werr
	}
	if c.buf == nil {
		c.buf = make([]byte, ctrWriteChunk)
	}
	done := 0
	for done < len(b) {
		chunk := b[done:min(len(b), done+ctrWriteChunk)]
		out := c.buf[:len(chunk)]
		c.w.XORKeyStream(out, chunk)
		n, err := c.Conn.Write(out)
		done += n
		if err != nil {
			c.werr = fmt.Errorf("encrypted DataNode connection: %w", err)
			return done, err
		}
	}
	return done, nil
}

// byteReader reads a length prefix a byte at a time, so that nothing
// beyond the message is taken from the connection.
type byteReader struct{ r io.Reader }

func (b byteReader) ReadByte() (byte, error) {
	var one [1]byte
	_, err := io.ReadFull(b.r, one[:])
	return one[0], err
}

// appendSASLMessage appends a SUCCESS message carrying payload and the
// cipher options offered, length-delimited, to b.
func appendSASLMessage(b, payload []byte, offer []*hpb.CipherOptionProto) ([]byte, error) {
	m, err := proto.Marshal(&hpb.DataTransferEncryptorMessageProto{
		Status:       hpb.DataTransferEncryptorMessageProto_SUCCESS.Enum(),
		Payload:      append([]byte{}, payload...),
		CipherOption: offer,
	})
	if err != nil {
		return nil, err
	}
	return append(protowire.AppendVarint(b, uint64(len(m))), m...), nil
}

// readSASLMessage reads a length-delimited message of the exchange and
// returns its payload; a status other than SUCCESS is an error with the
// DataNode's message.
func readSASLMessage(r io.Reader) ([]byte, error) {
	m, err := readSASLAnswer(r)
	if err != nil {
		return nil, err
	}
	return m.GetPayload(), nil
}

// readSASLAnswer is readSASLMessage returning the whole message.
func readSASLAnswer(r io.Reader) (*hpb.DataTransferEncryptorMessageProto, error) {
	n, err := binary.ReadUvarint(byteReader{r})
	if err != nil {
		return nil, fmt.Errorf("sasl: read the DataNode's answer: %w", err)
	}
	if n > maxSASLMessage {
		return nil, fmt.Errorf("sasl: the DataNode's answer of %d bytes exceeds %d", n, maxSASLMessage)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("sasl: read the DataNode's answer: %w", err)
	}
	m := &hpb.DataTransferEncryptorMessageProto{}
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("sasl: the DataNode's answer: %w", err)
	}
	switch m.GetStatus() {
	case hpb.DataTransferEncryptorMessageProto_SUCCESS:
		return m, nil
	case hpb.DataTransferEncryptorMessageProto_ERROR_UNKNOWN_KEY:
		return nil, fmt.Errorf("sasl: the DataNode does not know the key: %s", strings.TrimSpace(m.GetMessage()))
	default:
		return nil, fmt.Errorf("sasl: the DataNode refused: %s", strings.TrimSpace(m.GetMessage()))
	}
}
