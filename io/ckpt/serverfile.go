package ckpt

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"path"
	"strconv"
	"unsafe"

	"github.com/spindle-ps/spindle/io/dfs"
)

// Number is the type of the values and optimizer state in a server file.
// Its type set matches that of the parameter tables, so a table's value
// type satisfies it.
type Number interface{ ~float32 | ~float64 }

// ElemType is the element type recorded in a server file.
type ElemType uint8

// The element types. The zero ElemType is invalid.
const (
	Float32 ElemType = 1
	Float64 ElemType = 2
)

func (e ElemType) String() string {
	switch e {
	case Float32:
		return "float32"
	case Float64:
		return "float64"
	}
	return "ElemType(" + strconv.Itoa(int(e)) + ")"
}

// size returns the number of bytes of one element (0 if e is invalid).
func (e ElemType) size() int {
	switch e {
	case Float32:
		return 4
	case Float64:
		return 8
	}
	return 0
}

// elemOf returns the element type that stores values of type V.
func elemOf[V Number]() ElemType {
	var v V
	if unsafe.Sizeof(v) == 4 {
		return Float32
	}
	return Float64
}

const (
	// MaxDim is the largest number of values per key in a server file,
	// the limit of the parameter tables.
	MaxDim = 1 << 16
	// MaxStateWidth is the largest number of optimizer-state values per
	// value in a server file, the limit of the parameter tables.
	MaxStateWidth = 16

	// magic opens every server file; fileVersion is the layout below.
	magic       = "SPCKPT01"
	fileVersion = 1

	headerSize  = 32
	trailerSize = 4
	// memReadLimit is the largest file ReadServerFile reads into memory
	// to verify it in one pass; larger files are read twice.
	memReadLimit = 64 << 20
	// bufSize is the I/O buffer size of writers and streaming readers.
	bufSize = 1 << 20
	// ctxEvery is how many records pass between context checks.
	ctxEvery = 4096
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header describes the records of a server file.
type Header struct {
	// Elem is the element type of values and state. WriteServerFile
	// takes it from its type argument: leave it zero or set it to match.
	Elem ElemType
	// Dim is the number of values per key, 1..MaxDim.
	Dim int
	// StateWidth is the number of optimizer-state values per value,
	// 0..MaxStateWidth; each record holds Dim*StateWidth of them.
	StateWidth int
	// Records is the number of records (keys) in the file. A writer
	// must know it in advance (a table's Len) and supply exactly as many.
	Records int64
}

// recordSize returns the size in bytes of one record of h.
func (h Header) recordSize() int64 {
	return 8 + int64(h.Dim)*int64(1+h.StateWidth)*int64(h.Elem.size())
}

// check reports the first field of h outside its bounds, for writers.
func (h Header) check() error {
	switch {
	case h.Elem.size() == 0:
		return fmt.Errorf("element type %v, want float32 or float64", h.Elem)
	case h.Dim < 1 || h.Dim > MaxDim:
		return fmt.Errorf("dim %d, want 1..%d", h.Dim, MaxDim)
	case h.StateWidth < 0 || h.StateWidth > MaxStateWidth:
		return fmt.Errorf("state width %d, want 0..%d", h.StateWidth, MaxStateWidth)
	case h.Records < 0:
		return fmt.Errorf("record count %d, want >= 0", h.Records)
	}
	return nil
}

// FileEntry names a file of a checkpoint with its size and SHA-256, as
// listed in the manifest. WriteServerFile returns the entry of the file it
// wrote.
type FileEntry struct {
	// Name is the file's name within the checkpoint directory, such as
	// "server-0" (ServerFileName).
	Name string `json:"name"`
	// Bytes is the file's size.
	Bytes int64 `json:"bytes"`
	// SHA256 is the lowercase hex SHA-256 of the whole file.
	SHA256 string `json:"sha256"`
}

// The server file, all integers little-endian. R = Records, D = Dim,
// S = StateWidth, E = element size (4 for float32, 8 for float64):
//
//	offset  size  field
//	     0     8  magic "SPCKPT01"
//	     8     2  version, 1 (uint16)
//	    10     1  element type: 1 = float32, 2 = float64
//	    11     1  reserved, 0
//	    12     4  D (uint32), 1..65536
//	    16     4  S (uint32), 0..16
//	    20     4  reserved, 0
//	    24     8  R (uint64)
//	    32        R records of 8 + D*E + D*S*E bytes each:
//	              +-----------+-----------------+-----------------------+
//	              | key (u64) | D values        | D*S state values      |
//	              +-----------+-----------------+-----------------------+
//	              the state of value i is state values [i*S, (i+1)*S)
//	 end-4     4  CRC-32C (Castagnoli) of bytes [0, end-4) (uint32)
//
// The file is exactly 36 + R*(8 + D*E*(1+S)) bytes long, which the reader
// checks before it believes R.

// putHeader encodes h into b[:headerSize].
func putHeader(b []byte, h Header) {
	copy(b[0:8], magic)
	binary.LittleEndian.PutUint16(b[8:], fileVersion)
	b[10] = byte(h.Elem)
	b[11] = 0
	binary.LittleEndian.PutUint32(b[12:], uint32(h.Dim))
	binary.LittleEndian.PutUint32(b[16:], uint32(h.StateWidth))
	binary.LittleEndian.PutUint32(b[20:], 0)
	binary.LittleEndian.PutUint64(b[24:], uint64(h.Records))
}

// parseHeader decodes and checks the header of a file of size bytes named
// uri: every field in bounds and the size exactly what the header implies.
func parseHeader(b []byte, size int64, uri string) (Header, error) {
	if string(b[0:8]) != magic {
		return Header{}, corrupt(uri, 0, "bad magic %q, want %q", b[0:8], magic)
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != fileVersion {
		return Header{}, corrupt(uri, 8, "version %d, this reader knows %d", v, fileVersion)
	}
	h := Header{Elem: ElemType(b[10])}
	if h.Elem.size() == 0 {
		return Header{}, corrupt(uri, 10, "unknown element type %d", b[10])
	}
	if b[11] != 0 {
		return Header{}, corrupt(uri, 11, "reserved byte is %d, want 0", b[11])
	}
	dim := binary.LittleEndian.Uint32(b[12:])
	if dim < 1 || dim > MaxDim {
		return Header{}, corrupt(uri, 12, "dim %d, want 1..%d", dim, MaxDim)
	}
	sw := binary.LittleEndian.Uint32(b[16:])
	if sw > MaxStateWidth {
		return Header{}, corrupt(uri, 16, "state width %d, want 0..%d", sw, MaxStateWidth)
	}
	if r := binary.LittleEndian.Uint32(b[20:]); r != 0 {
		return Header{}, corrupt(uri, 20, "reserved word is %d, want 0", r)
	}
	h.Dim, h.StateWidth = int(dim), int(sw)
	count := binary.LittleEndian.Uint64(b[24:])
	// Compare the count with what the size allows by division, so that
	// no product of file-controlled numbers can overflow.
	body := size - headerSize - trailerSize
	rs := h.recordSize()
	if body < 0 || body%rs != 0 || count != uint64(body/rs) {
		return Header{}, corrupt(uri, 24, "record count %d of %d bytes does not match the file size %d", count, rs, size)
	}
	h.Records = int64(count)
	return h, nil
}

// putVals encodes vs as elements of type e into b.
func putVals[V Number](b []byte, vs []V, e ElemType) {
	if e == Float32 {
		for i, v := range vs {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)))
		}
		return
	}
	for i, v := range vs {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(float64(v)))
	}
}

// getVals decodes len(vs) elements of type e from b into vs.
func getVals[V Number](b []byte, vs []V, e ElemType) {
	if e == Float32 {
		for i := range vs {
			vs[i] = V(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
		return
	}
	for i := range vs {
		vs[i] = V(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])))
	}
}

// hashWriter feeds what it writes to a CRC-32C and a SHA-256 on its way
// to w, and counts it.
type hashWriter struct {
	w   io.Writer
	crc uint32
	sha hash.Hash
	n   int64
}

func (h *hashWriter) Write(b []byte) (int, error) {
	n, err := h.w.Write(b)
	h.crc = crc32.Update(h.crc, castagnoli, b[:n])
	h.sha.Write(b[:n])
	h.n += int64(n)
	return n, err
}

// ctxErr returns the error of a done ctx, with its cause when it was
// cancelled with one (context.WithCancelCause).
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if c := context.Cause(ctx); c != nil && c != err {
		return fmt.Errorf("%w: %w", err, c)
	}
	return err
}

// WriteServerFile writes the records of one server to the file name
// (normally path.Join(Path(dir, n), ServerFileName(rank))), creating its
// directory if needed, and returns its entry for the manifest.
//
// records is a push iterator, the shape of a table's Range method: it calls
// yield once for each key with the key's h.Dim values and its
// h.Dim*h.StateWidth state values (nil or empty when StateWidth is 0), and
// stops when yield returns false. The slices are only read during the call.
// It must yield exactly h.Records records; h.Elem, if not zero, must be the
// element type of V. Records are stored in the order given, which the
// reader keeps.
//
// The file is written through a 1 MiB buffer under a temporary name
// (".<base>.tmp" in the same directory, replacing a stale one), closed and
// then renamed over name, so name holds either the previous file or the
// complete new one. On any failure — an I/O error, a record of the wrong
// length, too few or too many records, ctx done, or a panic in records —
// the temporary file is removed (even when ctx is done) and name is left as
// it was.
//
// A records iterator that fails part-way should stop yielding, which the
// short count turns into an error, or cancel ctx with a cause
// (context.WithCancelCause), which the returned error wraps.
func WriteServerFile[V Number](ctx context.Context, fsys dfs.FileSystem, name string, h Header, records func(yield func(key uint64, vals, state []V) bool)) (FileEntry, error) {
	elem := elemOf[V]()
	if h.Elem != 0 && h.Elem != elem {
		return FileEntry{}, fmt.Errorf("ckpt: write %s: header element type %v, values are %v", fsys.URI(name), h.Elem, elem)
	}
	h.Elem = elem
	return writeServerFile(ctx, fsys, name, h, records)
}

// writeServerFile is WriteServerFile storing values of type V as h.Elem,
// which may be narrower than V (float64 values that are float32 values
// widened convert back exactly).
func writeServerFile[V Number](ctx context.Context, fsys dfs.FileSystem, name string, h Header, records func(yield func(key uint64, vals, state []V) bool)) (FileEntry, error) {
	uri := fsys.URI(name)
	if err := h.check(); err != nil {
		return FileEntry{}, fmt.Errorf("ckpt: write %s: header: %w", uri, err)
	}
	if err := fsys.MkdirAll(ctx, path.Dir(name), 0o755); err != nil {
		return FileEntry{}, fmt.Errorf("ckpt: write %s: %w", uri, err)
	}
	var hw *hashWriter
	err := dfs.WriteAtomic(ctx, fsys, name, func(w io.Writer) error {
		hw = &hashWriter{w: w, sha: sha256.New()}
		return encodeServerFile(ctx, hw, h, records)
	})
	if err != nil {
		return FileEntry{}, fmt.Errorf("ckpt: write %s: %w", uri, err)
	}
	return FileEntry{Name: path.Base(name), Bytes: hw.n, SHA256: hex.EncodeToString(hw.sha.Sum(nil))}, nil
}

// encodeServerFile writes the header, the records and the CRC trailer to
// hw.
func encodeServerFile[V Number](ctx context.Context, hw *hashWriter, h Header, records func(yield func(key uint64, vals, state []V) bool)) error {
	bw := bufio.NewWriterSize(hw, bufSize)
	var hdr [headerSize]byte
	putHeader(hdr[:], h)
	if _, err := bw.Write(hdr[:]); err != nil {
		return err
	}
	elem := h.Elem
	esz := elem.size()
	nstate := h.Dim * h.StateWidth
	var (
		rec    []byte
		n      int64
		encErr error
	)
	if h.Records > 0 {
		rec = make([]byte, h.recordSize())
	}
	records(func(key uint64, vals, state []V) bool {
		if encErr != nil {
			return false // an iterator that ignored a false from yield
		}
		if n%ctxEvery == 0 {
			if err := ctx.Err(); err != nil {
				encErr = ctxErr(ctx)
				return false
			}
		}
		switch {
		case n >= h.Records:
			encErr = fmt.Errorf("more than the %d records of the header", h.Records)
			return false
		case len(vals) != h.Dim:
			encErr = fmt.Errorf("record %d (key %d): %d values, want %d", n, key, len(vals), h.Dim)
			return false
		case len(state) != nstate:
			encErr = fmt.Errorf("record %d (key %d): %d state values, want %d", n, key, len(state), nstate)
			return false
		}
		binary.LittleEndian.PutUint64(rec, key)
		putVals(rec[8:], vals, elem)
		putVals(rec[8+h.Dim*esz:], state, elem)
		if _, err := bw.Write(rec); err != nil {
			encErr = err
			return false
		}
		n++
		return true
	})
	if encErr == nil && n != h.Records {
		encErr = fmt.Errorf("records ended after %d of the %d records of the header", n, h.Records)
	}
	if encErr == nil {
		if err := ctx.Err(); err != nil {
			encErr = ctxErr(ctx)
		}
	}
	if encErr != nil {
		return encErr
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	var tr [trailerSize]byte
	binary.LittleEndian.PutUint32(tr[:], hw.crc)
	_, err := hw.Write(tr[:])
	return err
}

// ReadHeader reads and checks the header of the server file name without
// reading its records or verifying its CRC: a loader can learn the element
// type, dim and state width before choosing how to read the file. A header
// that is damaged, or does not match the file's size, is an error wrapping
// ErrCorrupt.
func ReadHeader(ctx context.Context, fsys dfs.FileSystem, name string) (Header, error) {
	o, err := openServerFile(ctx, fsys, name)
	if err != nil {
		return Header{}, err
	}
	_ = o.f.Close()
	return o.h, nil
}

// openFile is a server file whose header has been read and checked.
type openFile struct {
	f    dfs.File // positioned after the header
	uri  string
	size int64
	h    Header
	raw  [headerSize]byte // the header's bytes
}

// openServerFile opens name, reads its header and checks it against the
// file's size.
func openServerFile(ctx context.Context, fsys dfs.FileSystem, name string) (*openFile, error) {
	o := &openFile{uri: fsys.URI(name)}
	f, err := fsys.Open(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("ckpt: read: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("ckpt: read: %w", err)
	}
	if fi.IsDir() {
		_ = f.Close()
		return nil, fmt.Errorf("ckpt: read %s: is a directory: %w", o.uri, fs.ErrInvalid)
	}
	o.size = fi.Size()
	if o.size < headerSize+trailerSize {
		_ = f.Close()
		return nil, corrupt(o.uri, -1, "%d bytes, shorter than a header and a trailer", o.size)
	}
	if _, err := io.ReadFull(f, o.raw[:]); err != nil {
		_ = f.Close()
		return nil, readErr(o.uri, 0, err)
	}
	if o.h, err = parseHeader(o.raw[:], o.size, o.uri); err != nil {
		_ = f.Close()
		return nil, err
	}
	o.f = f
	return o, nil
}

// readErr turns an error reading at off into a corrupt-file error when the
// file ended early, and wraps it otherwise.
func readErr(uri string, off int64, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return corrupt(uri, off, "file ends early (truncated while being read?)")
	}
	return fmt.Errorf("ckpt: read %s: %w", uri, err)
}

// ReadServerFile reads the server file name and calls fn for each record in
// the order written, with the key, its Dim values and its Dim*StateWidth
// state values (nil when StateWidth is 0). The slices are reused for the
// next record: fn must copy what it keeps. It returns the file's header,
// or the first error, which stops the read; an error from fn is wrapped.
//
// Verify, then deliver: fn is called only after the whole file has been
// checked — header fields in bounds, element type that of V, size exactly
// what the header implies, and the CRC-32C of its trailer — so a damaged
// file never reaches live state: it is reported, as an error wrapping
// ErrCorrupt (a *CorruptError naming the file's URI), before the first
// call. A file of up to 64 MiB is read into memory once, verified and
// decoded from there; a larger one is read twice, a verifying pass with a
// 1 MiB buffer and then a decoding pass, so that memory stays bounded
// whatever the file's size. The decoding pass recomputes the CRC too; a
// mismatch then (possible only if the file changed between the passes,
// which a renamed checkpoint file never does) is reported after the
// records were delivered.
//
// Nothing is allocated from a count in the file before it has been checked
// against the file's size.
func ReadServerFile[V Number](ctx context.Context, fsys dfs.FileSystem, name string, fn func(key uint64, vals, state []V) error) (Header, error) {
	return readServerFile(ctx, fsys, name, fn, memReadLimit)
}

// readServerFile is ReadServerFile reading files of up to memLimit bytes
// into memory and larger ones in two passes.
func readServerFile[V Number](ctx context.Context, fsys dfs.FileSystem, name string, fn func(key uint64, vals, state []V) error, memLimit int64) (Header, error) {
	return readServerFileAs(ctx, fsys, name, fn, memLimit, false)
}

// readServerFileAs is readServerFile that, with widen, also reads a
// float32 file into float64 values (exactly).
func readServerFileAs[V Number](ctx context.Context, fsys dfs.FileSystem, name string, fn func(key uint64, vals, state []V) error, memLimit int64, widen bool) (Header, error) {
	o, err := openServerFile(ctx, fsys, name)
	if err != nil {
		return Header{}, err
	}
	defer o.f.Close()
	if want := elemOf[V](); o.h.Elem != want && !(widen && want == Float64) {
		return Header{}, corrupt(o.uri, 10, "holds %v values, the reader wants %v", o.h.Elem, want)
	}
	if o.size <= memLimit {
		err = readInMemory(ctx, o, fn)
	} else {
		err = readStreaming(ctx, o, fn)
	}
	if err != nil {
		return Header{}, err
	}
	return o.h, nil
}

// readInMemory reads the rest of an opened file into memory, verifies its CRC and delivers its records.
func readInMemory[V Number](ctx context.Context, o *openFile, fn func(uint64, []V, []V) error) error {
	f, size, h, uri := o.f, o.size, o.h, o.uri
	buf := make([]byte, size)
	copy(buf, o.raw[:])
	if _, err := io.ReadFull(f, buf[headerSize:]); err != nil {
		return readErr(uri, headerSize, err)
	}
	body := buf[:size-trailerSize]
	if got, want := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(buf[size-trailerSize:]); got != want {
		return corrupt(uri, -1, "crc mismatch: computed %08x, trailer says %08x", got, want)
	}
	d := newDecoder[V](h, uri, fn)
	rs := h.recordSize()
	for i := int64(0); i < h.Records; i++ {
		if err := d.record(ctx, i, body[headerSize+i*rs:headerSize+(i+1)*rs]); err != nil {
			return err
		}
	}
	return nil
}

// readStreaming verifies the CRC of an opened file in a first pass and
// decodes its records in a second.
func readStreaming[V Number](ctx context.Context, o *openFile, fn func(uint64, []V, []V) error) error {
	f, size, h, uri := o.f, o.size, o.h, o.uri
	// Pass 1: the CRC of everything before the trailer, going on from the
	// header already read.
	buf := make([]byte, min(bufSize, size))
	crc, err := crcOf(crc32.Update(0, castagnoli, o.raw[:]), f, headerSize, size-trailerSize, buf, uri)
	if err != nil {
		return err
	}
	var tr [trailerSize]byte
	if _, err := io.ReadFull(f, tr[:]); err != nil {
		return readErr(uri, size-trailerSize, err)
	}
	want := binary.LittleEndian.Uint32(tr[:])
	if crc != want {
		return corrupt(uri, -1, "crc mismatch: computed %08x, trailer says %08x", crc, want)
	}

	// Pass 2: decode, recomputing the CRC.
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("ckpt: read %s: %w", uri, err)
	}
	br := bufio.NewReaderSize(f, int(min(bufSize, size)))
	var hb [headerSize]byte
	if _, err := io.ReadFull(br, hb[:]); err != nil {
		return readErr(uri, 0, err)
	}
	if h2, err := parseHeader(hb[:], size, uri); err != nil {
		return err
	} else if h2 != h {
		return corrupt(uri, 0, "header changed while being read")
	}
	crc = crc32.Update(0, castagnoli, hb[:])
	d := newDecoder[V](h, uri, fn)
	var rec []byte
	if h.Records > 0 { // so that rec is no larger than the file
		rec = make([]byte, h.recordSize())
	}
	for i := int64(0); i < h.Records; i++ {
		if _, err := io.ReadFull(br, rec); err != nil {
			return readErr(uri, headerSize+i*int64(len(rec)), err)
		}
		crc = crc32.Update(crc, castagnoli, rec)
		if err := d.record(ctx, i, rec); err != nil {
			return err
		}
	}
	if crc != want {
		return corrupt(uri, -1, "crc mismatch in the second pass: the file changed while being read")
	}
	return nil
}

// crcOf continues crc over the bytes [from, to) of the file, read from r
// (positioned at from) through buf.
func crcOf(crc uint32, r io.Reader, from, to int64, buf []byte, uri string) (uint32, error) {
	for off := from; off < to; {
		chunk := buf[:min(int64(len(buf)), to-off)]
		if _, err := io.ReadFull(r, chunk); err != nil {
			return 0, readErr(uri, off, err)
		}
		crc = crc32.Update(crc, castagnoli, chunk)
		off += int64(len(chunk))
	}
	return crc, nil
}

// decoder delivers verified records to fn.
type decoder[V Number] struct {
	h     Header
	uri   string
	fn    func(uint64, []V, []V) error
	vals  []V
	state []V
	esz   int
}

func newDecoder[V Number](h Header, uri string, fn func(uint64, []V, []V) error) *decoder[V] {
	d := &decoder[V]{h: h, uri: uri, fn: fn, esz: h.Elem.size()}
	// Allocated only for a file that holds at least one record of this
	// size, so never more than the file's size.
	if h.Records > 0 {
		d.vals = make([]V, h.Dim)
		if h.StateWidth > 0 {
			d.state = make([]V, h.Dim*h.StateWidth)
		}
	}
	return d
}

// record decodes record i from rec and passes it to fn.
func (d *decoder[V]) record(ctx context.Context, i int64, rec []byte) error {
	if i%ctxEvery == 0 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("ckpt: read %s: %w", d.uri, ctxErr(ctx))
		}
	}
	key := binary.LittleEndian.Uint64(rec)
	getVals(rec[8:], d.vals, d.h.Elem)
	getVals(rec[8+d.h.Dim*d.esz:], d.state, d.h.Elem)
	if err := d.fn(key, d.vals, d.state); err != nil {
		return fmt.Errorf("ckpt: read %s: record %d (key %d): %w", d.uri, i, key, err)
	}
	return nil
}

// sha256Of returns the size and hex SHA-256 of the file name.
func sha256Of(ctx context.Context, fsys dfs.FileSystem, name string) (int64, string, error) {
	f, err := fsys.Open(ctx, name)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, f, make([]byte, bufSize))
	if err != nil {
		return 0, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}
