/* vrambench — entry point: dispatches to the subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct command {
    const char *name;
    vb_command_fn run;
    const char *usage;
} command;

static const command commands[] = {
    {"list", vb_cmd_list, "list allocators|scenarios|names [--json]  what can be run, the names results use"},
    {"run", vb_cmd_run,
     "run [--scenario S[,S]|all] [--allocator SPEC[,SPEC]|all] [--device auto|cuda|sim]\n"
     "    [--repetitions N] [--min-time SECONDS] [--config ALLOC.KEY=VALUE]... [--out FILE.json]\n"
     "                                  scenarios x allocators, Google Benchmark JSON (run --help)"},
    {"replay", vb_cmd_replay,
     "replay TRACE [--allocator SPEC[,SPEC]|all] [--device auto|cuda|sim] [--out FILE.json]\n"
     "                                  a recorded trace (vbtrace, RMM CSV, .gz) against allocators"},
    {"tune", vb_cmd_tune,
     "tune TRACE [--device sim|cuda] [--capacity SIZE] [--out FILE.json]\n"
     "                                  the PYTORCH_ALLOC_CONF a trace should use, and its smallest GPU"},
    {"claims", vb_cmd_claims,
     "claims [--allocator SPEC[,SPEC]|all] [--device auto|cuda|sim] [--pytorch FILE] [--out FILE.json]\n"
     "                                  the documents' claims, each decided per allocator"},
    {"microbench", vb_cmd_microbench,
     "microbench [--allocator A[,B]|all] [--device auto|cuda|sim] [--out FILE.json]\n"
     "                                  malloc+free pair latency in cache-hit steady state"},
    {"gen-trace", vb_cmd_gen_trace,
     "gen-trace random [--seed N] --events N --max-size BYTES --max-live BYTES -o FILE\n"
     "                                  write a random allocation trace (RMM random_allocations style)"},
    {"check-sim", vb_cmd_check_sim,
     "check-sim FILE...               re-runs GPU results (run, replay, claims) on the simulated device\n"
     "                                  and lists each case whose memory figures differ"},
};

static void usage(FILE *out)
{
    fputs("usage: vrambench COMMAND [OPTIONS]\n\ncommands:\n", out);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %s\n", commands[i].usage);
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? VB_EXIT_USAGE : VB_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
    usage(stderr);
    return vb_cli_error(VB_EXIT_USAGE, "unknown command '%s'", argv[1]);
}
