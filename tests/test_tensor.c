/* vrambench — tests of the tensor layer (runtime/tensor.h) on the sim.
 *
 * Most tests run over a spy allocator that hands out addresses from a
 * counter and records frees and record_stream calls, so what the tensor
 * layer asks of an allocator is seen exactly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/addr_map.h"
#include "runtime/tensor.h"

/* ------------------------------------------------------------------------ */
/* A spy allocator                                                           */
/* ------------------------------------------------------------------------ */

typedef struct spy_state {
    vb_addr next;               /* next address to hand out */
    vb_addr_map sizes;          /* live address -> requested size */
    int frees;
    int record_calls;
    vb_addr recorded_addr;
    vb_stream recorded_stream;
} spy_state;

static vb_status spy_create(vb_device *dev, const vb_config *config, void **state)
{
    (void)dev, (void)config, (void)state;
    return VB_ERR_UNSUPPORTED; /* made by hand below, never through the registry */
}

static void spy_destroy(void *state)
{
    vb_addr_map_clear(&((spy_state *)state)->sizes);
}

static vb_status spy_malloc(void *state, uint64_t size, vb_stream stream, vb_grant *out)
{
    spy_state *spy = state;
    (void)stream;
    *out = (vb_grant){.addr = spy->next, .size = size};
    spy->next += vb_round_up(size, 512);
    vb_addr_map_put(&spy->sizes, out->addr, size);
    return VB_OK;
}

static vb_status spy_free(void *state, vb_addr addr, uint64_t tag)
{
    (void)tag; /* unused: its own bookkeeping knows the block */
    spy_state *spy = state;
    uint64_t size;
    if (!vb_addr_map_remove(&spy->sizes, addr, &size)) return vb_error(VB_ERR_INVALID, "spy: unknown address");
    spy->frees++;
    return VB_OK;
}

static vb_status spy_record_stream(void *state, vb_addr addr, uint64_t tag, vb_stream stream)
{
    (void)tag; /* unused: its own bookkeeping knows the block */
    spy_state *spy = state;
    spy->record_calls++;
    spy->recorded_addr = addr;
    spy->recorded_stream = stream;
    return VB_OK;
}

static vb_status spy_empty_cache(void *state)
{
    (void)state;
    return VB_OK;
}

static const vb_allocator_ops spy_ops = {
    .name = "spy",
    .description = "test spy",
    .create = spy_create,
    .destroy = spy_destroy,
    .malloc = spy_malloc,
    .free = spy_free,
    .record_stream = spy_record_stream,
    .empty_cache = spy_empty_cache,
    .largest_free_block = NULL,
    .segments = NULL,
};

/* ------------------------------------------------------------------------ */
/* A spy on the device's gemm                                                */
/* ------------------------------------------------------------------------ */

typedef struct gemm_call {
    int calls;
    int transpose_a, transpose_b, m, n, k, lda, ldb, ldc;
    vb_addr a, b, c;
} gemm_call;

static gemm_call last_gemm;

static vb_status spy_gemm(vb_device *dev, vb_stream stream, int transpose_a, int transpose_b, int m, int n,
                          int k, float alpha, vb_addr a, int lda, vb_addr b, int ldb, float beta, vb_addr c,
                          int ldc)
{
    (void)dev, (void)stream, (void)alpha, (void)beta;
    gemm_call call = {last_gemm.calls + 1, transpose_a, transpose_b, m, n, k, lda, ldb, ldc, a, b, c};
    last_gemm = call;
    return VB_OK;
}

/* ------------------------------------------------------------------------ */
/* Fixture: a sim device (its gemm spied on), the spy allocator, a run       */
/* ------------------------------------------------------------------------ */

typedef struct fixture {
    vb_device *dev;
    const vb_device_ops *sim_ops;
    vb_device_ops spied_ops;
    spy_state spy;
    vb_allocator allocator;
    vb_run *run;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(vb_sim_open(0, &f->dev), VB_OK);
    f->sim_ops = f->dev->ops;
    f->spied_ops = *f->dev->ops;
    f->spied_ops.gemm_f32 = spy_gemm;
    f->dev->ops = &f->spied_ops;
    f->spy.next = 0x10000;
    f->allocator.ops = &spy_ops;
    f->allocator.state = &f->spy;
    f->allocator.device = f->dev;
    assert_int_equal(vb_run_create(f->dev, &f->allocator, NULL, &f->run), VB_OK);
    memset(&last_gemm, 0, sizeof last_gemm);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    vb_run_destroy(f->run);
    spy_destroy(&f->spy);
    /* The handle was made by hand: what its seam kept goes by hand too. */
    vb_addr_map_clear(&f->allocator.live);
    free(f->allocator.blocks);
    f->dev->ops = f->sim_ops;
    vb_device_close(f->dev);
    free(f);
    return 0;
}

/* A rows x cols fp32 tensor on the run's stream, which must be had. */
static vb_tensor *new_tensor(fixture *f, int64_t rows, int64_t cols)
{
    vb_tensor *tensor = NULL;
    assert_int_equal(vb_tensor_empty(f->run, rows, cols, vb_run_stream(f->run), &tensor), VB_OK);
    return tensor;
}

/* ------------------------------------------------------------------------ */
/* References                                                                */
/* ------------------------------------------------------------------------ */

/* y = x[:]; del x: the storage (1000 x 1000 x 4 = 4,000,000 bytes) stays. */
static void test_view_keeps_storage_alive_after_del_x(void **state)
{
    fixture *f = *state;
    vb_tensor *x = new_tensor(f, 1000, 1000), *y;
    assert_int_equal(vb_tensor_view(x, &y), VB_OK);
    assert_int_equal(vb_tensor_release(x), VB_OK);
    assert_int_equal(f->spy.frees, 0);
    assert_int_equal(f->allocator.counted.requested_bytes, 4000000);
    assert_int_equal(vb_tensor_storage_refs(y), 1);
    vb_tensor_release(y);
}

/* del y after del x: the last reference frees the one block. */
static void test_last_release_frees_the_block(void **state)
{
    fixture *f = *state;
    vb_tensor *x = new_tensor(f, 1000, 1000), *y;
    assert_int_equal(vb_tensor_view(x, &y), VB_OK);
    vb_tensor_release(x);
    assert_int_equal(vb_tensor_release(y), VB_OK);
    assert_int_equal(f->spy.frees, 1);
    assert_int_equal(f->allocator.counted.requested_bytes, 0);
}

/* vb_tensor_drop releases and clears the variable; dropping NULL is fine. */
static void test_drop_clears_the_variable(void **state)
{
    fixture *f = *state;
    vb_tensor *x = new_tensor(f, 4, 4);
    assert_int_equal(vb_tensor_drop(&x), VB_OK);
    assert_null(x);
    assert_int_equal(vb_tensor_drop(&x), VB_OK);
    assert_int_equal(f->spy.frees, 1);
}

/* Using a tensor on a stream other than its allocation stream records that
 * stream for the block. */
static void test_record_stream_called_for_a_foreign_stream(void **state)
{
    fixture *f = *state;
    vb_stream other;
    assert_int_equal(f->dev->ops->stream_create(f->dev, &other), VB_OK);
    vb_tensor *x = new_tensor(f, 10, 10);
    assert_int_equal(vb_tensor_fill_random(x, 1, other), VB_OK);
    assert_int_equal(f->spy.record_calls, 1);
    assert_ptr_equal(f->spy.recorded_stream, other);
    assert_int_equal(f->spy.recorded_addr, vb_tensor_addr(x));
    vb_tensor_release(x);
    f->dev->ops->stream_destroy(f->dev, other);
}

/* Work on the allocation stream needs no record_stream. */
static void test_no_record_stream_on_the_allocation_stream(void **state)
{
    fixture *f = *state;
    vb_tensor *x = new_tensor(f, 10, 10);
    assert_int_equal(vb_tensor_fill_random(x, 1, vb_run_stream(f->run)), VB_OK);
    assert_int_equal(f->spy.record_calls, 0);
    vb_tensor_release(x);
}

/* A row view used elsewhere records the block's start, the address the
 * allocator knows, not the view's own address. */
static void test_record_stream_of_a_row_view_names_the_block(void **state)
{
    fixture *f = *state;
    vb_stream other;
    assert_int_equal(f->dev->ops->stream_create(f->dev, &other), VB_OK);
    vb_tensor *x = new_tensor(f, 100, 50), *rows;
    assert_int_equal(vb_tensor_view_rows(x, 10, 5, &rows), VB_OK);
    assert_int_equal(vb_tensor_fill_random(rows, 1, other), VB_OK);
    assert_int_equal(f->spy.recorded_addr, vb_tensor_storage_addr(x));
    vb_tensor_release(rows);
    vb_tensor_release(x);
    f->dev->ops->stream_destroy(f->dev, other);
}

/* x[10:15] of a 100 x 50 fp32 tensor starts 10 * 50 * 4 = 2000 bytes in and
 * spans 5 * 50 * 4 = 1000 bytes. */
static void test_row_view_is_offset_by_whole_rows(void **state)
{
    fixture *f = *state;
    vb_tensor *x = new_tensor(f, 100, 50), *rows;
    assert_int_equal(vb_tensor_view_rows(x, 10, 5, &rows), VB_OK);
    assert_int_equal(vb_tensor_addr(rows), vb_tensor_addr(x) + 2000);
    assert_int_equal(vb_tensor_bytes(rows), 1000);
    vb_tensor_release(rows);
    vb_tensor_release(x);
}

/* x[95:105] of 100 rows is refused and takes no reference. */
static void test_row_view_outside_the_tensor_is_invalid(void **state)
{
    fixture *f = *state;
    vb_tensor *x = new_tensor(f, 100, 50), *rows;
    assert_int_equal(vb_tensor_view_rows(x, 95, 10, &rows), VB_ERR_INVALID);
    assert_null(rows);
    assert_int_equal(vb_tensor_storage_refs(x), 1);
    vb_tensor_release(x);
}

/* x.view(3, 3) of a 2 x 4 tensor is refused. */
static void test_view_as_with_another_element_count_is_invalid(void **state)
{
    fixture *f = *state;
    vb_tensor *x = new_tensor(f, 2, 4), *v;
    assert_int_equal(vb_tensor_view_as(x, 3, 3, &v), VB_ERR_INVALID);
    assert_null(v);
    vb_tensor_release(x);
}

/* A negative dimension is bad input, not an allocation. */
static void test_negative_shape_is_invalid(void **state)
{
    fixture *f = *state;
    vb_tensor *x;
    assert_int_equal(vb_tensor_empty(f->run, -1, 4, vb_run_stream(f->run), &x), VB_ERR_INVALID);
    assert_null(x);
    assert_int_equal(f->allocator.counted.requested_bytes, 0);
}

/* int64 elements are 8 bytes: 10 x 1 labels take 80. */
static void test_int64_tensor_has_eight_byte_elements(void **state)
{
    fixture *f = *state;
    vb_tensor *labels;
    assert_int_equal(vb_tensor_empty_typed(f->run, VB_DTYPE_I64, 10, 1, vb_run_stream(f->run), &labels), VB_OK);
    assert_int_equal(f->allocator.counted.requested_bytes, 80);
    vb_tensor_release(labels);
}

/* ------------------------------------------------------------------------ */
/* matmul's mapping onto the column-major gemm                               */
/* ------------------------------------------------------------------------ */

/* nn.Linear's forward Y[8 x 5] = X[8 x 3] @ W[5 x 3]^T. Read column-major,
 * Y^T (5 x 8) = W (5 x 3, stored as 3 x 5 with ld 3, so transposed) @ X^T
 * (3 x 8, stored as is with ld 3): gemm(transa=1, transb=0, m=5, n=8, k=3,
 * A=W, lda=3, B=X, ldb=3, C=Y, ldc=5). */
static void test_matmul_maps_a_linear_forward_onto_gemm(void **state)
{
    fixture *f = *state;
    vb_stream stream = vb_run_stream(f->run);
    vb_tensor *x = new_tensor(f, 8, 3), *w = new_tensor(f, 5, 3), *y = new_tensor(f, 8, 5);
    assert_int_equal(vb_tensor_matmul(x, 0, w, 1, y, stream), VB_OK);
    assert_int_equal(last_gemm.calls, 1);
    assert_int_equal(last_gemm.transpose_a, 1);
    assert_int_equal(last_gemm.transpose_b, 0);
    assert_int_equal(last_gemm.m, 5);
    assert_int_equal(last_gemm.n, 8);
    assert_int_equal(last_gemm.k, 3);
    assert_int_equal(last_gemm.a, vb_tensor_addr(w));
    assert_int_equal(last_gemm.lda, 3);
    assert_int_equal(last_gemm.b, vb_tensor_addr(x));
    assert_int_equal(last_gemm.ldb, 3);
    assert_int_equal(last_gemm.c, vb_tensor_addr(y));
    assert_int_equal(last_gemm.ldc, 5);
    vb_tensor_release(x);
    vb_tensor_release(w);
    vb_tensor_release(y);
}

/* Shapes that do not chain ([8 x 3] @ [5 x 3]) are refused before any work. */
static void test_matmul_with_mismatched_shapes_is_invalid(void **state)
{
    fixture *f = *state;
    vb_stream stream = vb_run_stream(f->run);
    vb_tensor *x = new_tensor(f, 8, 3), *w = new_tensor(f, 5, 3), *y = new_tensor(f, 8, 5);
    assert_int_equal(vb_tensor_matmul(x, 0, w, 0, y, stream), VB_ERR_INVALID);
    assert_int_equal(last_gemm.calls, 0);
    vb_tensor_release(x);
    vb_tensor_release(w);
    vb_tensor_release(y);
}

/* ------------------------------------------------------------------------ */
/* Out of memory, with a real allocator                                      */
/* ------------------------------------------------------------------------ */

/* On a 2 MiB device, a 4,000,000-byte tensor cannot be had: VB_ERR_OOM, no
 * tensor, nothing left requested. */
static void test_empty_on_a_small_device_is_oom_and_holds_nothing(void **state)
{
    (void)state;
    vb_device *dev;
    vb_allocator *allocator;
    vb_run *run;
    vb_tensor *x;
    assert_int_equal(vb_sim_open(2 * VB_MiB, &dev), VB_OK);
    assert_int_equal(vb_allocator_create("cuda", dev, NULL, &allocator), VB_OK);
    assert_int_equal(vb_run_create(dev, allocator, NULL, &run), VB_OK);
    assert_int_equal(vb_tensor_empty(run, 1000, 1000, vb_run_stream(run), &x), VB_ERR_OOM);
    assert_null(x);
    vb_alloc_stats stats;
    vb_allocator_stats(allocator, &stats);
    assert_int_equal(stats.requested_bytes, 0);
    vb_run_destroy(run);
    vb_allocator_destroy(allocator);
    vb_device_close(dev);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_view_keeps_storage_alive_after_del_x),
        T(test_last_release_frees_the_block),
        T(test_drop_clears_the_variable),
        T(test_record_stream_called_for_a_foreign_stream),
        T(test_no_record_stream_on_the_allocation_stream),
        T(test_record_stream_of_a_row_view_names_the_block),
        T(test_row_view_is_offset_by_whole_rows),
        T(test_row_view_outside_the_tensor_is_invalid),
        T(test_view_as_with_another_element_count_is_invalid),
        T(test_negative_shape_is_invalid),
        T(test_int64_tensor_has_eight_byte_elements),
        T(test_matmul_maps_a_linear_forward_onto_gemm),
        T(test_matmul_with_mismatched_shapes_is_invalid),
        cmocka_unit_test(test_empty_on_a_small_device_is_oom_and_holds_nothing),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
