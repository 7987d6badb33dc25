/* vrambench lab — drive-speed: how fast one allocator takes a trace's
 * events on the simulated device, without the replay around it (no memory
 * pass, no latency samples, no JSON), for work on replay speed (issue 26,
 * docs/bench.md "Long traces").
 *
 *   build/lab/drive-speed TRACE [ALLOCATOR [RUNS]]     (make lab)
 *
 * Each of RUNS (default 5) runs drives every event of TRACE through a
 * fresh ALLOCATOR (default caching) on an 80 GiB sim device and times it
 * in process CPU time; the best run is printed as events per second. The
 * events are read into memory first, as tune reads them (vb_drive_load);
 * with DRIVE_FROM_TEXT=1 in the environment each run reads the trace's
 * text as replay does. Like the vrambench command (app/main.c), it keeps
 * the host memory it frees, so that a run does not fault in again the
 * pages the run before used (without it, 5 to 10% of a run at 400,000
 * events went to page faults the command never takes), and has its heap
 * advised for huge pages (base/host_chunks.h, vb_host_heap_keep). The
 * machine's load moves the figures: compare two builds by running them in
 * turns, several rounds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocators/allocator.h"
#include "app/trace_drive.h"
#include "base/device.h"
#include "base/host_chunks.h"
#include "base/measure.h"

/* One timed run; its CPU nanoseconds in *ns. 0, or 1 with a message. */
static int drive_once(const char *path, const vb_drive_events *events, const char *name, int from_text, double *ns)
{
    vb_drive_target target;
    memset(&target, 0, sizeof target);
    vb_allocator *allocator = NULL;
    vb_config config = {0};
    vb_trace *trace = NULL;
    if (vb_sim_open(80ull << 30, &target.device) != VB_OK ||
        vb_allocator_create(name, target.device, &config, &allocator) != VB_OK ||
        (from_text && vb_trace_open(path, &trace) != VB_OK)) {
        fprintf(stderr, "drive-speed: %s\n", vb_last_error());
        return 1;
    }
    target.allocator = allocator;
    vb_drive_source source = {.events = trace ? NULL : events, .trace = trace};
    vb_drive_result result;
    uint64_t start = vb_cpu_ns();
    vb_status status = vb_drive(&source, &target, NULL, 0, &result);
    *ns = (double)(vb_cpu_ns() - start);
    if (status != VB_OK) fprintf(stderr, "drive-speed: %s\n", vb_last_error());
    if (trace) vb_trace_close(trace);
    vb_allocator_destroy(allocator);
    vb_drive_target_close(&target);
    vb_device_close(target.device);
    return status != VB_OK;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: drive-speed TRACE [ALLOCATOR [RUNS]]\n");
        return 2;
    }
    const char *name = argc > 2 ? argv[2] : "caching";
    int runs = argc > 3 ? atoi(argv[3]) : 5;
    if (runs < 1) {
        fprintf(stderr, "drive-speed: RUNS must be a positive number, not '%s'\n", argv[3]);
        return 2;
    }
    (void)vb_host_heap_keep(VB_HOST_HEAP_HUGE_BYTES); /* the heap as the vrambench command keeps it */
    const char *text = getenv("DRIVE_FROM_TEXT");
    int from_text = text && strcmp(text, "1") == 0;
    vb_drive_events events;
    if (vb_drive_load(argv[1], &events) != VB_OK) {
        fprintf(stderr, "drive-speed: %s\n", vb_last_error());
        return 1;
    }
    double best = 0;
    for (int run = 0; run < runs; run++) {
        double ns;
        if (drive_once(argv[1], &events, name, from_text, &ns) != 0) return 1;
        if (run == 0 || ns < best) best = ns;
    }
    printf("%s, %zu events (%s): best of %d %.2f ms, %.2f M events/s\n", name, events.count,
           from_text ? "read from the text" : "read into memory first", runs, best / 1e6, events.count / best * 1e3);
    vb_drive_events_free(&events);
    return 0;
}
