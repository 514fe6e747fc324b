package dfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"path"
	"sync/atomic"
	"time"

	"github.com/colinmarc/hdfs/v2"
)

// stream is what an open File or Writer shares: its session reference,
// its context, and a watchdog that aborts the NameNode connection when a
// Read/Write/Close outlives the context or IOTimeout (DataNode traffic is
// bounded by connection deadlines instead).
type stream struct {
	h *HDFS
	// s is the session, which fresh may replace between calls while the
	// watchdog reads it.
	s      atomic.Pointer[session]
	ctx    context.Context
	name   string
	inCall atomic.Bool
	timer  *time.Timer
	stop   func() bool
	closed bool
	err    error // sticky: the first failure of a Writer
}

func newStream(h *HDFS, s *session, ctx context.Context, name string) *stream {
	st := &stream{h: h, ctx: ctx, name: name}
	st.s.Store(s)
	st.timer = time.AfterFunc(time.Hour, st.onTimeout)
	st.timer.Stop()
	st.stop = context.AfterFunc(ctx, st.onTimeout)
	return st
}

func (st *stream) onTimeout() {
	if st.inCall.Load() {
		st.s.Load().abort()
	}
}

// enter starts a Read/Write/Close: it checks the context and returns the
// deadline for the DataNode connection.
func (st *stream) enter(op string) (time.Time, error) {
	if st.closed {
		return time.Time{}, pathError(op, st.h.URI(st.name), ErrClosed)
	}
	if err := st.ctx.Err(); err != nil {
		return time.Time{}, pathError(op, st.h.URI(st.name), err)
	}
	now := time.Now()
	d, ok := deadlineOf(st.ctx, now, st.h.opts.IOTimeout)
	st.inCall.Store(true)
	if ok && st.h.opts.IOTimeout > 0 {
		st.timer.Reset(d.Sub(now))
	}
	if !ok {
		d = time.Time{}
	}
	return d, nil
}

// exit ends a call started by enter and maps its error.
func (st *stream) exit(op string, err error) error {
	st.inCall.Store(false)
	st.timer.Stop()
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	if cerr := st.ctx.Err(); cerr != nil {
		return pathError(op, st.h.URI(st.name), fmt.Errorf("%w (%w)", cerr, innerError(err)))
	}
	return opError(op, st.h.URI(st.name), st.h.mapError(st.s.Load(), err))
}

func (st *stream) release() {
	if st.closed {
		return
	}
	st.closed = true
	st.stop()
	st.timer.Stop()
	st.h.release(st.s.Load())
}

// fresh moves the stream to a new session once its own has retired,
// where DataNodes encrypt every block (see dataKeyRetirement): the
// session's data encryption key is about to expire, and a DataNode would
// refuse the connections a later block needs. With force it reopens the
// file in any case, through the current session. reopen opens the file
// again through the session's client; if it fails, the stream keeps its
// session and fresh returns the error. fresh reports whether it reopened
// the file. Call it between calls, not while one is in flight.
func (st *stream) fresh(op string, force bool, reopen func(c *hdfs.Client) error) (bool, error) {
	old := st.s.Load()
	if !force && (old.retireAt.IsZero() || st.h.now().Before(old.retireAt)) {
		return false, nil
	}
	s, err := st.h.acquire(st.ctx)
	if err != nil {
		return false, opError(op, st.h.URI(st.name), err)
	}
	if _, err := st.h.guarded(st.ctx, s, op, st.h.URI(st.name), reopen); err != nil {
		st.h.release(s)
		return false, err
	}
	st.s.Store(s)
	st.h.release(old)
	return true, nil
}

type hdfsFile struct {
	*stream
	r    *hdfs.FileReader
	info fs.FileInfo
	off  int64 // the offset of Read, kept here for a reader opened again
}

// Read reads on from the file's offset. A read that fails is tried once
// more on the file opened again (see retry).
func (f *hdfsFile) Read(b []byte) (int, error) {
	n, err := f.read(b)
	if f.retry(n, err) {
		n, err = f.read(b)
	}
	return n, err
}

func (f *hdfsFile) read(b []byte) (int, error) {
	if err := f.renew(false); err != nil {
		return 0, err
	}
	if err := f.ensureToken(); err != nil {
		return 0, err
	}
	d, err := f.enter("read")
	if err != nil {
		return 0, err
	}
	f.r.SetDeadline(d)
	n, err := f.r.Read(b)
	f.off += int64(n)
	if errors.Is(err, io.EOF) {
		err = f.short(f.off, err)
	}
	return n, f.exit("read", err)
}

// ReadAt implements io.ReaderAt, leaving the offset of Read unchanged. A
// read that fails is tried once more on the file opened again (see retry).
func (f *hdfsFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.readAt(b, off)
	if f.retry(n, err) {
		n, err = f.readAt(b, off)
	}
	return n, err
}

func (f *hdfsFile) readAt(b []byte, off int64) (int, error) {
	if err := f.renew(false); err != nil {
		return 0, err
	}
	if err := f.ensureToken(); err != nil {
		return 0, err
	}
	d, err := f.enter("read")
	if err != nil {
		return 0, err
	}
	f.r.SetDeadline(d)
	n, err := f.r.ReadAt(b, off)
	if errors.Is(err, io.EOF) {
		err = f.short(off+int64(n), err)
	}
	if _, serr := f.r.Seek(f.off, io.SeekStart); serr != nil && err == nil {
		err = serr
	}
	return n, f.exit("read", err)
}

// short returns eof when a read that ended at pos reached the end of the
// file, and otherwise an error: the HDFS client library reports some
// refusals by a DataNode (a block token that expired, for one) as the end
// of the data, which would pass a file's first part off as all of it.
func (f *hdfsFile) short(pos int64, eof error) error {
	if size := f.info.Size(); pos < size {
		return fmt.Errorf("the data ended at byte %d of %d: %w", pos, size, io.ErrUnexpectedEOF)
	}
	return eof
}

// retry reports whether a read that returned n bytes and err should be
// tried again, and if so opens the file again at its offset (renew): a
// read that failed with nothing read, not for the end of the file, a
// closed file, the context or a timeout. Block access tokens and data encryption
// keys expire; a file kept open longer than they live reads on once it
// is opened again, as Hadoop's client then fetches the block locations
// again. A failure to reopen leaves the first error to be returned.
func (f *hdfsFile) retry(n int, err error) bool {
	if n > 0 || err == nil || errors.Is(err, io.EOF) || errors.Is(err, ErrClosed) || f.closed || f.ctx.Err() != nil {
		return false
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return false // IOTimeout bounds the call, not twice it
	}
	return f.renew(true) == nil
}

// renew opens the file again, at the same offset, through a new session
// once its own has retired, or with force in any case (stream.fresh), so
// that a file kept open longer than a data encryption key lives goes on
// reading.
func (f *hdfsFile) renew(force bool) error {
	if f.closed {
		return nil // enter reports it
	}
	_, err := f.fresh("read", force, func(c *hdfs.Client) error {
		r, err := c.Open(f.name)
		if err != nil {
			return err
		}
		if _, err := r.Seek(f.off, io.SeekStart); err != nil {
			r.Close()
			return err
		}
		f.r.Close()
		f.r = r
		return nil
	})
	return err
}

// ensureToken makes sure, where this package authenticates to the
// DataNodes, of a block access token that outlives the connections a
// read may make (see ensureBlockToken: a cheap check while it is fresh).
func (f *hdfsFile) ensureToken() error {
	if f.h.saslQOPs == nil || f.info.Size() == 0 {
		return nil
	}
	if err := f.h.ensureBlockToken(f.ctx, f.name); err != nil {
		return pathError("read", f.h.URI(f.name), err)
	}
	return nil
}

func (f *hdfsFile) Seek(off int64, whence int) (int64, error) {
	if _, err := f.enter("seek"); err != nil {
		return 0, err
	}
	n, err := f.r.Seek(off, whence)
	if err != nil {
		err = fmt.Errorf("%w: %w", err, fs.ErrInvalid)
	} else {
		f.off = n
	}
	return n, f.exit("seek", err)
}

func (f *hdfsFile) Stat() (fs.FileInfo, error) { return f.info, nil }

func (f *hdfsFile) Close() error {
	if f.closed {
		return nil
	}
	err := f.r.Close()
	f.release()
	if err != nil {
		return pathError("close", f.h.URI(f.name), innerError(err))
	}
	return nil
}

type hdfsWriter struct {
	*stream
	w         *hdfs.FileWriter
	blockSize int64
	pos       int64 // bytes written
	rolledAt  int64 // pos of the last roll to a new FileWriter
}

// Write writes b one block at a time. When a block is full, the writer
// completes the file and reopens it for append before writing on: see
// roll.
func (w *hdfsWriter) Write(b []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	d, err := w.enter("write")
	if err != nil {
		return 0, err
	}
	n := 0
	for n < len(b) && err == nil {
		if w.pos > 0 && w.pos%w.blockSize == 0 && w.rolledAt != w.pos {
			if err = w.roll(d); err != nil {
				break
			}
		}
		chunk := b[n:]
		if room := w.blockSize - w.pos%w.blockSize; int64(len(chunk)) > room {
			chunk = chunk[:room] // fill the block exactly: no new block yet
		}
		w.w.SetDeadline(d)
		var m int
		m, err = w.w.Write(chunk)
		n += m
		w.pos += int64(m)
	}
	if err = w.exit("write", err); err != nil {
		w.err = err
	}
	return n, err
}

// roll moves on from a full block. The client would ask the NameNode for
// the next block right away, and the NameNode refuses
// (NotReplicatedYetException) while the block before the last one waits
// for its DataNode's report, which is common with small blocks or a busy
// NameNode. Hadoop's client retries; this client cannot, as it has
// dropped the block it would have to name. So the writer completes the
// file, which waits until every block is reported, and reopens it for
// append: the next Write asks for a block after a complete one, which the
// NameNode accepts. Between the two, readers see a complete file holding
// the blocks written so far.
func (w *hdfsWriter) roll(d time.Time) error {
	if err := w.complete(); err != nil {
		return err
	}
	// The next block's pipeline is new: through a new session once this
	// one has retired (stream.fresh).
	var nw *hdfs.FileWriter
	appendOn := func(c *hdfs.Client) (err error) {
		nw, err = c.Append(w.name)
		return err
	}
	moved, err := w.fresh("write", false, appendOn)
	if err == nil && !moved {
		err = appendOn(w.s.Load().client)
	}
	if err != nil {
		return err
	}
	w.w, w.rolledAt = nw, w.pos
	return nil
}

// complete closes the client's writer: it flushes the data, waits for the
// DataNodes' acknowledgements and completes the file on the NameNode,
// retrying while the NameNode waits for the last blocks' reports (as
// Hadoop's client does).
func (w *hdfsWriter) complete() error {
	backoff := 5 * time.Millisecond
	for {
		err := w.w.Close()
		if !hdfs.IsErrReplicating(err) {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-w.ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for the blocks to be reported: %w", w.ctx.Err())
		}
		if backoff < time.Second {
			backoff *= 2
		}
	}
}

// Close completes the file (see complete).
func (w *hdfsWriter) Close() error {
	if w.closed {
		return pathError("close", w.h.URI(w.name), ErrClosed)
	}
	defer w.release()
	defer w.h.noteWriting(w.name, -1)
	if w.err != nil {
		return w.err
	}
	d, err := w.enter("close")
	if err != nil {
		return err
	}
	w.w.SetDeadline(d)
	return w.exit("close", w.complete())
}

// hdfsInfo is an fs.FileInfo for an HDFS file or directory.
type hdfsInfo struct {
	name      string
	size      int64
	mode      fs.FileMode
	mtime     time.Time
	blockSize int64
	owner     string
	group     string
}

func newHDFSInfo(fi fs.FileInfo, name string) fs.FileInfo {
	info := &hdfsInfo{name: fi.Name(), size: fi.Size(), mode: fi.Mode(), mtime: fi.ModTime()}
	if info.name == "" || info.name == "." {
		info.name = path.Base(name)
	}
	if hf, ok := fi.(*hdfs.FileInfo); ok {
		if st, ok := hf.Sys().(*hdfs.FileStatus); ok && !fi.IsDir() {
			info.blockSize = int64(st.GetBlocksize())
		}
		info.owner, info.group = hf.Owner(), hf.OwnerGroup()
	}
	return info
}

func (fi *hdfsInfo) Name() string       { return fi.name }
func (fi *hdfsInfo) Size() int64        { return fi.size }
func (fi *hdfsInfo) Mode() fs.FileMode  { return fi.mode }
func (fi *hdfsInfo) ModTime() time.Time { return fi.mtime }
func (fi *hdfsInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi *hdfsInfo) BlockSize() int64   { return fi.blockSize }

// Sys returns an *HDFSStat.
func (fi *hdfsInfo) Sys() any {
	return &HDFSStat{Owner: fi.owner, Group: fi.group, BlockSize: fi.blockSize}
}

// HDFSStat is what Sys returns for an HDFS FileInfo.
type HDFSStat struct {
	Owner, Group string
	BlockSize    int64
}
