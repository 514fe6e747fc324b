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
	"syscall"
	"unsafe"

	zmq4 "github.com/pebbe/zmq4"
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
	var msg C.zmq_msg_t
	for {
		var more C.int
		rc, err := C.spindle_recv_frame(sock, &msg, C.int(flags), &more)
		if rc < 0 {
			if err == syscall.EINTR {
				continue
			}
			return nil, false, errnoOf(err)
		}
		b := make([]byte, int(rc))
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
