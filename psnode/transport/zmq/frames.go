package zmq

/*
#cgo !windows pkg-config: libzmq
#include <zmq.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>

// spindle_recv_frame receives one frame into msg and reports in *more
// whether more frames of the message follow.
// On failure msg is closed and errno set.
static int spindle_recv_frame(void *sock, zmq_msg_t *msg, int flags, int *more) {
	zmq_msg_init(msg);
	int rc = zmq_msg_recv(msg, sock, flags);
	if (rc < 0) {
		int e = errno;
		zmq_msg_close(msg);
		errno = e;
		return rc;
	}
	*more = zmq_msg_more(msg);
	return rc;
}

// spindle_take copies the frame in msg to dst (which has room for it) and
// closes msg.
static void spindle_take(zmq_msg_t *msg, void *dst) {
	size_t n = zmq_msg_size(msg);
	if (n > 0) {
		memcpy(dst, zmq_msg_data(msg), n);
	}
	zmq_msg_close(msg);
}

// spindleReleased returns a loan from Go (zerocopy.go); spindle_release,
// the free function of a frame sent from Go memory, queues it for the
// hand-back goroutine (handback.go).
extern void spindleReleased(uintptr_t handle);
extern void spindle_release(void *data, void *hint);

// spindle_send_borrowed sends n bytes at data as one frame without copying
// them; libzmq calls spindle_release with handle when it is done with
// them. On failure the frame is closed (which releases it) and errno set.
static int spindle_send_borrowed(void *sock, void *data, size_t n, int flags, uintptr_t handle) {
	zmq_msg_t msg;
	if (zmq_msg_init_data(&msg, data, n, spindle_release, (void *)handle) != 0) {
		int e = errno;
		spindleReleased(handle);
		errno = e;
		return -1;
	}
	int rc = zmq_msg_send(&msg, sock, flags);
	if (rc < 0) {
		int e = errno;
		zmq_msg_close(&msg);
		errno = e;
	}
	return rc;
}

static void *spindle_msg_data(zmq_msg_t *msg) {
	return zmq_msg_data(msg);
}

static void spindle_msg_close(zmq_msg_t *msg) {
	zmq_msg_close(msg);
}

// spindle_msg_init_size makes msg a frame of n bytes in memory libzmq
// allocates, for the caller to fill before spindle_msg_send.
static int spindle_msg_init_size(zmq_msg_t *msg, size_t n) {
	return zmq_msg_init_size(msg, n);
}

// spindle_msg_send sends msg, which libzmq then owns; on failure the
// caller still owns it.
static int spindle_msg_send(zmq_msg_t *msg, void *sock, int flags) {
	return zmq_msg_send(msg, sock, flags);
}

static size_t spindle_msg_size(zmq_msg_t *msg) {
	return zmq_msg_size(msg);
}

// spindle_pool_free is the free function of a frame whose memory comes
// from the sealed frames' pool (handback.go).
extern void spindle_pool_free(void *data, void *hint);

// spindle_msg_init_pooled makes msg a frame of the n bytes at data, from
// the pool's class.
static int spindle_msg_init_pooled(zmq_msg_t *msg, void *data, size_t n, uintptr_t class) {
	return zmq_msg_init_data(msg, data, n, spindle_pool_free, (void *)class);
}

static int spindle_socket_type(void *sock) {
	int t = -1;
	size_t n = sizeof t;
	if (zmq_getsockopt(sock, ZMQ_TYPE, &t, &n) != 0) {
		return -1;
	}
	return t;
}
*/
import "C"

import (
	"sync"
	"syscall"
	"unsafe"

	zmq4 "github.com/pebbe/zmq4"

	"github.com/spindle-ps/spindle/psnode/internal/pages"
)

// pebbe/zmq4 makes five cgo calls per frame received (zmq_msg_init,
// zmq_msg_recv, a memcpy, zmq_msg_close and a getsockopt of ZMQ_RCVMORE).
// The receive loop therefore calls libzmq directly on the ROUTER socket
// pebbe/zmq4 made (which it keeps for everything else), with two calls a
// frame.

// rawSocket returns the libzmq socket behind s, or nil when it cannot be
// had: the first field of pebbe/zmq4's Socket (v1.4) is the libzmq socket
// pointer, and the socket type it reports must be want, or the layout is
// not the one expected and the receive loop falls back to pebbe/zmq4's
// own calls.
func rawSocket(s *zmq4.Socket, want zmq4.Type) unsafe.Pointer {
	p := *(*unsafe.Pointer)(unsafe.Pointer(s))
	if p == nil || C.spindle_socket_type(p) != C.int(want) {
		return nil
	}
	return p
}

// recvFrame receives one frame from sock into Go memory and reports
// whether more frames of the message follow. It returns a zmq4.Errno
// error, EAGAIN with DONTWAIT when nothing is waiting.
func recvFrame(sock unsafe.Pointer, flags zmq4.Flag) ([]byte, bool, error) {
	b, _, more, err := recvFrameOrKeep(sock, flags, nil)
	return b, more, err
}

// recvFrameOrKeep is recvFrame, except that a frame of bigFrame bytes or
// more for which keep says so stays in libzmq's memory: it returns the
// frame, whose bytes it returns too, for the caller to close.
func recvFrameOrKeep(sock unsafe.Pointer, flags zmq4.Flag, keep func() bool) ([]byte, *cFrame, bool, error) {
	f := new(cFrame)
	for {
		var more C.int
		rc, err := C.spindle_recv_frame(sock, &f.msg, C.int(flags), &more)
		if rc < 0 {
			if err == syscall.EINTR {
				continue
			}
			return nil, nil, false, errnoOf(err)
		}
		if rc >= bigFrame && keep != nil && keep() {
			return f.bytes(), f, more != 0, nil
		}
		b := make([]byte, int(rc))
		if rc >= bigFrame {
			takeBig(&f.msg, b)
			return b, nil, more != 0, nil
		}
		var dst unsafe.Pointer
		if rc > 0 {
			dst = unsafe.Pointer(unsafe.SliceData(b))
		}
		C.spindle_take(&f.msg, dst)
		return b, nil, more != 0, nil
	}
}

func errnoOf(err error) error {
	if e, ok := err.(syscall.Errno); ok {
		return zmq4.Errno(e)
	}
	if err == nil {
		return zmq4.Errno(syscall.EIO)
	}
	return err
}

// sendBorrowed sends b as one frame from Go memory, without the copy
// zmq_send makes: b is lent to r (which pins it) and libzmq returns it
// through spindle_release once it has written the frame or dropped it.
// Whatever the outcome, the loan is returned exactly once.
func sendBorrowed(sock unsafe.Pointer, b []byte, flags zmq4.Flag, r *borrowed) error {
	for {
		r.lend(b)
		rc, err := C.spindle_send_borrowed(sock, unsafe.Pointer(unsafe.SliceData(b)), C.size_t(len(b)), C.int(flags), C.uintptr_t(r.handle))
		if rc >= 0 {
			return nil
		}
		if err == syscall.EINTR {
			continue
		}
		return errnoOf(err)
	}
}

// cFrame is a frame in memory libzmq owns: one received and kept rather
// than copied, or one made to be filled and sent (sealed frames).
type cFrame struct {
	msg C.zmq_msg_t
}

// recvCFrame receives one frame from sock and keeps it in libzmq's
// memory; the caller closes it or sends it on. It reports whether more
// frames of the message follow, and returns a zmq4.Errno error, EAGAIN
// with DONTWAIT when nothing is waiting.
func recvCFrame(sock unsafe.Pointer, flags zmq4.Flag) (*cFrame, bool, error) {
	f := new(cFrame)
	for {
		var more C.int
		rc, err := C.spindle_recv_frame(sock, &f.msg, C.int(flags), &more)
		if rc < 0 {
			if err == syscall.EINTR {
				continue
			}
			return nil, false, errnoOf(err)
		}
		return f, more != 0, nil
	}
}

// newCFrame makes a frame of n bytes for the caller to fill, in memory
// of the sealed frames' pool (sealbuf.go) from sealPoolMin bytes.
func newCFrame(n int) (*cFrame, error) {
	f := new(cFrame)
	if n >= sealPoolMin {
		data, class := poolGet(n)
		if data == nil {
			return nil, zmq4.Errno(syscall.ENOMEM)
		}
		if rc, err := C.spindle_msg_init_pooled(&f.msg, data, C.size_t(n), C.uintptr_t(class)); rc != 0 {
			poolPut(data, class)
			return nil, errnoOf(err)
		}
		return f, nil
	}
	if rc, err := C.spindle_msg_init_size(&f.msg, C.size_t(n)); rc != 0 {
		return nil, errnoOf(err)
	}
	return f, nil
}

// bytes is the frame's content, valid until the frame is closed or sent.
func (f *cFrame) bytes() []byte {
	n := int(C.spindle_msg_size(&f.msg))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(C.spindle_msg_data(&f.msg)), n)
}

// close releases the frame.
func (f *cFrame) close() {
	C.spindle_msg_close(&f.msg)
}

// send hands the frame to sock, which then owns it. On failure the
// caller still owns it.
func (f *cFrame) send(sock unsafe.Pointer, flags zmq4.Flag) error {
	for {
		rc, err := C.spindle_msg_send(&f.msg, sock, C.int(flags))
		if rc >= 0 {
			return nil
		}
		if err == syscall.EINTR {
			continue
		}
		return errnoOf(err)
	}
}

// bigFrame is the size from which takeBig copies a received frame.
const bigFrame = 4 << 20

// copyPart is the least a goroutine of takeBig copies; the parts start
// at multiples of partAlign, so that no page is populated twice.
const (
	copyPart  = 8 << 20
	partAlign = 2 << 20
)

// takeBig copies the frame in msg, of len(dst) bytes, to dst and closes
// msg. The copy is the first touch of dst, a buffer of fresh pages: each
// part is populated in one madvise call rather than faulted in 4 KiB at a
// time, and the parts are copied in parallel, one per processor
// (cpuProcs).
// They are the only work of the receive loop, whose senders wait for it.
func takeBig(msg *C.zmq_msg_t, dst []byte) {
	defer C.spindle_msg_close(msg)
	src := unsafe.Slice((*byte)(C.spindle_msg_data(msg)), len(dst))
	parts := min(cpuProcs(), len(dst)/copyPart, 8)
	if parts <= 1 {
		pages.Advise(dst, 4<<10, pages.Populate)
		copy(dst, src)
		return
	}
	var wg sync.WaitGroup
	step := (len(dst)/parts + partAlign - 1) &^ (partAlign - 1)
	for lo := 0; lo < len(dst); lo += step {
		hi := min(lo+step, len(dst))
		wg.Go(func() {
			pages.Advise(dst[lo:hi], 4<<10, pages.Populate)
			copy(dst[lo:hi], src[lo:hi])
		})
	}
	wg.Wait()
}
