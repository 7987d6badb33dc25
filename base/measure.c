/* vrambench — clocks and sample statistics. */
#include "measure.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

uint64_t vb_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t vb_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void vb_sort_doubles(double *values, size_t count)
{
    if (count > 1) qsort(values, count, sizeof *values, compare_double); /* an empty list may be NULL */
}

double vb_quantile(const double *sorted, size_t count, double p)
{
    if (count == 0) return 0.0;
    double position = p * (double)(count - 1);
    size_t below = (size_t)position;
    if (below + 1 >= count) return sorted[count - 1];
    double fraction = position - (double)below;
    return sorted[below] + fraction * (sorted[below + 1] - sorted[below]);
}

double vb_mean(const double *values, size_t count)
{
    double sum = 0.0;
    for (size_t i = 0; i < count; i++) sum += values[i];
    return count ? sum / (double)count : 0.0;
}

double vb_stddev(const double *values, size_t count)
{
    if (count < 2) return 0.0;
    double mean = vb_mean(values, count), sum = 0.0;
    for (size_t i = 0; i < count; i++) sum += (values[i] - mean) * (values[i] - mean);
    return sqrt(sum / (double)(count - 1));
}

int vb_samples_add(vb_samples *samples, double value)
{
    if (samples->count == samples->capacity) {
        size_t capacity = samples->capacity ? samples->capacity * 2 : 256;
        double *values = realloc(samples->values, capacity * sizeof *values);
        if (!values) return -1;
        samples->values = values;
        samples->capacity = capacity;
    }
    samples->values[samples->count++] = value;
    return 0;
}

void vb_samples_reset(vb_samples *samples)
{
    samples->count = 0;
}

void vb_samples_free(vb_samples *samples)
{
    free(samples->values);
    samples->values = NULL;
    samples->count = samples->capacity = 0;
}
