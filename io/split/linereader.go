package split

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/spindle-ps/spindle/io/dfs"
)

// Defaults of ReaderOptions.
const (
	DefaultMaxLineLength = 1 << 20
	DefaultBufferSize    = 64 << 10
)

// ReaderOptions tunes a LineReader. The zero value gives the defaults.
type ReaderOptions struct {
	// MaxLineLength is the longest line accepted, in bytes without the
	// line ending. A longer line is reported as a *LineError wrapping
	// ErrLineTooLong and skipped; memory use stays below about
	// MaxLineLength+BufferSize. Default 1 MiB.
	MaxLineLength int
	// BufferSize is the size of the read buffer, and of each read from
	// the file. Default 64 KiB; at least 16.
	BufferSize int
}

func (o ReaderOptions) withDefaults() ReaderOptions {
	if o.MaxLineLength <= 0 {
		o.MaxLineLength = DefaultMaxLineLength
	}
	if o.BufferSize <= 0 {
		o.BufferSize = DefaultBufferSize
	}
	if o.BufferSize < 16 {
		o.BufferSize = 16
	}
	return o
}

// ErrLineTooLong is wrapped by the *LineError reported for a line longer
// than ReaderOptions.MaxLineLength.
var ErrLineTooLong = errors.New("split: line too long")

// LineError is a problem with one line, or with reading at one place,
// of a file: its URI and the byte offset of the line's start (for a
// gzip file, the offset in the decompressed stream).
type LineError struct {
	URI    string
	Offset int64
	Err    error
}

func (e *LineError) Error() string {
	return fmt.Sprintf("split: %s at byte %d: %s", e.URI, e.Offset, strings.TrimPrefix(e.Err.Error(), "split: "))
}

func (e *LineError) Unwrap() error { return e.Err }

// Open opens the lines of split s, following Hadoop's LineRecordReader:
//
//   - a line is the bytes up to and including "\n" (or the end of the
//     file); the "\n" and a "\r" before it are not part of the line;
//   - a line belongs to the split in which its first byte lies;
//   - a split that does not start at 0 first skips the rest of the line
//     that started before it (it reads from Start-1 up to and including
//     the next "\n"), and the last line of a split is read to its end,
//     past Start+Length and across block boundaries if need be.
//
// So whatever the split size, every line of a file is read by exactly one
// of its splits. (Hadoop gives a line that starts exactly at a split
// boundary to the previous split; both rules read every line once.)
//
// ctx governs the whole life of the LineReader, as for dfs.File. The
// file's size must still be s.FileSize.
func Open(ctx context.Context, r Resolver, s Split, opts ReaderOptions) (*LineReader, error) {
	if s.Start < 0 || s.Length < 0 || s.Start > math.MaxInt64-s.Length || s.Start+s.Length > s.FileSize {
		return nil, fmt.Errorf("split: %v: bad range for a file of %d bytes", s, s.FileSize)
	}
	if s.Compressed && s.Start != 0 {
		return nil, fmt.Errorf("split: %v: a compressed file is read whole (start must be 0)", s)
	}
	fsys, name, err := r.Resolve(ctx, s.URI)
	if err != nil {
		return nil, fmt.Errorf("split: open %v: %w", s, err)
	}
	f, err := fsys.Open(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("split: open %v: %w", s, err)
	}
	lr, err := openFile(ctx, f, s, opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	lr.reopen = func() (io.ReadCloser, error) { return reopen(ctx, fsys, name, s.Compressed) }
	return lr, nil
}

// reopen opens the file name of fsys again from its start, decompressed
// when compressed, for LineAt.
func reopen(ctx context.Context, fsys dfs.FileSystem, name string, compressed bool) (io.ReadCloser, error) {
	f, err := fsys.Open(ctx, name)
	if err != nil || !compressed {
		return f, err
	}
	gz, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		f.Close()
		return nil, err
	}
	return readClosers{gz, []io.Closer{gz, f}}, nil
}

type readClosers struct {
	io.Reader
	closers []io.Closer
}

func (r readClosers) Close() error { return closeAll(r.closers) }

// closeAll closes every one of cs, and returns their errors joined.
func closeAll(cs []io.Closer) error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// MaxLineCount is how far into a file LineAt reads to count lines.
const MaxLineCount = 256 << 20

// LineAt returns the number, counted from 1, of the line that starts at
// offset of the file (for a gzip file, at that offset of the
// decompressed stream). It counts the lines before it, reading the file
// again with the context Open was given: from its start, or on from the
// offset of the call before when this one is further on, so that the
// lines of several records in order cost one read. It is for errors, not
// for every line. ok is false for a reader NewLineReader made, for an
// offset past MaxLineCount, after Close, and when that read fails: the
// byte offset then has to do.
func (lr *LineReader) LineAt(offset int64) (line int64, ok bool) {
	if lr.reopen == nil || lr.closed || offset < 0 || offset > MaxLineCount {
		return 0, false
	}
	c := &lr.count
	if c.f == nil || offset < c.off {
		c.close()
		f, err := lr.reopen()
		if err != nil {
			return 0, false
		}
		c.f, c.off, c.line = f, 0, 1
	}
	if c.buf == nil {
		c.buf = make([]byte, 64<<10)
	}
	for c.off < offset {
		n, err := c.f.Read(c.buf[:min(int64(len(c.buf)), offset-c.off)])
		c.line += int64(bytes.Count(c.buf[:n], []byte{'\n'}))
		c.off += int64(n)
		if n == 0 && err == nil {
			err = io.ErrNoProgress
		}
		if err != nil && c.off < offset {
			c.close()
			return 0, false
		}
	}
	return c.line, true
}

// lineCount is LineAt's second reading of the file: read up to off,
// where line starts (counted from 1).
type lineCount struct {
	f         io.ReadCloser
	off, line int64
	buf       []byte
}

func (c *lineCount) close() {
	if c.f != nil {
		c.f.Close()
	}
	*c = lineCount{buf: c.buf}
}

// Place names a place in a file for an error: its URI, the line's
// number when known (not 0), and the byte offset.
func Place(uri string, line, offset int64) string {
	if line > 0 {
		return fmt.Sprintf("%s, line %d (byte %d)", uri, line, offset)
	}
	return fmt.Sprintf("%s at byte %d", uri, offset)
}

func openFile(ctx context.Context, f dfs.File, s Split, opts ReaderOptions) (*LineReader, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("split: open %v: %w", s, err)
	}
	if fi.Size() != s.FileSize {
		return nil, fmt.Errorf("split: open %v: the file has %d bytes, not the %d it had when it was planned", s, fi.Size(), s.FileSize)
	}
	opts = opts.withDefaults()
	if s.Compressed {
		raw := &endReader{r: f, size: s.FileSize}
		gz, err := gzip.NewReader(bufio.NewReaderSize(raw, opts.BufferSize))
		if err != nil {
			return nil, &LineError{URI: s.URI, Offset: 0, Err: corrupt(err, raw)}
		}
		lr := newLineReader(gunzip{gz, raw}, s.URI, 0, math.MaxInt64, false, opts)
		lr.closers = []io.Closer{gz, f}
		return lr, nil
	}
	pos, skip := s.Start, false
	if s.Start > 0 {
		pos, skip = s.Start-1, true
		if _, err := f.Seek(pos, io.SeekStart); err != nil {
			return nil, fmt.Errorf("split: open %v: %w", s, err)
		}
	}
	lr := newLineReader(f, s.URI, pos, s.Start+s.Length, skip, opts)
	lr.closers = []io.Closer{f}
	return lr, nil
}

// ErrCorrupt is wrapped by the error for a compressed file whose data is
// not valid: not gzip, damaged, or cut short. Reading it again fails the
// same way.
var ErrCorrupt = errors.New("corrupt gzip data")

// gunzip is a gzip file's decompressed stream, whose errors that come
// from the file's contents wrap ErrCorrupt.
type gunzip struct {
	gz  *gzip.Reader
	raw *endReader
}

func (g gunzip) Read(p []byte) (int, error) {
	n, err := g.gz.Read(p)
	if err != nil && err != io.EOF {
		err = corrupt(err, g.raw)
	}
	return n, err
}

// corrupt returns err, an error of the gzip reader over raw, wrapping
// ErrCorrupt when the file's contents are at fault: a bad header or
// checksum, a bad deflate stream, or the stream unfinished where the file
// ended. An error reading the file is returned as it is.
func corrupt(err error, raw *endReader) error {
	var bad flate.CorruptInputError
	switch {
	case errors.Is(err, gzip.ErrHeader), errors.Is(err, gzip.ErrChecksum), errors.As(err, &bad):
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	case raw.ended && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)):
		return fmt.Errorf("%w: the file ends before its compressed stream does (cut short?): %w", ErrCorrupt, err)
	}
	return err
}

// endReader notes whether its reader came to its end, having read the
// size bytes of the file (a reader that ends early has failed).
type endReader struct {
	r          io.Reader
	size, read int64
	ended      bool
}

func (e *endReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.read += int64(n)
	if err == io.EOF && e.read >= e.size {
		e.ended = true
	}
	return n, err
}

// NewLineReader reads the lines of r, whose first byte is at offset pos
// of the file uri, that start before offset end. With skipFirst, the
// bytes up to and including the first "\n" are skipped first (pos is then
// the offset of the byte before the split, as Open arranges). It honours
// no context of its own: r should (a dfs.File does).
func NewLineReader(r io.Reader, uri string, pos, end int64, skipFirst bool, opts ReaderOptions) *LineReader {
	return newLineReader(r, uri, pos, end, skipFirst, opts.withDefaults())
}

func newLineReader(r io.Reader, uri string, pos, end int64, skip bool, opts ReaderOptions) *LineReader {
	return &LineReader{
		uri:  uri,
		br:   bufio.NewReaderSize(r, opts.BufferSize),
		pos:  pos,
		end:  end,
		skip: skip,
		max:  opts.MaxLineLength,
	}
}

// LineReader reads the lines of one split. It is not safe for concurrent
// use.
type LineReader struct {
	uri     string
	br      *bufio.Reader
	pos     int64 // offset in the file of the next byte br returns
	end     int64 // lines starting at or after end belong to the next split
	skip    bool  // the partial first line is still to be skipped
	max     int
	long    []byte // a line longer than br's buffer, reused
	err     error  // sticky: io.EOF or a read error
	closers []io.Closer
	closed  bool
	reopen  func() (io.ReadCloser, error) // the file from its start (LineAt); nil from NewLineReader
	count   lineCount                     // LineAt's reading
}

// URI returns the URI of the file being read.
func (lr *LineReader) URI() string { return lr.uri }

// Next returns the next line of the split, without its line ending, and
// the offset of its first byte in the file. The line is valid only until
// the next call to Next. At the end of the split it returns io.EOF. A line
// longer than MaxLineLength is skipped and reported as a *LineError
// wrapping ErrLineTooLong; Next may be called again to continue after
// it. Any other error (a read failure, the context ending) is a
// *LineError too, and is returned again by every later call.
func (lr *LineReader) Next() (line []byte, offset int64, err error) {
	if lr.err != nil {
		return nil, 0, lr.err
	}
	if lr.skip {
		if err := lr.discardLine(); err != nil {
			return nil, 0, lr.fail(lr.pos, err)
		}
		lr.skip = false
	}
	if lr.pos >= lr.end {
		lr.err = io.EOF
		return nil, 0, io.EOF
	}
	start := lr.pos
	line, err = lr.br.ReadSlice('\n')
	lr.pos += int64(len(line))
	if errors.Is(err, bufio.ErrBufferFull) {
		return lr.longLine(start, line)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, lr.fail(start, err)
	}
	if len(line) == 0 { // io.EOF
		lr.err = io.EOF
		return nil, 0, io.EOF
	}
	line = trimEOL(line)
	if len(line) > lr.max {
		return nil, 0, &LineError{URI: lr.uri, Offset: start, Err: fmt.Errorf("%w: more than %d bytes", ErrLineTooLong, lr.max)}
	}
	return line, start, nil
}

// longLine continues a line that did not fit in the buffer.
func (lr *LineReader) longLine(start int64, first []byte) ([]byte, int64, error) {
	lr.long = append(lr.long[:0], first...)
	tooLong := false
	for {
		chunk, err := lr.br.ReadSlice('\n')
		lr.pos += int64(len(chunk))
		if !tooLong {
			if len(lr.long)+len(chunk) > lr.max+2 { // +2: room for "\r\n"
				tooLong = true
				lr.long = lr.long[:0]
			} else {
				lr.long = append(lr.long, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, lr.fail(start, err)
		}
		break
	}
	line := trimEOL(lr.long)
	if tooLong || len(line) > lr.max {
		lr.long = lr.long[:0]
		return nil, 0, &LineError{URI: lr.uri, Offset: start, Err: fmt.Errorf("%w: more than %d bytes", ErrLineTooLong, lr.max)}
	}
	return line, start, nil
}

// discardLine skips up to and including the next "\n".
func (lr *LineReader) discardLine() error {
	for {
		chunk, err := lr.br.ReadSlice('\n')
		lr.pos += int64(len(chunk))
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return nil
		default:
			return err
		}
	}
}

func (lr *LineReader) fail(off int64, err error) error {
	lr.err = &LineError{URI: lr.uri, Offset: off, Err: err}
	return lr.err
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// Close closes the file. It is idempotent.
func (lr *LineReader) Close() error {
	if lr.closed {
		return nil
	}
	lr.closed = true
	lr.count.close()
	if lr.err == nil {
		lr.err = fmt.Errorf("split: %s: %w", lr.uri, dfs.ErrClosed)
	}
	return closeAll(lr.closers)
}
