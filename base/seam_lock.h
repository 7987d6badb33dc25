/* vrambench — the allocator handle's lock (allocators/allocator.h, "Thread
 * safety"): a mutex whose lock and unlock, when no other thread holds or
 * waits for it, are one atomic instruction each, inline. A replay takes it
 * once per event, and glibc's pthread_mutex_lock and unlock took 56 of the
 * 855 instructions per event of a `caching` drive of a long random trace
 * (docs/bench.md, "Replay speed"). A thread that finds it held sleeps in
 * the kernel (Linux's futex, as glibc's mutex does) and never spins.
 * Elsewhere it is a pthread mutex.
 *
 * The states and the protocol are those of the three-state mutex of Ulrich
 * Drepper's paper "Futexes Are Tricky": 0 free, 1 held, 2 held with a
 * thread perhaps asleep on it; an unlock that finds 2 wakes one. */
#ifndef VB_SEAM_LOCK_H
#define VB_SEAM_LOCK_H

#ifdef __linux__
#include <stdatomic.h>

typedef struct vb_seam_lock {
    atomic_int state;
} vb_seam_lock;

/* The slow halves (base/seam_lock.c): sleep until the lock is taken, the
 * state seen being `seen` (not 0); wake one sleeper. */
void vb_seam_lock_wait(vb_seam_lock *lock, int seen);
void vb_seam_lock_wake(vb_seam_lock *lock);

static inline void vb_seam_lock_init(vb_seam_lock *lock)
{
    atomic_init(&lock->state, 0);
}

static inline void vb_seam_lock_destroy(vb_seam_lock *lock)
{
    (void)lock;
}

/* Takes the lock; sleeps while another thread holds it. */
static inline void vb_seam_lock_take(vb_seam_lock *lock)
{
    int seen = 0;
    if (!atomic_compare_exchange_strong_explicit(&lock->state, &seen, 1, memory_order_acquire, memory_order_relaxed))
        vb_seam_lock_wait(lock, seen);
}

/* Gives the lock back; wakes a thread that may sleep on it. */
static inline void vb_seam_lock_give(vb_seam_lock *lock)
{
    if (atomic_exchange_explicit(&lock->state, 0, memory_order_release) == 2) vb_seam_lock_wake(lock);
}

#else
#include <pthread.h>

typedef struct vb_seam_lock {
    pthread_mutex_t mutex;
} vb_seam_lock;

static inline void vb_seam_lock_init(vb_seam_lock *lock) { pthread_mutex_init(&lock->mutex, NULL); }
static inline void vb_seam_lock_destroy(vb_seam_lock *lock) { pthread_mutex_destroy(&lock->mutex); }
static inline void vb_seam_lock_take(vb_seam_lock *lock) { pthread_mutex_lock(&lock->mutex); }
static inline void vb_seam_lock_give(vb_seam_lock *lock) { pthread_mutex_unlock(&lock->mutex); }
#endif

#endif
