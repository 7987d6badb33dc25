/* vrambench — the command line of the commands that read files and write
 * one: `merge` and `report` (FILE... -o OUT [FLAG]). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/closest.h"
#include "cli.h"
#include "output_file.h"

int vb_cli_files_out(int argc, char **argv, const char *usage, const char *flag, vb_files_out *out)
{
    memset(out, 0, sizeof *out);
    out->files = calloc((size_t)argc + 1, sizeof *out->files);
    if (!out->files) return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    for (int i = 1, only_files = 0; i < argc; i++) {
        if (!only_files && strcmp(argv[i], "--") == 0) { /* every word after it is a FILE (one named -x) */
            only_files = 1;
            continue;
        }
        if (only_files) out->files[out->count++] = argv[i];
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage, stdout);
            out->helped = 1;
            return VB_EXIT_OK;
        }
        else if (flag && strcmp(argv[i], flag) == 0) out->flag = 1;
        else if ((strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--out") == 0) && i + 1 < argc) {
            if (out->out) /* a second would silently replace the first */
                return vb_cli_error(VB_EXIT_USAGE, "%s: -o/--out given twice ('%s', then '%s')", argv[0], out->out,
                                    argv[i + 1]);
            out->out = argv[++i];
        }
        else if (argv[i][0] == '-') {
            const char *known[] = {"--out", "--help", flag, NULL};
            char hint[96];
            return vb_cli_error(VB_EXIT_USAGE, "%s: unknown option or missing value: '%s'%s (see vrambench %s --help)",
                                argv[0], argv[i], vb_did_you_mean(argv[i], known, hint, sizeof hint), argv[0]);
        }
        else out->files[out->count++] = argv[i];
    }
    if (!out->out || out->count == 0)
        return vb_cli_error(VB_EXIT_USAGE, "%s: name the files and -o OUT (see vrambench %s --help)", argv[0], argv[0]);
    /* OUT may be none of the files read: `merge a.json b.json -o a.json` would replace a shard. */
    for (size_t i = 0; i < out->count; i++) {
        vb_named_file files[] = {{"the file", out->files[i], 0}, {"-o", out->out, 1}};
        if (vb_output_check_distinct(files, 2) != VB_OK) return vb_cli_status_error(VB_ERR_INVALID);
    }
    return vb_output_check(out->out) == VB_OK ? VB_EXIT_OK : vb_cli_status_error(VB_ERR_INVALID);
}

void vb_files_out_free(vb_files_out *args)
{
    free(args->files);
    memset(args, 0, sizeof *args);
}
