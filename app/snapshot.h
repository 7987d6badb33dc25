/* vrambench — `replay --snapshot FILE.pickle`: a replay written as a PyTorch
 * memory snapshot, the dictionary torch.cuda.memory._snapshot() returns and
 * torch.cuda.memory._dump_snapshot() pickles, so that PyTorch's memory
 * viewer (pytorch.org/memory_viz, torch/cuda/_memory_viz.py) shows any
 * strategy's segments.
 *
 * The snapshot holds (torch/cuda/memory.py, _snapshot's Snapshot):
 *   segments       the allocator's segments at the end of the trace (before
 *                  what it leaves live is freed), each {device, address,
 *                  total_size, allocated_size, active_size, requested_size,
 *                  stream, segment_type, is_expandable, frames, blocks}, a
 *                  block {address, size, requested_size, state
 *                  (active_allocated | inactive), frames}
 *   device_traces  [[entries of device 0]], each {action, addr, size,
 *                  stream, time_us, frames}: alloc (the size asked for),
 *                  free_requested and free_completed (at the trace's free),
 *                  segment_alloc / segment_free (a segment obtained or
 *                  returned), or segment_map / segment_unmap for expandable
 *                  segments (a range mapped or unmapped), oom (with
 *                  device_free)
 *   external_annotations  the trace's step markers as record_function
 *                  scope starts {stage: START, name, device, time_us}
 *   allocator_settings    {vrambench_allocator: the spec's label}
 * Streams are the trace's stream ids (0 the default stream); time_us counts
 * trace entries (there is no clock in a replay); frames are empty. The
 * pickle is protocol 2, written by hand: dicts, lists, ints, strings only.
 *
 * The replay runs on a fresh simulated device of `capacity` bytes: the
 * memory a strategy takes does not depend on the device. */
#ifndef VB_SNAPSHOT_H
#define VB_SNAPSHOT_H

#include <stdint.h>

#include "base/status.h"
#include "runner.h"

/* Replays `trace_path` with `spec` and writes the snapshot to `out_path`
 * through the safe writer (app/output_file.h: a new temporary file beside
 * it, then a rename: never a partial file, never through a symlink). VB_ERR_INVALID
 * for a bad trace or spec, VB_ERR_IO when the file cannot be written. */
vb_status vb_snapshot_write(const char *trace_path, const vb_allocator_spec *spec, uint64_t capacity,
                            vb_sim_placement placement, const char *out_path);

/* vb_snapshot_write that, with `stop_at_oom`, stops at the first allocation
 * that finds no memory: the segments are those of that moment (after the
 * allocator's out-of-memory path gave back what it could) and the last
 * trace entry is its oom (`vrambench explain --snapshot`). */
vb_status vb_snapshot_write_until(const char *trace_path, const vb_allocator_spec *spec, uint64_t capacity,
                                  vb_sim_placement placement, int stop_at_oom, const char *out_path);

#endif
