/* vrambench — the allocator handle's lock: its slow halves (see seam_lock.h). */
#include "seam_lock.h"

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Marks the lock as wanted (2) and sleeps until an unlock wakes this
 * thread, taking it when the exchange finds it free. FUTEX_WAIT returns at
 * once when the state is no longer 2, so no wake-up is lost between the
 * exchange and the sleep. */
void vb_seam_lock_wait(vb_seam_lock *lock, int seen)
{
    if (seen != 2) seen = atomic_exchange_explicit(&lock->state, 2, memory_order_acquire);
    while (seen != 0) {
        syscall(SYS_futex, &lock->state, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
        seen = atomic_exchange_explicit(&lock->state, 2, memory_order_acquire);
    }
}

void vb_seam_lock_wake(vb_seam_lock *lock)
{
    syscall(SYS_futex, &lock->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
#else
typedef int vb_seam_lock_unused; /* ISO C wants a translation unit to declare something */
#endif
