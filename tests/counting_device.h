/* vrambench tests — a counting proxy device.
 *
 * The conformance suite gives each allocator this proxy instead of the real
 * device. It forwards every op of the device table unchanged and counts what
 * passes through, so the suite can check an allocator's statistics against
 * the device's own view instead of the allocator's word:
 *   - calls that obtain memory (mem_alloc, vm_create, pool_malloc) and calls
 *     that return it (mem_free, vm_release, pool_free), successful or not,
 *     plus the pool_trim calls that released memory (the pool's reserved
 *     bytes dropped across the call);
 *   - bytes held: what the underlying device's mem_info says is in use, minus
 *     what it said when the proxy was made. On sim that figure is exact, and
 *     it covers strategies whose reserved memory is not 1:1 with their calls
 *     (a pool keeps memory across pool_free; it returns it on trim or
 *     synchronize);
 *   - the peak of bytes held, sampled after every call that obtains memory
 *     (held memory can only grow there).
 */
#ifndef VB_TEST_COUNTING_DEVICE_H
#define VB_TEST_COUNTING_DEVICE_H

#include <stdint.h>

#include "base/device.h"

typedef struct vb_counting_device {
    vb_device device;          /* what the allocator is given: proxy ops, state = this struct */
    vb_device *inner;          /* the device every op is forwarded to (not owned) */
    uint64_t baseline_used;    /* inner's used bytes when the proxy was made */
    uint64_t obtain_calls;     /* mem_alloc + vm_create + pool_malloc calls */
    uint64_t return_calls;     /* mem_free + vm_release + pool_free + releasing pool_trim calls */
    uint64_t failed_obtain_calls; /* of obtain_calls, those that did not succeed */
    uint64_t held_peak;        /* the maximum of vb_counting_held() seen after an obtain call */
} vb_counting_device;

/* Wraps `inner` (which must outlive the proxy). The proxy needs no closing:
 * its `close` op does nothing, the test closes `inner` itself. */
void vb_counting_init(vb_counting_device *proxy, vb_device *inner);

/* Bytes the device holds now beyond the baseline, by its own mem_info
 * (0 when it holds less, which only happens on a shared GPU). */
uint64_t vb_counting_held(const vb_counting_device *proxy);

#endif
