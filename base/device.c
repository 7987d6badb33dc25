/* vrambench — opening a device by kind. The one place that knows whether
 * this build has the cuda backend. */
#include "device.h"

#include <string.h>

#include "closest.h"

/* base/device_sim.c: device `ordinal` of a simulated machine. */
vb_status sim_open_on(vb_sim_machine *machine, int ordinal, uint64_t capacity_bytes, vb_device **out);

#ifdef VB_HAVE_CUDA
/* base/device_cuda.c */
vb_status vb_cuda_open(int ordinal, vb_device **out);
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
static vb_status open_cuda(int ordinal, uint64_t cap, vb_device **out)
{
    vb_device *dev = NULL;
    vb_status status = vb_cuda_open(ordinal, &dev);
    if (status != VB_OK || cap == 0) {
        *out = dev;
        return status;
    }
    status = vb_device_cap_wrap(dev, cap, out);
    if (status != VB_OK) vb_device_close(dev);
    return status;
}
#endif

/* Device `ordinal` of the machine the options name, or of a new machine of
 * VB_SIM_DEFAULT_DEVICES devices. */
static vb_status open_sim(const vb_device_options *options, vb_device **out)
{
    uint64_t capacity = options ? options->sim_capacity_bytes : 0;
    int ordinal = options ? options->ordinal : 0;
    vb_status status;
    if (options && options->sim_machine) {
        status = sim_open_on(options->sim_machine, ordinal, capacity, out);
    } else {
        vb_sim_machine *machine = NULL;
        VB_TRY(vb_sim_machine_create(VB_SIM_DEFAULT_DEVICES, NULL, &machine));
        status = sim_open_on(machine, ordinal, capacity, out);
        vb_sim_machine_release(machine); /* its devices keep it */
    }
    if (status == VB_OK && options && options->sim_placement != VB_SIM_PLACE_TOP_DOWN) {
        status = vb_sim_set_placement(*out, options->sim_placement);
        if (status != VB_OK) {
            vb_device_close(*out);
            *out = NULL;
        }
    }
    return status;
}

/* Opens "sim", "cuda" or "auto". */
vb_status vb_device_open(const char *kind, const vb_device_options *options, vb_device **out)
{
#ifdef VB_HAVE_CUDA
    uint64_t cap = options ? options->cuda_cap_bytes : 0;
    int ordinal = options ? options->ordinal : 0;
#endif
    if (strcmp(kind, "sim") == 0) return open_sim(options, out);
    if (strcmp(kind, "auto") == 0) {
#ifdef VB_HAVE_CUDA
        if (vb_device_cuda_available()) return open_cuda(ordinal, cap, out);
#endif
        return open_sim(options, out);
    }
    if (strcmp(kind, "cuda") == 0) {
#ifdef VB_HAVE_CUDA
        if (!vb_device_cuda_available())
            return vb_error(VB_ERR_UNSUPPORTED, "--device cuda: no CUDA GPU found (%s; use --device sim)",
                            vb_cuda_unavailable_reason());
        return open_cuda(ordinal, cap, out);
#else
        return vb_error(VB_ERR_UNSUPPORTED,
                        "--device cuda: this build has no CUDA backend (nvcc was not found at build time)");
#endif
    }
    static const char *const kinds[] = {"auto", "cuda", "sim", NULL};
    char hint[64];
    return vb_error(VB_ERR_INVALID, "unknown device '%s'%s (known: auto, cuda, sim)", kind,
                    vb_did_you_mean(kind, kinds, hint, sizeof hint));
}

void vb_device_close(vb_device *dev)
{
    if (dev) dev->ops->close(dev);
}

vb_status vb_device_open_peer(vb_device *dev, int ordinal, vb_device **out)
{
    vb_device *base = vb_device_uncapped(dev);
    vb_device_info info;
    base->ops->info(base, &info);
    if (ordinal < 0 || ordinal >= info.device_count)
        return vb_error(VB_ERR_INVALID, "device %d asked of a machine of %d device%s", ordinal, info.device_count,
                        info.device_count == 1 ? "" : "s");
    vb_device_options options = {.ordinal = ordinal};
    if (vb_device_is_sim(base)) {
        options.sim_capacity_bytes = info.total_bytes;
        options.sim_machine = vb_sim_machine_of(base);
        return vb_device_open("sim", &options, out);
    }
    return vb_device_open("cuda", &options, out);
}

uint64_t vb_device_used_bytes(vb_device *dev)
{
    uint64_t free_bytes = 0, total_bytes = 0;
    if (dev->ops->mem_info(dev, &free_bytes, &total_bytes) != VB_OK) return 0;
    return total_bytes - free_bytes;
}
