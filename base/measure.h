/* vrambench — clocks and the small statistics every measurement needs. */
#ifndef VB_MEASURE_H
#define VB_MEASURE_H

#include <stddef.h>
#include <stdint.h>

/* Monotonic host time in nanoseconds. */
uint64_t vb_now_ns(void);

/* Host CPU time of this process in nanoseconds. */
uint64_t vb_cpu_ns(void);

/* Sorts `values` ascending in place. */
void vb_sort_doubles(double *values, size_t count);

/* The p-quantile (0..1) of `sorted` values, linearly interpolated; 0 for none. */
double vb_quantile(const double *sorted, size_t count, double p);

/* Mean, sample standard deviation (0 for fewer than 2 values). */
double vb_mean(const double *values, size_t count);
double vb_stddev(const double *values, size_t count);

/* A growable list of samples (latencies, times). */
typedef struct vb_samples {
    double *values;
    size_t count, capacity;
} vb_samples;

/* Appends a value; returns 0, or -1 when host memory runs out. */
int vb_samples_add(vb_samples *samples, double value);

/* Empties the list, keeping its memory. */
void vb_samples_reset(vb_samples *samples);

/* Frees the memory. */
void vb_samples_free(vb_samples *samples);

#endif
