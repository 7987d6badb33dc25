/* vrambench — the sim's model of a stream-ordered memory pool.
 * PLACEHOLDER until the async issue lands: every call is unsupported. */
#include "device_sim_internal.h"

vb_status sim_pool_create(vb_device *dev, uint64_t release_threshold, vb_pool *out)
{
    (void)dev, (void)release_threshold, (void)out;
    return vb_error(VB_ERR_UNSUPPORTED, "sim: pools are not modelled yet");
}
void sim_pool_destroy(vb_device *dev, vb_pool pool) { (void)dev, (void)pool; }
vb_status sim_pool_malloc(vb_device *dev, vb_pool pool, uint64_t size, vb_stream stream, vb_addr *out)
{
    (void)dev, (void)pool, (void)size, (void)stream, (void)out;
    return VB_ERR_UNSUPPORTED;
}
vb_status sim_pool_free(vb_device *dev, vb_pool pool, vb_addr addr, vb_stream stream)
{
    (void)dev, (void)pool, (void)addr, (void)stream;
    return VB_ERR_UNSUPPORTED;
}
vb_status sim_pool_trim(vb_device *dev, vb_pool pool, uint64_t keep_bytes)
{
    (void)dev, (void)pool, (void)keep_bytes;
    return VB_ERR_UNSUPPORTED;
}
vb_status sim_pool_usage(vb_device *dev, vb_pool pool, uint64_t *reserved_bytes, uint64_t *used_bytes)
{
    (void)dev, (void)pool, (void)reserved_bytes, (void)used_bytes;
    return VB_ERR_UNSUPPORTED;
}
void sim_pools_on_synchronize(vb_device *dev) { (void)dev; }
