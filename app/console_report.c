/* vrambench — the summary table (see console_report.h). */
#include "console_report.h"

#include <string.h>

#include "base/measure.h"

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

void vb_report_print_summary(FILE *out, const vb_device_info *info, const vb_case_result *results, size_t count)
{
    int name_width = 18;
    for (size_t i = 0; i < count; i++)
        if ((int)strlen(results[i].name) > name_width) name_width = (int)strlen(results[i].name);
    static const char header_format[] = "| %-*s | %6s | %12s | %12s | %8s | %10s | %10s | %10s | %10s |\n";
    int width = snprintf(NULL, 0, header_format, name_width, "", "", "", "", "", "", "", "", "") - 1;
    char title[256];
    snprintf(title, sizeof title, "vrambench summary: %s (%s)", info->name,
             info->simulated ? "SIMULATED: memory exact, times not GPU times" : "real GPU");
    rule(out, '=', width);
    int padding = width - 4 - (int)strlen(title);
    fprintf(out, "| %*s%s%*s |\n", padding > 0 ? padding / 2 : 0, "", title,
            padding > 0 ? padding - padding / 2 : 0, "");
    rule(out, '-', width);
    fprintf(out, header_format, name_width, "scenario/allocator", "iters", "peak req MiB", "peak rsv MiB", "overhead",
            "drv allocs", "drv frees", "time/iter", "GPU/iter");
    rule(out, '-', width);
    for (size_t i = 0; i < count; i++) {
        const vb_case_result *result = &results[i];
        double real = 0, gpu = 0;
        for (size_t r = 0; r < result->repetition_count; r++) {
            real += result->repetitions[r].real_time_ns / (double)result->repetition_count;
            gpu += result->repetitions[r].gpu_time_ns / (double)result->repetition_count;
        }
        char real_text[32], gpu_text[32];
        format_time(real, real_text, sizeof real_text);
        format_time(gpu, gpu_text, sizeof gpu_text);
        fprintf(out, "| %-*s | %6llu | %12.1f | %12.1f | %8.3f | %10.0f | %10.0f | %10s | %10s |\n", name_width,
                result->name,
                (unsigned long long)(result->repetition_count ? result->repetitions[0].iterations : 0),
                counter_mean(result, "peak_requested_bytes") / (double)VB_MiB,
                counter_mean(result, "peak_reserved_bytes") / (double)VB_MiB, counter_mean(result, "overhead_ratio"),
                counter_mean(result, "driver_alloc_calls"), counter_mean(result, "driver_free_calls"), real_text,
                gpu_text);
    }
    rule(out, '=', width);
    fprintf(out, "  memory figures from the memory pass (%d iterations on a fresh allocator, whatever the timing);\n"
                 "  driver calls summed over its iterations;\n",
            VB_MEMORY_PASS_ITERATIONS);
    fprintf(out, "  overhead = peak reserved / peak requested (1.0 ideal); means over repetitions.\n");
}
