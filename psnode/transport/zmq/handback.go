package zmq

/*
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// The hand-back of frames libzmq has done with, without calling into Go
// from libzmq's threads.

extern void spindleReleased(uintptr_t handle);

static pthread_mutex_t spindle_hb_mu = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t *spindle_hb_q;
static size_t spindle_hb_n, spindle_hb_cap;
static int spindle_hb_fd = -1;

void spindle_handback_init(int fd) {
	pthread_mutex_lock(&spindle_hb_mu);
	spindle_hb_fd = fd;
	pthread_mutex_unlock(&spindle_hb_mu);
}

// spindle_release is the free function of a frame sent from Go memory:
// libzmq calls it, from whichever thread drops the last reference, once
// it no longer reads the frame. It queues the handle for the hand-back
// goroutine and wakes it when the queue was empty. Should the queue not
// grow (no memory) or the goroutine not run yet, it calls into Go as a
// last resort.
void spindle_release(void *data, void *hint) {
	(void)data;
	uintptr_t h = (uintptr_t)hint;
	pthread_mutex_lock(&spindle_hb_mu);
	int fd = spindle_hb_fd;
	if (fd >= 0 && spindle_hb_n == spindle_hb_cap) {
		size_t c = spindle_hb_cap ? 2 * spindle_hb_cap : 64;
		uintptr_t *q = realloc(spindle_hb_q, c * sizeof *q);
		if (q == NULL) {
			fd = -1;
		} else {
			spindle_hb_q = q;
			spindle_hb_cap = c;
		}
	}
	if (fd < 0) {
		pthread_mutex_unlock(&spindle_hb_mu);
		spindleReleased(h);
		return;
	}
	spindle_hb_q[spindle_hb_n++] = h;
	int wake = spindle_hb_n == 1;
	pthread_mutex_unlock(&spindle_hb_mu);
	if (wake) {
		// A full pipe (EAGAIN) already holds a wake-up the goroutine has
		// not read: it drains the queue after every read.
		char one = 1;
		int e = errno;
		while (write(fd, &one, 1) < 0 && errno == EINTR) {
		}
		errno = e;
	}
}

// spindle_take_released moves up to max queued handles to out and returns
// how many.
size_t spindle_take_released(uintptr_t *out, size_t max) {
	pthread_mutex_lock(&spindle_hb_mu);
	size_t n = spindle_hb_n < max ? spindle_hb_n : max;
	memcpy(out, spindle_hb_q + (spindle_hb_n - n), n * sizeof *out);
	spindle_hb_n -= n;
	pthread_mutex_unlock(&spindle_hb_mu);
	return n;
}

// The sealed frames' pool (sealbuf.go), kept in C so that libzmq hands a
// frame's memory back without leaving its thread: at most
// SPINDLE_POOL_SLOTS buffers and spindle_pool_max bytes.
#define SPINDLE_POOL_SLOTS 256
static pthread_mutex_t spindle_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static void *spindle_pool_data[SPINDLE_POOL_SLOTS];
static size_t spindle_pool_class[SPINDLE_POOL_SLOTS];
static size_t spindle_pool_n, spindle_pool_bytes;
static size_t spindle_pool_max;

void spindle_pool_init(size_t max) {
	pthread_mutex_lock(&spindle_pool_mu);
	spindle_pool_max = max;
	pthread_mutex_unlock(&spindle_pool_mu);
}

// spindle_pool_get returns memory of class bytes: the buffer of that
// class returned last, or a new one (NULL when malloc fails).
void *spindle_pool_get(size_t class) {
	pthread_mutex_lock(&spindle_pool_mu);
	for (size_t i = spindle_pool_n; i-- > 0;) {
		if (spindle_pool_class[i] == class) {
			void *d = spindle_pool_data[i];
			memmove(spindle_pool_data + i, spindle_pool_data + i + 1, (spindle_pool_n - i - 1) * sizeof *spindle_pool_data);
			memmove(spindle_pool_class + i, spindle_pool_class + i + 1, (spindle_pool_n - i - 1) * sizeof *spindle_pool_class);
			spindle_pool_n--;
			spindle_pool_bytes -= class;
			pthread_mutex_unlock(&spindle_pool_mu);
			return d;
		}
	}
	pthread_mutex_unlock(&spindle_pool_mu);
	return malloc(class);
}

// spindle_pool_free is the free function of a frame whose memory comes
// from the pool: libzmq calls it once it is done with the frame, and the
// memory goes back to the pool, or is freed when the pool is full.
void spindle_pool_free(void *data, void *hint) {
	size_t class = (size_t)hint;
	pthread_mutex_lock(&spindle_pool_mu);
	if (spindle_pool_n < SPINDLE_POOL_SLOTS && spindle_pool_bytes + class <= spindle_pool_max) {
		spindle_pool_data[spindle_pool_n] = data;
		spindle_pool_class[spindle_pool_n] = class;
		spindle_pool_n++;
		spindle_pool_bytes += class;
		pthread_mutex_unlock(&spindle_pool_mu);
		return;
	}
	pthread_mutex_unlock(&spindle_pool_mu);
	free(data);
}

// spindle_pool_put returns memory of class bytes to the pool.
void spindle_pool_put(void *data, size_t class) {
	spindle_pool_free(data, (void *)class);
}

// spindle_pool_held reports the bytes the pool holds, for tests.
size_t spindle_pool_held(void) {
	pthread_mutex_lock(&spindle_pool_mu);
	size_t n = spindle_pool_bytes;
	pthread_mutex_unlock(&spindle_pool_mu);
	return n;
}
*/
import "C"

import (
	"os"
	"runtime/cgo"
	"sync"
)

// libzmq hands back the frames it was lent (sendBorrowed) and the sealed
// frames' memory (newCFrame) through free functions it calls on its own
// I/O thread. A call from that thread into Go waits for a free processor
// (a P) of the Go scheduler, and meanwhile the thread moves no other
// byte: with every P busy, as when a process seals or trains, that wait
// held up the I/O of every connection of the context. So neither free
// function calls into Go. The pool's memory goes back to a pool kept in
// C. The handle of a lent message goes into a queue in C, and the first
// handle queued wakes, through a pipe, the hand-back goroutine, which
// returns the loans (borrowed.release) from Go.
var handback struct {
	once sync.Once
	w    *os.File // kept open for as long as the process runs
}

// startHandback starts the hand-back goroutine once per process. Until it
// has, or if the pipe cannot be made, spindle_release calls into Go as
// before.
func startHandback() {
	handback.once.Do(func() {
		r, w, err := os.Pipe()
		if err != nil {
			return
		}
		raw, err := w.SyscallConn()
		if err == nil {
			err = raw.Control(func(fd uintptr) { C.spindle_handback_init(C.int(fd)) })
		}
		if err != nil {
			_ = r.Close()
			_ = w.Close()
			return
		}
		handback.w = w
		go handBack(r)
	})
}

// handBack returns the loans queued by spindle_release, each time the
// pipe r wakes it. It runs for as long as the process does.
func handBack(r *os.File) {
	var wake [64]byte
	var hs [256]C.uintptr_t
	for {
		if _, err := r.Read(wake[:]); err != nil {
			// Not expected of a pipe whose write end is never closed.
			// The next loans go back by calls into Go; these queued
			// ones now.
			C.spindle_handback_init(-1)
			drainHandback(hs[:])
			return
		}
		drainHandback(hs[:])
	}
}

// drainHandback returns every loan queued now.
func drainHandback(hs []C.uintptr_t) {
	for {
		n := int(C.spindle_take_released(&hs[0], C.size_t(len(hs))))
		for _, h := range hs[:n] {
			cgo.Handle(h).Value().(*borrowed).release()
		}
		if n < len(hs) {
			return
		}
	}
}
