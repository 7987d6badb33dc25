/* vrambench — the summary table (see console_report.h). */
#include "console_report.h"

#include <string.h>

#include "base/measure.h"
#include "cli.h"

/* The mean over repetitions of a counter. */
static double counter_mean(const vb_case_result *result, const char *name)
{
    double sum = 0;
    for (size_t i = 0; i < result->repetition_count; i++)
        sum += vb_repetition_counter(&result->repetitions[i], name, 0.0);
    return result->repetition_count ? sum / (double)result->repetition_count : 0.0;
}

/* A duration with a readable unit ("812 ns", "1.25 ms"). */
static void format_time(double ns, char *out, size_t capacity)
{
    if (ns < 1e3) snprintf(out, capacity, "%.0f ns", ns);
    else if (ns < 1e6) snprintf(out, capacity, "%.2f us", ns / 1e3);
    else if (ns < 1e9) snprintf(out, capacity, "%.2f ms", ns / 1e6);
    else snprintf(out, capacity, "%.2f s", ns / 1e9);
}

/* A full-width rule: "|====...====|". */
static void rule(FILE *out, char fill, int width)
{
    fputc('|', out);
    for (int i = 0; i < width - 2; i++) fputc(fill, out);
    fputs("|\n", out);
}

vb_case_oom vb_report_case_oom(const vb_case_result *result)
{
    vb_case_oom oom = {0};
    if (result->repetition_count == 0) return oom;
    const vb_repetition_result *rep = &result->repetitions[0]; /* the memory pass's, as every repetition's */
    oom.ooms = vb_repetition_counter_whole(rep, "ooms", 0);
    oom.first_line = vb_repetition_counter_whole(rep, "first_oom_line", 0);
    oom.first_bytes = vb_repetition_counter_whole(rep, "first_oom_bytes", 0);
    const vb_scenario *scenario = vb_scenario_find(result->scenario);
    oom.expected = scenario && scenario->device_cap_bytes != 0;
    return oom;
}

void vb_report_describe_oom(const vb_case_oom *oom, char *out, size_t capacity)
{
    int used = snprintf(out, capacity, "%llu OOM%s", (unsigned long long)oom->ooms, oom->ooms == 1 ? "" : "s");
    if (used < 0 || (size_t)used >= capacity || !oom->first_bytes) return;
    char size[32];
    vb_cli_format_bytes(oom->first_bytes, size, sizeof size);
    if (oom->first_line)
        snprintf(out + used, capacity - (size_t)used, ", the first at trace line %llu: %llu bytes, %s",
                 (unsigned long long)oom->first_line, (unsigned long long)oom->first_bytes, size);
    else
        snprintf(out + used, capacity - (size_t)used, ", the first a request of %llu bytes, %s",
                 (unsigned long long)oom->first_bytes, size);
}

void vb_report_print_summary(FILE *out, const vb_device_info *info, const vb_case_result *results, size_t count)
{
    int name_width = 18;
    for (size_t i = 0; i < count; i++)
        if ((int)strlen(results[i].name) > name_width) name_width = (int)strlen(results[i].name);
    /* On the simulated device there is no GPU time: the one time column is
     * the host's, named so. */
    int gpu = !info->simulated;
    static const char header_format[] = "| %-*s | %6s | %12s | %12s | %8s | %10s | %10s | %6s | %10s |";
    int width = snprintf(NULL, 0, header_format, name_width, "", "", "", "", "", "", "", "", "") + (gpu ? 13 : 0);
    char title[256];
    snprintf(title, sizeof title, "vrambench summary: %s (%s)", info->name,
             info->simulated ? "SIMULATED: memory exact; times host-side, no GPU time" : "real GPU");
    rule(out, '=', width);
    int padding = width - 4 - (int)strlen(title);
    fprintf(out, "| %*s%s%*s |\n", padding > 0 ? padding / 2 : 0, "", title,
            padding > 0 ? padding - padding / 2 : 0, "");
    rule(out, '-', width);
    fprintf(out, header_format, name_width, "scenario/allocator", "iters", "peak req MiB", "peak rsv MiB", "overhead",
            "drv allocs", "drv frees", "OOMs", gpu ? "time/iter" : "host/iter");
    fputs(gpu ? "   GPU/iter |\n" : "\n", out);
    rule(out, '-', width);
    for (size_t i = 0; i < count; i++) {
        const vb_case_result *result = &results[i];
        double real = 0, gpu_time = 0;
        for (size_t r = 0; r < result->repetition_count; r++) {
            real += result->repetitions[r].real_time_ns / (double)result->repetition_count;
            gpu_time += result->repetitions[r].gpu_time_ns / (double)result->repetition_count;
        }
        char real_text[32], gpu_text[32];
        format_time(real, real_text, sizeof real_text);
        format_time(gpu_time, gpu_text, sizeof gpu_text);
        vb_case_oom oom = vb_report_case_oom(result);
        fprintf(out, "| %-*s | %6llu | %12.1f | %12.1f | %8.3f | %10.0f | %10.0f | %6llu | %10s |", name_width,
                result->name,
                (unsigned long long)(result->repetition_count ? result->repetitions[0].iterations : 0),
                counter_mean(result, "peak_requested_bytes") / (double)VB_MiB,
                counter_mean(result, "peak_reserved_bytes") / (double)VB_MiB, counter_mean(result, "overhead_ratio"),
                counter_mean(result, "driver_alloc_calls"), counter_mean(result, "driver_free_calls"),
                (unsigned long long)oom.ooms, real_text);
        if (gpu) fprintf(out, " %10s |", gpu_text);
        fputc('\n', out);
    }
    rule(out, '=', width);
    /* A replay's memory pass is one run of the trace (app/replay.c), a
     * scenario's VB_MEMORY_PASS_ITERATIONS: the footnote says which. */
    int replays = 0, scenarios = 0;
    for (size_t i = 0; i < count; i++) {
        if (strncmp(results[i].scenario, "replay:", 7) == 0) replays = 1;
        else scenarios = 1;
    }
    if (replays && !scenarios)
        fprintf(out, "  memory figures from the memory pass (one run of the trace on a fresh allocator, whatever the "
                     "timing);\n  driver calls and OOMs (allocations that found no memory) counted over it;\n");
    else
        fprintf(out, "  memory figures from the memory pass (%d iterations on a fresh allocator%s, whatever the "
                     "timing);\n  driver calls and OOMs (allocations that found no memory) summed over its iterations;\n",
                VB_MEMORY_PASS_ITERATIONS, replays ? "; a trace's replay: one" : "");
    fprintf(out, "  overhead = peak reserved / peak requested (1.0 ideal); means over repetitions.\n");
    if (info->simulated)
        fprintf(out, "  host/iter: host-side time of the allocator and the simulated device's model; not a GPU time.\n");
    const char *expected = NULL;
    for (size_t i = 0; i < count; i++) {
        vb_case_oom oom = vb_report_case_oom(&results[i]);
        if (oom.ooms == 0) continue;
        if (oom.expected) {
            expected = results[i].scenario;
            continue;
        }
        char text[256];
        vb_report_describe_oom(&oom, text, sizeof text);
        fprintf(out, "  OUT OF MEMORY %s: %s\n", results[i].name, text);
    }
    if (expected)
        fprintf(out, "  %s: its OOMs are its measurement (a search under its own device cap), not a failure.\n",
                expected);
}

size_t vb_report_oom_note(FILE *out, const vb_case_result *results, size_t count, int fail_on_oom)
{
    size_t failed = 0;
    char names[1024] = "";
    size_t used = 0;
    for (size_t i = 0; i < count; i++) {
        vb_case_oom oom = vb_report_case_oom(&results[i]);
        if (oom.ooms == 0 || oom.expected) continue;
        if (++failed > 3) continue;
        char text[256];
        vb_report_describe_oom(&oom, text, sizeof text);
        int wrote = snprintf(names + used, sizeof names - used, "%s%s (%s)", failed > 1 ? "; " : "", results[i].name,
                             text);
        if (wrote > 0 && used + (size_t)wrote < sizeof names) used += (size_t)wrote;
    }
    if (failed == 0) return 0;
    char more[48] = "";
    if (failed > 3) snprintf(more, sizeof more, "; and %zu more", failed - 3);
    fprintf(out, "vrambench: %s: %zu case%s ran out of memory: %s%s%s\n", fail_on_oom ? "error" : "warning", failed,
            failed == 1 ? "" : "s", names, more,
            fail_on_oom ? " (--fail-on-oom: exit 3)" : "; --fail-on-oom makes this exit 3");
    return failed;
}
