/* vrambench — base/seam_lock: the allocator handle's lock. Threads that
 * take it at once never hold it together (a read-modify-write under it is
 * never lost), including when a taker found it held and slept; a lock
 * given back with no taker is free again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>

#include "base/seam_lock.h"

#define THREADS 4
#define ROUNDS 20000

typedef struct shared {
    vb_seam_lock lock;
    volatile uint64_t counter; /* read, then written, under the lock: two holders at once lose an increment */
    volatile int inside;       /* holders now: never more than 1 */
    volatile int overlaps;     /* times a holder found another inside */
} shared;

static void *contend(void *argument)
{
    shared *s = argument;
    for (int round = 0; round < ROUNDS; round++) {
        vb_seam_lock_take(&s->lock);
        if (s->inside++ != 0) s->overlaps++;
        uint64_t seen = s->counter;
        if (round % 64 == 0) sched_yield(); /* hold it a while now and then: others find it held and sleep */
        s->counter = seen + 1;
        s->inside--;
        vb_seam_lock_give(&s->lock);
    }
    return NULL;
}

static void threads_never_hold_the_lock_together(void **state)
{
    (void)state;
    static shared s;
    vb_seam_lock_init(&s.lock);
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) assert_int_equal(pthread_create(&threads[i], NULL, contend, &s), 0);
    for (int i = 0; i < THREADS; i++) assert_int_equal(pthread_join(threads[i], NULL), 0);
    assert_int_equal(s.overlaps, 0);
    assert_int_equal(s.counter, (uint64_t)THREADS * ROUNDS);
    vb_seam_lock_destroy(&s.lock);
}

/* Taken and given back by one thread, again and again: nothing waits. */
static void a_lock_given_back_can_be_taken_again(void **state)
{
    (void)state;
    vb_seam_lock lock;
    vb_seam_lock_init(&lock);
    for (int i = 0; i < 3; i++) {
        vb_seam_lock_take(&lock);
        vb_seam_lock_give(&lock);
    }
#ifdef __linux__
    assert_int_equal(atomic_load(&lock.state), 0);
#endif
    vb_seam_lock_destroy(&lock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(threads_never_hold_the_lock_together),
        cmocka_unit_test(a_lock_given_back_can_be_taken_again),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
