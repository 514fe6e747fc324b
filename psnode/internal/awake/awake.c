//go:build linux

#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "awake.h"

// The spinners' shared state. activity is bumped by the process on every
// message; asleep is the futex word the spinners wait on while the process
// has been quiet for longer than the window.
static _Atomic uint64_t activity;
static _Atomic uint32_t asleep;
static _Atomic uint64_t spins; // rounds of the spinners' loop, for tests
static _Atomic int ready, failed;
static uint64_t window_ns;

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("pause");
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static void *spin(void *arg) {
	(void)arg;
	struct sched_param p = {0};
	// SCHED_IDLE: run only when this processor has nothing else to run,
	// and give way at once when something wakes on it. A thread that
	// cannot have it does not spin.
	if (sched_setscheduler(0, SCHED_IDLE, &p) != 0 || sched_getscheduler(0) != SCHED_IDLE) {
		atomic_fetch_add(&failed, 1);
		return NULL;
	}
	atomic_fetch_add(&ready, 1);
	uint64_t seen = atomic_load(&activity), since = now_ns();
	for (unsigned n = 1;; n++) {
		uint64_t a = atomic_load_explicit(&activity, memory_order_relaxed);
		if (a != seen) {
			seen = a;
			since = now_ns();
			continue;
		}
		if (n % 64 == 0) {
			atomic_fetch_add_explicit(&spins, 1, memory_order_relaxed);
			if (now_ns() - since > window_ns) {
				atomic_store(&asleep, 1);
				// Look again after saying so: a Touch in between either
				// is seen here or finds asleep set and wakes the futex.
				if (atomic_load(&activity) == seen) {
					syscall(SYS_futex, &asleep, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
				}
				atomic_store(&asleep, 0);
				seen = atomic_load(&activity);
				since = now_ns();
				continue;
			}
		}
		relax();
	}
	return NULL;
}

// spindle_awake_start starts threads spinners that spin while activity
// changed within window nanoseconds, and returns how many run.
int spindle_awake_start(int threads, uint64_t window) {
	window_ns = window;
	pthread_attr_t attr;
	if (pthread_attr_init(&attr) != 0) {
		return -1;
	}
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 << 10);
	int started = 0;
	for (int i = 0; i < threads; i++) {
		pthread_t t;
		if (pthread_create(&t, &attr, spin, NULL) == 0) {
			started++;
		}
	}
	pthread_attr_destroy(&attr);
	// Wait, for at most a second, until every thread started says whether
	// it has its scheduling class.
	struct timespec pause = {0, 100000};
	for (int i = 0; i < 10000 && atomic_load(&ready) + atomic_load(&failed) < started; i++) {
		nanosleep(&pause, NULL);
	}
	return atomic_load(&ready);
}

void spindle_awake_wake(void) {
	atomic_store(&asleep, 0);
	syscall(SYS_futex, &asleep, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

uint64_t *spindle_awake_activity(void) { return (uint64_t *)&activity; }

uint32_t *spindle_awake_asleep_word(void) { return (uint32_t *)&asleep; }

uint64_t spindle_awake_spins(void) { return atomic_load(&spins); }

int spindle_awake_sleeping(void) { return atomic_load(&asleep); }
