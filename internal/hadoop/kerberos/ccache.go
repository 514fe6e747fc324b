package kerberos

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/jcmturner/gokrb5/v8/credentials"
)

// maxCCache bounds the size of a ticket cache read: real ones hold a
// few tickets of a few KiB.
const maxCCache = 1 << 20

// loadCCache reads a ticket cache. gokrb5's parser trusts the lengths
// and counts in the file (it slices and allocates by them), so the file
// is first walked here, the way that parser walks it, with every length
// checked against what is left; only a file that passes is handed over.
func loadCCache(path string) (*credentials.CCache, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCCache+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxCCache {
		return nil, fmt.Errorf("larger than %d bytes: not a ticket cache", maxCCache)
	}
	if err := checkCCache(b); err != nil {
		return nil, fmt.Errorf("not a readable ticket cache: %w", err)
	}
	cc := &credentials.CCache{Path: path}
	if err := cc.Unmarshal(b); err != nil {
		return nil, err
	}
	return cc, nil
}

var errShort = errors.New("truncated")

// ccacheWalk follows the MIT ccache format (versions 1 to 4) as gokrb5
// reads it.
type ccacheWalk struct {
	b       []byte
	p       int
	version byte
	order   binary.ByteOrder
}

func checkCCache(b []byte) error {
	if len(b) < 2 || b[0] != 5 || b[1] < 1 || b[1] > 4 {
		return errors.New("bad magic or version")
	}
	w := &ccacheWalk{b: b, p: 2, version: b[1], order: binary.BigEndian}
	if w.version <= 2 {
		w.order = binary.NativeEndian // versions 1 and 2 use the writer's byte order
	}
	if w.version == 4 {
		l, err := w.u16()
		if err != nil {
			return err
		}
		for w.p <= int(l) { // the parser's loop: position against length
			tag, err := w.u16()
			if err != nil {
				return err
			}
			n, err := w.u16()
			if err != nil {
				return err
			}
			if tag != 1 || n != 8 {
				return errors.New("unknown header field")
			}
			if err := w.skip(8); err != nil {
				return err
			}
		}
	}
	if err := w.principal(); err != nil {
		return err
	}
	for w.p < len(w.b) {
		if err := w.credential(); err != nil {
			return err
		}
	}
	return nil
}

func (w *ccacheWalk) skip(n int) error {
	if n < 0 || n > len(w.b)-w.p {
		return errShort
	}
	w.p += n
	return nil
}

func (w *ccacheWalk) u16() (uint16, error) {
	if len(w.b)-w.p < 2 {
		return 0, errShort
	}
	v := w.order.Uint16(w.b[w.p:])
	w.p += 2
	return v, nil
}

func (w *ccacheWalk) i32() (int, error) {
	if len(w.b)-w.p < 4 {
		return 0, errShort
	}
	v := int32(w.order.Uint32(w.b[w.p:]))
	w.p += 4
	return int(v), nil
}

// data is a 32-bit length and that many bytes.
func (w *ccacheWalk) data() error {
	n, err := w.i32()
	if err != nil {
		return err
	}
	return w.skip(n)
}

// count is a 32-bit count of entries of at least min bytes each.
func (w *ccacheWalk) count(min int) (int, error) {
	n, err := w.i32()
	if err != nil {
		return 0, err
	}
	if n < 0 || n > (len(w.b)-w.p)/min {
		return 0, fmt.Errorf("count %d exceeds the file", n)
	}
	return n, nil
}

func (w *ccacheWalk) principal() error {
	if w.version != 1 {
		if err := w.skip(4); err != nil { // name type
			return err
		}
	}
	n, err := w.count(4)
	if err != nil {
		return err
	}
	if w.version == 1 {
		n-- // the count includes the realm
	}
	if err := w.data(); err != nil { // realm
		return err
	}
	for range n {
		if err := w.data(); err != nil {
			return err
		}
	}
	return nil
}

func (w *ccacheWalk) credential() error {
	for range 2 { // client, server
		if err := w.principal(); err != nil {
			return err
		}
	}
	keytype := 2
	if w.version == 3 {
		keytype = 4 // repeated
	}
	if err := w.skip(keytype); err != nil {
		return err
	}
	if err := w.data(); err != nil { // key
		return err
	}
	if err := w.skip(4*4 + 1 + 4); err != nil { // times, is_skey, flags
		return err
	}
	for range 2 { // addresses, authorization data: type and data
		n, err := w.count(6)
		if err != nil {
			return err
		}
		for range n {
			if err := w.skip(2); err != nil {
				return err
			}
			if err := w.data(); err != nil {
				return err
			}
		}
	}
	if err := w.data(); err != nil { // ticket
		return err
	}
	return w.data() // second ticket
}
