/* vrambench — results JSON's context (see context.h): date, host, CPU,
 * build, git commit, device and allocator configs. A failed constructor
 * (host OOM) fails its json_object_set_new (json_report.h, "Values"). */
#include "context.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "json_report.h"
#include "runner.h"

/* Local time as ISO 8601 with a +HH:MM offset, as Google Benchmark writes it. */
static void iso_date(char *out, size_t capacity)
{
    time_t now = time(NULL);
    struct tm local;
    localtime_r(&now, &local);
    char zone[8];
    strftime(out, capacity, "%Y-%m-%dT%H:%M:%S", &local);
    strftime(zone, sizeof zone, "%z", &local); /* "+0100" */
    size_t used = strlen(out);
    if (strlen(zone) == 5) snprintf(out + used, capacity - used, "%.3s:%s", zone, zone + 3);
}

/* The first "cpu MHz" of /proc/cpuinfo, 0 when unknown. */
static long cpu_mhz(void)
{
    FILE *file = fopen("/proc/cpuinfo", "r");
    if (!file) return 0;
    char line[256];
    double mhz = 0;
    while (fgets(line, sizeof line, file))
        if (strncmp(line, "cpu MHz", 7) == 0) {
            const char *colon = strchr(line, ':');
            if (colon) mhz = atof(colon + 1);
            break;
        }
    fclose(file);
    return (long)mhz;
}

/* Google Benchmark's test: frequency scaling is on when cpu0 has a governor
 * other than "performance". */
static int cpu_scaling_enabled(void)
{
    FILE *file = fopen("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "r");
    if (!file) return 0;
    char governor[64] = "";
    int enabled = fgets(governor, sizeof governor, file) && strncmp(governor, "performance", 11) != 0;
    fclose(file);
    return enabled;
}

#ifndef VB_BUILD_COMMIT
#define VB_BUILD_COMMIT "unknown"
#endif

/* The commit the binary was built from (the Makefile's, "-dirty" when its
 * tree had changes): $VB_GIT_COMMIT when set at run time (a copy of the
 * tree without .git, as on a lent GPU machine, is told it), else the one
 * built in, as --version names it. Not the current folder's repository:
 * a run made from another checkout named that one's HEAD. */
static void git_commit(char *out, size_t capacity)
{
    const char *given = getenv("VB_GIT_COMMIT");
    /* Up to its first control character: a value read from a file keeps its
     * newline, and a results file's names hold none (their readers refuse
     * them: vrambench.results check_text), so the file stays readable. */
    size_t given_length = 0;
    while (given && (unsigned char)given[given_length] >= 0x20 && given[given_length] != 0x7f) given_length++;
    if (given_length) snprintf(out, capacity, "%.*s", (int)given_length, given);
    else snprintf(out, capacity, "%s", VB_BUILD_COMMIT);
}

/* {"label": {"key": "value", ...}, ...} for the specs. */
static json_t *allocator_configs(const vb_allocator_spec *specs, size_t count)
{
    json_t *configs = json_object();
    for (size_t i = 0; configs && i < count; i++) {
        json_t *config = json_object();
        for (size_t j = 0; config && j < specs[i].entry_count; j++)
            if (json_object_set_new(config, specs[i].entries[j].key, vb_json_text(specs[i].entries[j].value)) != 0) {
                json_decref(config);
                config = NULL;
            }
        if (json_object_set_new(configs, specs[i].label, config) != 0) {
            json_decref(configs);
            return NULL;
        }
    }
    return configs;
}

json_t *vb_report_context(vb_device *dev, const char *executable, const vb_allocator_spec *specs,
                          size_t spec_count)
{
    vb_device_info info;
    dev->ops->info(dev, &info);
    char date[64] = "", host[256] = "", commit[64];
    iso_date(date, sizeof date);
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "unknown");
    git_commit(commit, sizeof commit);
    json_t *load = json_array();
    double loads[3];
    int load_count = getloadavg(loads, 3);
    for (int i = 0; load && i < load_count; i++) json_array_append_new(load, json_real(loads[i]));
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    char self[1024] = "vrambench";
    if (!executable) {
        ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
        if (length > 0) self[length] = '\0';
        executable = self;
    }

    json_t *context = json_object();
    int failed = !context;
    if (!failed) {
        failed |= json_object_set_new(context, "date", vb_json_text(date));
        failed |= json_object_set_new(context, "host_name", vb_json_text(host));
        failed |= json_object_set_new(context, "executable", vb_json_text(executable));
        failed |= json_object_set_new(context, "num_cpus", json_integer(cpus > 0 ? cpus : 1));
        failed |= json_object_set_new(context, "mhz_per_cpu", json_integer(cpu_mhz()));
        failed |= json_object_set_new(context, "cpu_scaling_enabled", json_boolean(cpu_scaling_enabled()));
        failed |= json_object_set_new(context, "caches", json_array());
        failed |= json_object_set_new(context, "load_avg", load);
        load = NULL;
#ifdef __OPTIMIZE__
        failed |= json_object_set_new(context, "library_build_type", json_string("release"));
#else
        failed |= json_object_set_new(context, "library_build_type", json_string("debug"));
#endif
        failed |= json_object_set_new(context, "json_schema_version", json_integer(1));
        failed |= json_object_set_new(context, "vrambench_version", vb_json_text(VB_VERSION));
        failed |= json_object_set_new(context, "device_kind",
                                      vb_json_text(info.kind == VB_DEVICE_CUDA ? "cuda" : "sim"));
        failed |= json_object_set_new(context, "simulated", json_boolean(info.simulated));
        if (info.simulated)
            failed |= json_object_set_new(context, "sim_placement",
                                          json_string(vb_sim_placement_of(dev) == VB_SIM_PLACE_RISING ? "rising"
                                                                                                       : "top-down"));
        failed |= json_object_set_new(context, "device_name", vb_json_text(info.name));
        failed |= json_object_set_new(context, "driver_version", json_integer(info.driver_version));
        failed |= json_object_set_new(context, "runtime_version", json_integer(info.runtime_version));
        failed |= json_object_set_new(context, "device_total_bytes", json_integer((json_int_t)info.total_bytes));
        failed |= json_object_set_new(context, "git_commit", vb_json_text(commit));
        failed |= json_object_set_new(context, "allocator_configs", allocator_configs(specs, spec_count));
        /* Memory figures come from the runner's memory pass (runner.h); the
         * field tells check-sim a file's figures do not depend on timing. */
        failed |= json_object_set_new(context, "memory_pass",
                                      json_pack("{s:i}", "iterations", VB_MEMORY_PASS_ITERATIONS));
    }
    json_decref(load);
    if (failed) {
        json_decref(context);
        return NULL;
    }
    return context;
}
