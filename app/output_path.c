/* vrambench — output path templates (see output_path.h). */
#include "output_path.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/closest.h"
#include "output_file.h"
#include "scratch.h"

void vb_report_device_slug(const vb_device_info *info, char *out, size_t capacity)
{
    if (capacity == 0) return;
    if (info->simulated) {
        snprintf(out, capacity, "sim");
        return;
    }
    size_t used = 0;
    int dash = 0;
    for (const char *c = info->name; *c && used + 1 < capacity; c++) {
        if (isalnum((unsigned char)*c)) {
            if (dash && used > 0 && used + 2 < capacity) out[used++] = '-';
            dash = 0;
            out[used++] = (char)tolower((unsigned char)*c);
        } else {
            dash = 1;
        }
    }
    out[used] = '\0';
    if (used == 0) snprintf(out, capacity, "gpu");
}

/* The placeholders a template may hold, without their braces. */
static const char *const placeholders[] = {"device", "date", NULL};

/* VB_ERR_INVALID for a '{' that opens no known placeholder ("{devic}",
 * "{DATE}", "{}", an unclosed "{device"): taken as text, such a name
 * would be no template, and a second run would replace the first's file. */
static vb_status check_placeholders(const char *pattern)
{
    for (const char *open = strchr(pattern, '{'); open; open = strchr(open + 1, '{')) {
        const char *close = strchr(open, '}');
        char name[64] = "";
        if (close && (size_t)(close - open - 1) < sizeof name) snprintf(name, sizeof name, "%.*s", (int)(close - open - 1), open + 1);
        if (close && vb_name_known(name, placeholders)) continue;
        const char *nearest = name[0] ? vb_closest_name(name, placeholders) : NULL;
        return vb_error(VB_ERR_INVALID, "output path '%s': '%.*s' is no placeholder%s%s%s (a path may hold {device} and "
                                        "{date})", pattern, close ? (int)(close - open + 1) : (int)strlen(open), open,
                        nearest ? "; did you mean {" : "", nearest ? nearest : "", nearest ? "}?" : "");
    }
    return VB_OK;
}

vb_status vb_report_expand_path(const char *pattern, const vb_device_info *info, char *out, size_t capacity)
{
    vb_status checked = check_placeholders(pattern);
    if (checked != VB_OK) return checked;
    char slug[128], date[16];
    vb_report_device_slug(info, slug, sizeof slug);
    time_t now = time(NULL);
    struct tm local;
    localtime_r(&now, &local);
    strftime(date, sizeof date, "%Y%m%d", &local);
    size_t used = 0;
    for (const char *c = pattern; *c; c++) {
        const char *insert = NULL;
        if (strncmp(c, "{device}", 8) == 0) insert = slug, c += 7;
        else if (strncmp(c, "{date}", 6) == 0) insert = date, c += 5;
        size_t length = insert ? strlen(insert) : 1;
        if (used + length >= capacity) return vb_error(VB_ERR_INVALID, "output path '%s' is too long", pattern);
        memcpy(out + used, insert ? insert : c, length);
        used += length;
    }
    out[used] = '\0';
    return VB_OK;
}

int vb_report_is_template(const char *pattern)
{
    return strstr(pattern, "{device}") || strstr(pattern, "{date}");
}

/* This host's name, for a claim's owner ("?" when it cannot be told). */
static const char *host_name(void)
{
    static char name[256];
    if (!name[0] && gethostname(name, sizeof name - 1) != 0) snprintf(name, sizeof name, "?");
    return name;
}

/* 1 when the claim at `claim` was left by a process of this host that no
 * longer runs (killed with SIGKILL, which no handler sees): its name is
 * free again. A claim of another host, or one that cannot be read, holds. */
static int stale_claim(const char *claim)
{
    FILE *file = fopen(claim, "r");
    if (!file) return 0;
    long pid = 0;
    char host[256] = "";
    int read = fscanf(file, "%ld %255s", &pid, host);
    fclose(file);
    return read == 2 && pid > 0 && strcmp(host, host_name()) == 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* The names this process claimed: their claim files and scratch handles. */
typedef struct held_claim {
    char path[4200];
    int handle;
} held_claim;
static held_claim *held;
static size_t held_count;

/* Takes `path` for this process when no file has it and no other
 * vrambench holds it: 1, with ".vrambench-claim-NAME" beside it created
 * (O_EXCL: of two processes asking at once, one gets it), which is removed
 * when the process exits or is killed by a signal (app/scratch.h). The name
 * itself is written only at the end (output_file.h), so without the claim
 * two runs sharing a template both chose the same free name, and the later
 * replaced the earlier's file. 0 when taken; -1 (errno) when the claim
 * cannot be made. */
static int claim_name(const char *path)
{
    struct stat st;
    if (lstat(path, &st) == 0) return 0;
    const char *slash = strrchr(path, '/');
    char claim[4200];
    if ((size_t)snprintf(claim, sizeof claim, "%.*s.vrambench-claim-%s", slash ? (int)(slash - path + 1) : 0, path,
                         slash ? slash + 1 : path) >= sizeof claim) {
        errno = ENAMETOOLONG;
        return -1;
    }
    held_claim *grown = realloc(held, (held_count + 1) * sizeof *held);
    if (!grown) {
        errno = ENOMEM;
        return -1;
    }
    held = grown;
    int fd = open(claim, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST && stale_claim(claim)) {
        unlink(claim);
        fd = open(claim, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    }
    if (fd < 0) return errno == EEXIST ? 0 : -1;
    char owner[320];
    int length = snprintf(owner, sizeof owner, "%ld %s\n", (long)getpid(), host_name());
    ssize_t written = write(fd, owner, (size_t)length);
    (void)written; /* an empty claim still holds the name; it only cannot be seen to be stale */
    close(fd);
    int handle = vb_temp_register(claim);
    if (handle < 0) {
        unlink(claim);
        errno = ENOMEM;
        return -1;
    }
    held[held_count].handle = handle;
    snprintf(held[held_count].path, sizeof held[held_count].path, "%s", claim);
    held_count++;
    /* a writer that finished between the check and the claim */
    return lstat(path, &st) != 0;
}

/* Makes `path` (a template's expansion) a name no file has and no other
 * run holds (claim_name): "NAME-2.EXT", "NAME-3.EXT", ... (EXT of a gzip'd
 * name is both its extensions, as ".json.gz"). VB_ERR_INVALID when none is
 * free or it gets too long. */
static vb_status unique_name(char *path, size_t capacity)
{
    int claimed = claim_name(path);
    if (claimed < 0) return vb_error(VB_ERR_INVALID, "cannot write '%s': %s", path, strerror(errno));
    if (claimed) return VB_OK;
    char stem[4096], extension[256] = "";
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path, *dot = strrchr(base, '.');
    if (dot && dot > base && vb_output_is_gzip_name(base)) {
        /* "sim.json.gz" -> "sim-2.json.gz", still a gzip'd .json (not "sim.json-2.gz") */
        const char *inner = dot;
        while (--inner > base && *inner != '.') continue;
        if (inner > base) dot = inner;
    }
    size_t stem_length = dot && dot > base ? (size_t)(dot - path) : strlen(path); /* ".json" alone is a stem */
    if (stem_length >= sizeof stem || strlen(path + stem_length) >= sizeof extension)
        return vb_error(VB_ERR_INVALID, "output path '%s' is too long", path);
    memcpy(stem, path, stem_length);
    stem[stem_length] = '\0';
    snprintf(extension, sizeof extension, "%s", path + stem_length);
    for (unsigned n = 2; n < 10000; n++) {
        if ((size_t)snprintf(path, capacity, "%s-%u%s", stem, n, extension) >= capacity)
            return vb_error(VB_ERR_INVALID, "output path '%s%s' is too long", stem, extension);
        claimed = claim_name(path);
        if (claimed < 0) return vb_error(VB_ERR_INVALID, "cannot write '%s': %s", path, strerror(errno));
        if (claimed) return VB_OK;
    }
    return vb_error(VB_ERR_INVALID, "no free name for '%s%s' (%s-2 ... -9999 exist; --force replaces)", stem,
                    extension, stem);
}

vb_status vb_report_output_path(const char *pattern, const vb_device_info *info, int force, char *out,
                                size_t capacity)
{
    vb_status status = vb_report_expand_path(pattern, info, out, capacity);
    if (status == VB_OK && !force && vb_report_is_template(pattern)) status = unique_name(out, capacity);
    return status == VB_OK ? vb_output_check(out) : status;
}

void vb_report_output_release(void)
{
    for (size_t i = 0; i < held_count; i++) {
        unlink(held[i].path); /* ours: claim_name made it with O_EXCL */
        vb_temp_forget(held[i].handle);
    }
    free(held);
    held = NULL;
    held_count = 0;
}
