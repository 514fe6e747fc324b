package zmq

/*
#cgo !windows pkg-config: libzmq
#include <zmq.h>
#include <stdint.h>
#include <string.h>

extern void spindleFrameReleased(uintptr_t);

static void spindle_release(void *data, void *hint) {
	(void)data;
	spindleFrameReleased((uintptr_t)hint);
}

// spindle_send_inplace sends size bytes at data as one frame that ZeroMQ
// reads where they are, without copying them. It returns the size, or -1
// (errno set) if the frame was not queued; in both cases ZeroMQ calls
// spindle_release(hint) exactly once when it no longer needs the bytes,
// except when it returns -2: the message could not even be made, and
// ZeroMQ will never call it.
static int spindle_send_inplace(void *sock, void *data, size_t size, uintptr_t hint, int flags) {
	zmq_msg_t msg;
	if (zmq_msg_init_data(&msg, data, size, spindle_release, (void *)hint) != 0) {
		return -2;
	}
	int rc = zmq_msg_send(&msg, sock, flags);
	if (rc < 0) {
		int e = errno;
		zmq_msg_close(&msg);
		errno = e;
	}
	return rc;
}

// spindle_recv_frame receives one frame into msg and reports in *more
// whether more frames of the message follow.
static int spindle_recv_frame(void *sock, zmq_msg_t *msg, int flags, int *more) {
	int rc = zmq_msg_recv(msg, sock, flags);
	if (rc >= 0) {
		*more = zmq_msg_more(msg);
	}
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
	"runtime"
	"runtime/cgo"
	"syscall"
	"unsafe"

	zmq4 "github.com/pebbe/zmq4"
)

// pebbe/zmq4 costs five cgo calls per frame received and, for a frame
// sent, a copy into memory that ZeroMQ allocates (and the kernel then
// faults in page by page). The data path therefore calls libzmq directly
// on the sockets pebbe/zmq4 made (which it keeps for everything else): a
// frame is received with two calls into C, and a large frame is copied
// into Go memory backed by huge pages, which ZeroMQ sends from in place.

// inplaceMin is the smallest data frame sent from a copy in Go memory.
// Below it, ZeroMQ's own copy costs less than the callback from its I/O
// thread that releases the Go copy.
const inplaceMin = 256 << 10

// hugeCopy returns a copy of b in new memory, backed by huge pages when b
// is large enough.
func hugeCopy(b []byte) []byte {
	c := make([]byte, len(b))
	adviseHuge(c)
	copy(c, b)
	return c
}

// rawSocket returns the libzmq socket behind s, or nil when it cannot be
// had: the first field of pebbe/zmq4's Socket (v1.4) is the libzmq socket
// pointer, and the socket type it reports must be want, or the layout is
// not the one expected and the data path falls back to pebbe/zmq4's own
// calls.
func rawSocket(s *zmq4.Socket, want zmq4.Type) unsafe.Pointer {
	p := *(*unsafe.Pointer)(unsafe.Pointer(s))
	if p == nil || C.spindle_socket_type(p) != C.int(want) {
		return nil
	}
	return p
}

// inplaceFrame is a frame ZeroMQ reads from Go memory, pinned until
// ZeroMQ releases it.
type inplaceFrame struct{ pin runtime.Pinner }

//export spindleFrameReleased
func spindleFrameReleased(h C.uintptr_t) {
	hd := cgo.Handle(h)
	f := hd.Value().(*inplaceFrame)
	hd.Delete()
	f.pin.Unpin()
}

// sendInplace queues b (not empty) on sock as one frame without copying
// it: b is pinned, and must not change, until ZeroMQ has sent it, so it
// must be memory that nothing else uses. It returns a zmq4.Errno error,
// EAGAIN when the socket has no room.
func sendInplace(sock unsafe.Pointer, b []byte, flags zmq4.Flag) error {
	for {
		f := new(inplaceFrame)
		f.pin.Pin(unsafe.SliceData(b))
		h := cgo.NewHandle(f)
		rc, err := C.spindle_send_inplace(sock, unsafe.Pointer(unsafe.SliceData(b)), C.size_t(len(b)), C.uintptr_t(h), C.int(flags))
		switch {
		case rc >= 0:
			return nil
		case rc == -2:
			h.Delete()
			f.pin.Unpin()
			return zmq4.Errno(syscall.ENOMEM)
		}
		// ZeroMQ has released the frame already (zmq_msg_close).
		if err != syscall.EINTR {
			return errnoOf(err)
		}
	}
}

// recvFrame receives one frame from sock into Go memory and reports
// whether more frames of the message follow. It returns a zmq4.Errno
// error, EAGAIN with DONTWAIT when nothing is waiting.
func recvFrame(sock unsafe.Pointer, flags zmq4.Flag) ([]byte, bool, error) {
	var msg C.zmq_msg_t
	for {
		if C.zmq_msg_init(&msg) != 0 {
			return nil, false, zmq4.Errno(syscall.ENOMEM)
		}
		var more C.int
		rc, err := C.spindle_recv_frame(sock, &msg, C.int(flags), &more)
		if rc < 0 {
			C.zmq_msg_close(&msg)
			if err == syscall.EINTR {
				continue
			}
			return nil, false, errnoOf(err)
		}
		b := make([]byte, int(rc))
		adviseHuge(b)
		var dst unsafe.Pointer
		if rc > 0 {
			dst = unsafe.Pointer(unsafe.SliceData(b))
		}
		C.spindle_take(&msg, dst)
		return b, more != 0, nil
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
