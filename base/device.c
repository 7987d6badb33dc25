/* vrambench — opening a device by kind. The one place that knows whether
 * this build has the cuda backend. */
#include "device.h"

#include <string.h>

#ifdef VB_HAVE_CUDA
/* base/device_cuda.c */
vb_status vb_cuda_open(vb_device **out);
int vb_cuda_device_count(void);
const char *vb_cuda_unavailable_reason(void); /* why the last count was 0 */
#endif

int vb_device_cuda_built(void)
{
#ifdef VB_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

int vb_device_cuda_available(void)
{
#ifdef VB_HAVE_CUDA
    return vb_cuda_device_count() > 0;
#else
    return 0;
#endif
}

#ifdef VB_HAVE_CUDA
/* The cuda backend, under a cap (base/device_cap.c) when `cap` > 0: the same
 * counting as a capped scenario's, so a capped replay fails where the sim's
 * does. */
static vb_status open_cuda(uint64_t cap, vb_device **out)
{
    vb_device *dev = NULL;
    vb_status status = vb_cuda_open(&dev);
    if (status != VB_OK || cap == 0) {
        *out = dev;
        return status;
    }
    status = vb_device_cap_wrap(dev, cap, out);
    if (status != VB_OK) vb_device_close(dev);
    return status;
}
#endif

/* Opens "sim", "cuda" or "auto". */
vb_status vb_device_open(const char *kind, const vb_device_options *options, vb_device **out)
{
    uint64_t capacity = options ? options->sim_capacity_bytes : 0;
#ifdef VB_HAVE_CUDA
    uint64_t cap = options ? options->cuda_cap_bytes : 0;
#endif
    if (strcmp(kind, "sim") == 0) return vb_sim_open(capacity, out);
    if (strcmp(kind, "auto") == 0) {
#ifdef VB_HAVE_CUDA
        if (vb_device_cuda_available()) return open_cuda(cap, out);
#endif
        return vb_sim_open(capacity, out);
    }
    if (strcmp(kind, "cuda") == 0) {
#ifdef VB_HAVE_CUDA
        if (!vb_device_cuda_available())
            return vb_error(VB_ERR_UNSUPPORTED, "--device cuda: no CUDA GPU found (%s; use --device sim)",
                            vb_cuda_unavailable_reason());
        return open_cuda(cap, out);
#else
        return vb_error(VB_ERR_UNSUPPORTED,
                        "--device cuda: this build has no CUDA backend (nvcc was not found at build time)");
#endif
    }
    return vb_error(VB_ERR_INVALID, "unknown device '%s' (known: auto, cuda, sim)", kind);
}

void vb_device_close(vb_device *dev)
{
    if (dev) dev->ops->close(dev);
}

uint64_t vb_device_used_bytes(vb_device *dev)
{
    uint64_t free_bytes = 0, total_bytes = 0;
    if (dev->ops->mem_info(dev, &free_bytes, &total_bytes) != VB_OK) return 0;
    return total_bytes - free_bytes;
}
