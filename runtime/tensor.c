/* vrambench — the tensor layer: refcounted storages, tensors and views over
 * a run's allocator, and the few ops the scenarios queue on them. */
#include "tensor.h"

#include <limits.h>
#include <stdlib.h>

/* One block of device memory and how many tensors reference it. */
typedef struct vb_storage {
    vb_run *run;        /* whose allocator the block goes back to */
    vb_addr addr;
    uint64_t bytes;
    vb_stream stream;   /* the stream it was allocated for */
    unsigned refs;
} vb_storage;

struct vb_tensor {
    vb_storage *storage;
    uint64_t offset;    /* bytes from the storage's start */
    int64_t rows, cols;
    vb_dtype dtype;
};

uint64_t vb_dtype_size(vb_dtype dtype)
{
    return dtype == VB_DTYPE_I64 ? 8 : 4;
}

/* ------------------------------------------------------------------------ */
/* References                                                                */
/* ------------------------------------------------------------------------ */

/* Bytes of a rows x cols matrix of `dtype` into *bytes; VB_ERR_INVALID for a
 * negative shape or one whose size does not fit in 64 bits. */
static vb_status shape_bytes(vb_dtype dtype, int64_t rows, int64_t cols, uint64_t *bytes)
{
    if (rows < 0 || cols < 0)
        return vb_error(VB_ERR_INVALID, "tensor: negative shape %lld x %lld", (long long)rows, (long long)cols);
    uint64_t element = vb_dtype_size(dtype);
    if (cols != 0 && (uint64_t)rows > UINT64_MAX / element / (uint64_t)cols)
        return vb_error(VB_ERR_INVALID, "tensor: shape %lld x %lld overflows", (long long)rows, (long long)cols);
    *bytes = (uint64_t)rows * (uint64_t)cols * element;
    return VB_OK;
}

/* A new tensor object over `storage` (whose reference count it takes). */
static vb_status new_reference(vb_storage *storage, uint64_t offset, int64_t rows, int64_t cols, vb_dtype dtype,
                               vb_tensor **out)
{
    vb_tensor *t = malloc(sizeof *t);
    if (!t) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    t->storage = storage;
    t->offset = offset;
    t->rows = rows;
    t->cols = cols;
    t->dtype = dtype;
    storage->refs++;
    *out = t;
    return VB_OK;
}

vb_status vb_tensor_empty_typed(vb_run *run, vb_dtype dtype, int64_t rows, int64_t cols, vb_stream stream,
                                vb_tensor **out)
{
    *out = NULL;
    uint64_t bytes = 0; /* set by shape_bytes before use; gcc -O3 cannot tell (maybe-uninitialized) */
    vb_status status = shape_bytes(dtype, rows, cols, &bytes);
    if (status != VB_OK) return status;
    vb_storage *storage = calloc(1, sizeof *storage);
    if (!storage) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    status = vb_run_malloc(run, bytes, stream, &storage->addr);
    if (status != VB_OK) {
        free(storage);
        return status;
    }
    storage->run = run;
    storage->bytes = bytes;
    storage->stream = stream;
    status = new_reference(storage, 0, rows, cols, dtype, out);
    if (status != VB_OK) {
        vb_run_free(run, storage->addr);
        free(storage);
    }
    return status;
}

vb_status vb_tensor_empty(vb_run *run, int64_t rows, int64_t cols, vb_stream stream, vb_tensor **out)
{
    return vb_tensor_empty_typed(run, VB_DTYPE_F32, rows, cols, stream, out);
}

vb_status vb_tensor_view(vb_tensor *t, vb_tensor **out)
{
    return new_reference(t->storage, t->offset, t->rows, t->cols, t->dtype, out);
}

vb_status vb_tensor_view_rows(vb_tensor *t, int64_t first_row, int64_t rows, vb_tensor **out)
{
    *out = NULL;
    if (first_row < 0 || rows < 0 || first_row > t->rows || rows > t->rows - first_row)
        return vb_error(VB_ERR_INVALID, "tensor: rows [%lld, %lld) outside a tensor of %lld rows",
                        (long long)first_row, (long long)(first_row + rows), (long long)t->rows);
    uint64_t row_bytes = (uint64_t)t->cols * vb_dtype_size(t->dtype);
    return new_reference(t->storage, t->offset + (uint64_t)first_row * row_bytes, rows, t->cols, t->dtype, out);
}

vb_status vb_tensor_view_as(vb_tensor *t, int64_t rows, int64_t cols, vb_tensor **out)
{
    *out = NULL;
    uint64_t bytes = 0; /* set by shape_bytes before use; gcc -O3 cannot tell (maybe-uninitialized) */
    vb_status status = shape_bytes(t->dtype, rows, cols, &bytes);
    if (status != VB_OK) return status;
    if (bytes != vb_tensor_bytes(t))
        return vb_error(VB_ERR_INVALID, "tensor: view of %lld x %lld elements as %lld x %lld",
                        (long long)t->rows, (long long)t->cols, (long long)rows, (long long)cols);
    return new_reference(t->storage, t->offset, rows, cols, t->dtype, out);
}

vb_status vb_tensor_release(vb_tensor *t)
{
    if (!t) return VB_OK;
    vb_storage *storage = t->storage;
    free(t);
    if (--storage->refs > 0) return VB_OK;
    vb_status status = vb_run_free(storage->run, storage->addr);
    free(storage);
    return status;
}

vb_status vb_tensor_drop(vb_tensor **t)
{
    vb_status status = vb_tensor_release(*t);
    *t = NULL;
    return status;
}

vb_status vb_tensor_use(vb_tensor *t, vb_stream stream)
{
    vb_storage *storage = t->storage;
    if (stream == storage->stream) return VB_OK;
    /* The allocator knows blocks by the address it handed out, not a view's. */
    return vb_record_stream(vb_run_allocator(storage->run), storage->addr, stream);
}

/* ------------------------------------------------------------------------ */
/* Accessors                                                                 */
/* ------------------------------------------------------------------------ */

vb_addr vb_tensor_addr(const vb_tensor *t)
{
    return t->storage->addr ? t->storage->addr + t->offset : 0;
}

uint64_t vb_tensor_bytes(const vb_tensor *t)
{
    return (uint64_t)t->rows * (uint64_t)t->cols * vb_dtype_size(t->dtype);
}

int64_t vb_tensor_rows(const vb_tensor *t) { return t->rows; }
int64_t vb_tensor_cols(const vb_tensor *t) { return t->cols; }
uint64_t vb_tensor_numel(const vb_tensor *t) { return (uint64_t)t->rows * (uint64_t)t->cols; }
vb_dtype vb_tensor_dtype(const vb_tensor *t) { return t->dtype; }
vb_addr vb_tensor_storage_addr(const vb_tensor *t) { return t->storage->addr; }
uint64_t vb_tensor_storage_bytes(const vb_tensor *t) { return t->storage->bytes; }
vb_stream vb_tensor_storage_stream(const vb_tensor *t) { return t->storage->stream; }
unsigned vb_tensor_storage_refs(const vb_tensor *t) { return t->storage->refs; }

/* ------------------------------------------------------------------------ */
/* Ops                                                                       */
/* ------------------------------------------------------------------------ */

/* The device a tensor's storage lives on. */
static vb_device *device_of(const vb_tensor *t)
{
    return vb_run_device(t->storage->run);
}

/* VB_ERR_INVALID unless t is fp32 (`op` names the caller in the message). */
static vb_status require_f32(const vb_tensor *t, const char *op)
{
    if (t->dtype != VB_DTYPE_F32) return vb_error(VB_ERR_INVALID, "tensor: %s needs fp32 tensors", op);
    return VB_OK;
}

vb_status vb_tensor_fill_random(vb_tensor *t, uint64_t seed, vb_stream stream)
{
    vb_status status = require_f32(t, "fill_random");
    if (status == VB_OK) status = vb_tensor_use(t, stream);
    if (status != VB_OK || vb_tensor_numel(t) == 0) return status;
    vb_device *dev = device_of(t);
    return dev->ops->fill_random_f32(dev, stream, vb_tensor_addr(t), vb_tensor_numel(t), seed);
}

/* Queues a copy of all of t's bytes between t and `host` in direction `kind`. */
static vb_status copy_host(vb_tensor *t, void *host, vb_copy_kind kind, vb_stream stream)
{
    vb_status status = vb_tensor_use(t, stream);
    if (status != VB_OK || vb_tensor_bytes(t) == 0) return status;
    vb_device *dev = device_of(t);
    return dev->ops->memcpy_async(dev, host, vb_tensor_addr(t), vb_tensor_bytes(t), kind, stream);
}

vb_status vb_tensor_copy_from_host(vb_tensor *t, const void *host, vb_stream stream)
{
    return copy_host(t, (void *)host, VB_COPY_HOST_TO_DEVICE, stream);
}

vb_status vb_tensor_copy_to_host(vb_tensor *t, void *host, vb_stream stream)
{
    return copy_host(t, host, VB_COPY_DEVICE_TO_HOST, stream);
}

vb_status vb_tensor_copy(vb_tensor *dst, vb_stream dst_stream, vb_tensor *src, vb_stream src_stream)
{
    if (vb_tensor_bytes(dst) != vb_tensor_bytes(src))
        return vb_error(VB_ERR_INVALID, "tensor: copy of %llu bytes into %llu",
                        (unsigned long long)vb_tensor_bytes(src), (unsigned long long)vb_tensor_bytes(dst));
    vb_run *dst_run = dst->storage->run, *src_run = src->storage->run;
    vb_device *src_dev = device_of(src);
    vb_status status = vb_tensor_use(src, src_stream);
    if (status == VB_OK) status = vb_tensor_use(dst, dst_stream);
    if (status != VB_OK || vb_tensor_bytes(src) == 0) return status;
    int barrier = device_of(dst) != src_dev || dst_stream != src_stream;
    if (barrier) status = vb_run_stream_wait(src_run, src_stream, dst_run, dst_stream);
    if (status == VB_OK)
        status = src_dev->ops->memcpy_async(src_dev, (void *)(uintptr_t)vb_tensor_addr(src), vb_tensor_addr(dst),
                                            vb_tensor_bytes(src), VB_COPY_DEVICE_TO_DEVICE, src_stream);
    if (status == VB_OK && barrier) status = vb_run_stream_wait(dst_run, dst_stream, src_run, src_stream);
    return status;
}

/* VB_ERR_INVALID unless a and b are fp32 with the same element count. */
static vb_status require_elementwise(const vb_tensor *a, const vb_tensor *b, const char *op)
{
    vb_status status = require_f32(a, op);
    if (status == VB_OK) status = require_f32(b, op);
    if (status == VB_OK && vb_tensor_numel(a) != vb_tensor_numel(b))
        status = vb_error(VB_ERR_INVALID, "tensor: %s of %llu and %llu elements", op,
                          (unsigned long long)vb_tensor_numel(a), (unsigned long long)vb_tensor_numel(b));
    return status;
}

vb_status vb_tensor_relu(vb_tensor *out, vb_tensor *in, vb_stream stream)
{
    vb_status status = require_elementwise(out, in, "relu");
    if (status == VB_OK) status = vb_tensor_use(out, stream);
    if (status == VB_OK) status = vb_tensor_use(in, stream);
    if (status != VB_OK || vb_tensor_numel(in) == 0) return status;
    vb_device *dev = device_of(out);
    return dev->ops->relu_f32(dev, stream, vb_tensor_addr(out), vb_tensor_addr(in), vb_tensor_numel(in));
}

vb_status vb_tensor_axpy(float alpha, vb_tensor *x, vb_tensor *y, vb_stream stream)
{
    vb_status status = require_elementwise(x, y, "axpy");
    if (status == VB_OK) status = vb_tensor_use(x, stream);
    if (status == VB_OK) status = vb_tensor_use(y, stream);
    if (status != VB_OK || vb_tensor_numel(x) == 0) return status;
    vb_device *dev = device_of(y);
    return dev->ops->axpy_f32(dev, stream, alpha, vb_tensor_addr(x), vb_tensor_addr(y), vb_tensor_numel(x));
}

/* Rows and columns of op(t). */
static int64_t op_rows(const vb_tensor *t, int transpose) { return transpose ? t->cols : t->rows; }
static int64_t op_cols(const vb_tensor *t, int transpose) { return transpose ? t->rows : t->cols; }

/* 1 if every dimension of t fits the int cuBLAS takes. */
static int fits_int(const vb_tensor *t)
{
    return t->rows <= INT_MAX && t->cols <= INT_MAX;
}

/* Row-major C (M x N) = op(A) (M x K) @ op(B) (K x N). Memory holding a
 * row-major R (r x c) is, read column-major, R^T (c x r) with leading
 * dimension c. So the column-major product cuBLAS computes is
 *   C^T (N x M) = op(B)^T (N x K) @ op(A)^T (K x M),
 * that is gemm(m = N, n = M, k = K) with B's memory as its first operand
 * (transposed exactly when op transposes B, leading dimension B.cols), A's
 * memory as its second (likewise, leading dimension A.cols), and C's memory
 * as the result (leading dimension C.cols = N). */
vb_status vb_tensor_matmul(vb_tensor *a, int transpose_a, vb_tensor *b, int transpose_b, vb_tensor *c,
                           vb_stream stream)
{
    vb_status status = require_f32(a, "matmul");
    if (status == VB_OK) status = require_f32(b, "matmul");
    if (status == VB_OK) status = require_f32(c, "matmul");
    if (status != VB_OK) return status;
    int64_t m = op_rows(a, transpose_a), k = op_cols(a, transpose_a), n = op_cols(b, transpose_b);
    if (op_rows(b, transpose_b) != k || c->rows != m || c->cols != n)
        return vb_error(VB_ERR_INVALID, "tensor: matmul of %lld x %lld and %lld x %lld into %lld x %lld",
                        (long long)m, (long long)k, (long long)op_rows(b, transpose_b), (long long)n,
                        (long long)c->rows, (long long)c->cols);
    if (!fits_int(a) || !fits_int(b) || !fits_int(c))
        return vb_error(VB_ERR_INVALID, "tensor: matmul dimension beyond what gemm takes");
    status = vb_tensor_use(a, stream);
    if (status == VB_OK) status = vb_tensor_use(b, stream);
    if (status == VB_OK) status = vb_tensor_use(c, stream);
    if (status != VB_OK || m == 0 || n == 0) return status;
    /* cuBLAS wants leading dimensions >= 1 even for empty operands. */
    int lda = b->cols > 0 ? (int)b->cols : 1, ldb = a->cols > 0 ? (int)a->cols : 1;
    vb_device *dev = device_of(c);
    return dev->ops->gemm_f32(dev, stream, transpose_b, transpose_a, (int)n, (int)m, (int)k, 1.0f,
                              vb_tensor_addr(b), lda, vb_tensor_addr(a), ldb, 0.0f, vb_tensor_addr(c),
                              (int)c->cols);
}
