/* vrambench — the tensor layer.
 *
 * The documents reason about Python objects: a tensor, a view `y = x[:]`
 * sharing its storage, `del`, an object holding a tensor, a function's scope.
 * Here that is a refcounted storage (one block of device memory, obtained
 * with vb_run_malloc on the stream it is created for) and tensors that
 * reference it. Every tensor or view is one reference; releasing a tensor
 * ("del x") drops its reference, and the last one gives the block back with
 * vb_run_free. So "del x while a view is alive frees nothing" is what the
 * allocator statistics show, not an assumption.
 *
 * As PyTorch's Tensor.record_stream: a storage remembers the stream it was
 * allocated on, and every op here that uses a tensor on another stream tells
 * the allocator (vb_record_stream), so the block is not handed out again
 * before that stream's work is done.
 *
 * Tensors are contiguous row-major matrices (rows x cols) of fp32 or int64:
 * what the scenarios need. Ops queue work on the device and return at once.
 */
#ifndef VB_TENSOR_H
#define VB_TENSOR_H

#include <stdint.h>

#include "run.h"

typedef enum vb_dtype {
    VB_DTYPE_F32 = 0, /* torch.float32 */
    VB_DTYPE_I64 = 1, /* torch.int64 (labels, torch.tensor of Python ints) */
} vb_dtype;

typedef struct vb_tensor vb_tensor;

/* Bytes of one element of `dtype`. */
uint64_t vb_dtype_size(vb_dtype dtype);

/* ---- making and dropping references ---- */

/* torch.empty(rows, cols) in fp32: a new storage of rows*cols*4 bytes from
 * the run's allocator for use on `stream`, and the one tensor referencing it.
 * VB_ERR_OOM when the allocator cannot (nothing is held then), VB_ERR_INVALID
 * for a negative or overflowing shape. Zero elements give a tensor without
 * device memory (address 0), as the allocators' size-0 rule says. */
vb_status vb_tensor_empty(vb_run *run, int64_t rows, int64_t cols, vb_stream stream, vb_tensor **out);

/* The same for any dtype. */
vb_status vb_tensor_empty_typed(vb_run *run, vb_dtype dtype, int64_t rows, int64_t cols, vb_stream stream,
                                vb_tensor **out);

/* `y = x[:]`: a new reference to the whole of t's storage, same shape. */
vb_status vb_tensor_view(vb_tensor *t, vb_tensor **out);

/* `x[first_row : first_row + rows]`: a reference to those rows. A range
 * outside the tensor is VB_ERR_INVALID. */
vb_status vb_tensor_view_rows(vb_tensor *t, int64_t first_row, int64_t rows, vb_tensor **out);

/* `x.view(rows, cols)`: a reference with another shape of the same element
 * count (else VB_ERR_INVALID). */
vb_status vb_tensor_view_as(vb_tensor *t, int64_t rows, int64_t cols, vb_tensor **out);

/* `del t`: drops this reference and frees the tensor object; the last
 * reference to a storage frees its block through vb_run_free and returns
 * that call's status. NULL is a no-op. */
vb_status vb_tensor_release(vb_tensor *t);

/* vb_tensor_release(*t), then *t = NULL, so cleanup paths can drop every
 * variable they have without tracking which are still set. */
vb_status vb_tensor_drop(vb_tensor **t);

/* Notes that `t` is used by work queued on `stream`: when that is not the
 * stream its storage was allocated on, the allocator records the stream for
 * the storage's block (PyTorch's record_stream). The ops below call it. */
vb_status vb_tensor_use(vb_tensor *t, vb_stream stream);

/* ---- accessors ---- */

vb_addr vb_tensor_addr(const vb_tensor *t);        /* device address of the first element */
uint64_t vb_tensor_bytes(const vb_tensor *t);      /* bytes this tensor spans */
int64_t vb_tensor_rows(const vb_tensor *t);
int64_t vb_tensor_cols(const vb_tensor *t);
uint64_t vb_tensor_numel(const vb_tensor *t);
vb_dtype vb_tensor_dtype(const vb_tensor *t);
vb_addr vb_tensor_storage_addr(const vb_tensor *t); /* the block the allocator handed out */
uint64_t vb_tensor_storage_bytes(const vb_tensor *t);
vb_stream vb_tensor_storage_stream(const vb_tensor *t); /* the stream it was allocated on */
unsigned vb_tensor_storage_refs(const vb_tensor *t);   /* tensors and views referencing it */

/* ---- ops (queued on `stream`; fp32 only; shapes checked) ---- */

/* Fills t with pseudo-random values in [-1, 1) (torch.randn's stand-in). */
vb_status vb_tensor_fill_random(vb_tensor *t, uint64_t seed, vb_stream stream);

/* Copies all of t's bytes from `host` (pinned for a truly asynchronous copy),
 * or to `host`; `host` must stay valid until the stream reaches the copy. */
vb_status vb_tensor_copy_from_host(vb_tensor *t, const void *host, vb_stream stream);
vb_status vb_tensor_copy_to_host(vb_tensor *t, void *host, vb_stream stream);

/* dst.copy_(src), the two tensors of the same byte count, each on its own
 * stream of its own run's device. On one device and one stream: a copy on
 * that stream. Otherwise as PyTorch copies between devices (what
 * x.to("cuda:1") does into the tensor it allocated, copy_device_to_device in
 * ATen's Copy.cu): the copy runs on `src_stream`, after a two-way barrier:
 * it waits for the work queued on `dst_stream` so far, and `dst_stream`'s
 * later work waits for it. No record_stream: the barrier orders dst's uses,
 * and src is used on its own stream. */
vb_status vb_tensor_copy(vb_tensor *dst, vb_stream dst_stream, vb_tensor *src, vb_stream src_stream);

/* out = max(in, 0), elementwise; same element count. */
vb_status vb_tensor_relu(vb_tensor *out, vb_tensor *in, vb_stream stream);

/* y += alpha * x, elementwise; same element count. */
vb_status vb_tensor_axpy(float alpha, vb_tensor *x, vb_tensor *y, vb_stream stream);

/* c = op(a) @ op(b) for row-major matrices, op(m) = m^T when its transpose
 * flag is set: torch.matmul through the device's column-major gemm_f32. */
vb_status vb_tensor_matmul(vb_tensor *a, int transpose_a, vb_tensor *b, int transpose_b, vb_tensor *c,
                           vb_stream stream);

#endif
