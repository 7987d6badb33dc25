/* vrambench — the command-line subcommands. Each lives in its own
 * app/cmd_NAME.c and is listed in main.c's table.
 *
 * A subcommand returns the process exit status: 0 success, 1 runtime
 * failure, 2 bad usage or bad input. Errors are printed with vb_cli_error.
 *
 * Each command's options are one table (vb_cli_option), which both its
 * parsing (vb_cli_next) and its --help (vb_cli_print_help) read, so the help
 * lists exactly what the parser accepts. */
#ifndef VB_CLI_H
#define VB_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "base/status.h"

#define VB_EXIT_OK 0
#define VB_EXIT_FAILURE 1
#define VB_EXIT_USAGE 2
#define VB_EXIT_OOM 3      /* --fail-on-oom: an allocator ran out of memory */
#define VB_EXIT_HELP (-1)  /* inside a command only: --help was printed, return 0 */

typedef int (*vb_command_fn)(int argc, char **argv); /* argv[0] is the subcommand's name */

/* Prints "vrambench: error: <message>" on stderr, one line: control
 * characters and bytes that are not UTF-8 (from a file name, a spec, a
 * trace) become '?' (vb_text_sanitize). Returns `exit_status`. */
int vb_cli_error(int exit_status, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* Prints `format` and a newline on `out`, one line as vb_cli_error's is
 * (control characters and bytes that are not UTF-8 become '?'): every line
 * that names a file the user gave ("vrambench: wrote FILE", a note). */
void vb_cli_line(FILE *out, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* Prints the last vb_error() message and returns 2 for VB_ERR_INVALID (bad
 * input) or 1 for anything else. */
int vb_cli_status_error(vb_status status);

/* Flushes stdout (a table before a later stderr line), keeping the reason
 * of the first write that failed (errno) for the command's closing check
 * in main: stdio keeps only an error flag, and a later flush of an empty
 * buffer has no reason to give. */
void vb_cli_flush_stdout(void);
/* That reason, or 0 when no flush of vb_cli_flush_stdout failed. */
int vb_cli_stdout_failure(void);

/* ------------------------------------------------------------------------ */
/* Options: one table per command, read by the parser and by --help          */
/* ------------------------------------------------------------------------ */

typedef struct vb_cli_option {
    const char *name;    /* "--allocator"; NULL ends a table */
    const char *alias;   /* a short form ("-o"), or NULL */
    const char *value;   /* the value it takes as help shows it ("SPEC[,SPEC]|all"); NULL: a flag */
    const char *help;    /* what it does, its unit, default and an example; may hold '\n' */
    unsigned only;       /* 0: every variant of the command; else the vb_cli_usage.variant bits it belongs to;
                          * with VB_CLI_REPEATS, which is no variant */
} vb_cli_option;

/* In an option's `only`: it may be given more than once, each adding one
 * (--config); without it a second is refused. A flag bit, not a field of
 * its own, so that the tables' entries (five fields, positional) stay
 * complete for clang's -Wmissing-field-initializers. */
#define VB_CLI_REPEATS (1u << 31)

typedef struct vb_cli_usage {
    const char *command;           /* "replay" */
    const char *arguments;         /* the positional arguments ("TRACE"), or NULL when it takes none */
    const char *summary;           /* what the command does */
    const vb_cli_option *options;  /* its table (run and replay share one: `variant` picks) */
    unsigned variant;              /* 0, or the bit of this variant in the options' `only` */
    const char *notes;             /* printed after the options (terms, examples), or NULL */
} vb_cli_usage;

/* What --out FILE.json of a results file says after what the file holds
 * (app/output_path.h), and the --force it names. */
#define VB_CLI_OUT_TEMPLATE                                                                              \
    "{device} and {date} in FILE are filled in (e.g. out/results/{device}-{date}.json), and such a\n" \
    "name never replaces an earlier file: it gets -2, -3, ... (unless --force); a plain FILE is replaced"
#define VB_CLI_FORCE_OPTION \
    {"--force", NULL, NULL, "an --out name with {device} or {date} may replace a file of that name", 0}

/* Walks a command line against a usage (vb_cli_next). */
typedef struct vb_cli_parser {
    const vb_cli_usage *usage;
    int argc;
    char **argv;
    int next;          /* the index of the next argument */
    int exit_status;   /* after VB_CLI_STOP: 0 when --help was printed, 2 after an error line */
    int only_arguments; /* after "--": every word is a positional argument */
    uint64_t given[4]; /* a bit per option of the table that took a value already (the first 256) */
} vb_cli_parser;

#define VB_CLI_END (-1)       /* no arguments left */
#define VB_CLI_ARGUMENT (-2)  /* a positional argument, in *value */
#define VB_CLI_STOP (-3)      /* --help printed, or an error line: the command returns parser.exit_status */

/* Starts walking argv[1..argc-1] (argv[0] is the command's name). */
void vb_cli_parser_init(vb_cli_parser *parser, const vb_cli_usage *usage, int argc, char **argv);

/* The next option: its index in usage->options, with *value its value (NULL
 * for a flag); "--name=value" and "--name value" alike. VB_CLI_ARGUMENT for a
 * positional argument (an error line instead when usage->arguments is NULL),
 * and for every word after "--" (a trace named "-x"), VB_CLI_END at the end.
 * VB_CLI_STOP after printing the help (-h, --help) or one error line: an
 * unknown option (with the nearest known one), an option of the other
 * variant, a missing value, a value given to a flag, a second value for an
 * option that takes one (not VB_CLI_REPEATS: "--out given twice"). */
int vb_cli_next(vb_cli_parser *parser, const char **value);

/* After VB_CLI_STOP: VB_EXIT_HELP when --help was printed, else the exit
 * status (2 after an error line). A help that stdout could not take is
 * reported by main, which checks stdout after every command. */
int vb_cli_stopped(const vb_cli_parser *parser);

/* The command's help: synopsis, summary, every option of its variant with
 * its value, unit and example, then the notes. */
void vb_cli_print_help(FILE *out, const vb_cli_usage *usage);

/* ------------------------------------------------------------------------ */
/* Values                                                                    */
/* ------------------------------------------------------------------------ */

/* A list of names from "all" or "a,b,c", checked against the known ones. */
typedef struct vb_name_list {
    char *storage;        /* the split copy of the spec */
    const char **names;
    size_t count;
} vb_name_list;

/* Expands `spec` ("all", or comma-separated names, "all" among them) against
 * `known` (NULL-terminated), each name once, in order of first mention. On
 * an unknown or empty name prints one error naming `what`,
 * the nearest known name ("did you mean") and the known names, and returns
 * 2; else fills `out` and returns 0. */
int vb_cli_names(const char *spec, const char *what, const char *const *known, vb_name_list *out);
void vb_name_list_free(vb_name_list *list);


/* The registered allocator names, NULL-terminated (static storage). */
const char *const *vb_cli_allocator_names(void);

/* The command line of a command that reads files and writes one (merge,
 * report): FILE... -o|--out OUT, and `flag` (e.g. "--quiet"; NULL: none).
 * Prints `usage` and sets `helped` for --help; else exit status 2 with one
 * line for an unknown option, no file, no -o, or an OUT that cannot be
 * written (checked before any work). Free with vb_files_out_free. */
typedef struct vb_files_out {
    const char **files;
    size_t count;
    const char *out;
    int flag;   /* `flag` was given */
    int helped; /* --help was printed: exit 0 */
} vb_files_out;
int vb_cli_files_out(int argc, char **argv, const char *usage, const char *flag, vb_files_out *out);
void vb_files_out_free(vb_files_out *args);

/* The folder holding the product's Python package vrambench/: $VB_PYTHON_DIR,
 * else python/ beside the build folder this executable is in (build/ or
 * build/SANITIZER/), else ./python. 0 when found. */
int vb_cli_python_dir(char *out, size_t capacity);

/* The python to run it with: $VB_PYTHON, else /usr/bin/python3 when there, else python3. */
const char *vb_cli_python(void);

/* Waits for child `pid`, which ran a Python tool, and says how it ended, in
 * one line at most of ours: `captured` is a scratch file (app/scratch.h)
 * that was its stderr.
 * When it succeeded, what it wrote is passed on as it is. When it failed,
 * its own lines (those starting with `prefix`, "torch2trace:", or with
 * "vrambench: ", the exec failure's line of the child) are passed
 * on, its error line said as vrambench's when `command` is given
 * ("torch2trace: error: X" as "vrambench: error: tune: X": the user ran
 * vrambench, docs/cli.md), and when none of them was an error line, one line says that `what`
 * ("tune: converting x.pickle with python3 t.py") failed, its exit status or
 * signal, and the last line it wrote otherwise (a traceback's exception):
 * never a traceback, never silence. The exit status to give: 0, 2 when the
 * child's was 2 (bad input), else 1. */
int vb_cli_child_ended(const char *what, pid_t pid, int captured, const char *prefix, const char *command);

/* The trace a command reads (app/cli_trace_input.c): TRACE as every input
 * is read (app/input_file.h: a pipe or FIFO once, spooled), or for a
 * PyTorch memory snapshot pickle the trace python/vrambench/torch2trace.py
 * makes of it, spooled under the name "TRACE (converted by torch2trace)".
 * Reads it through once. An exit status: 0 with *path the name to read, 2
 * with one error line (unreadable, malformed, a pickle torch2trace
 * refuses), 1 when the conversion cannot run. `command` names the command
 * in messages; `converted` (room for 4200 bytes) holds a converted name;
 * `quiet`: torch2trace says only what is wrong (the command's --quiet). */
int vb_cli_trace_input(const char *command, const char *input, int quiet, char *converted, const char **path);

/* Exit status 2 with one error line when the trace `path` holds neither an
 * allocation of a byte or more nor a recorded failure (`first` as
 * vb_replay_check_trace gives it): every figure of its replay would be 0,
 * and a 0 given as a result would pass for a measurement. Else 0. */
struct vb_trace_first_alloc;
int vb_cli_refuse_empty_trace(const char *command, const char *path, const struct vb_trace_first_alloc *first);


/* What a size is, for help texts and error lines (one wording everywhere). */
#define VB_CLI_SIZE_RULE                                                                              \
    "a size is bytes, or a number with K, M, G or T (powers of 1024, any case, B or iB optional: " \
    "64M = 64MiB = 64mb; GB counts as GiB), e.g. 4096, 64MiB, 24g, 1.5G"

/* Parses a size (VB_CLI_SIZE_RULE) into bytes: digits with an optional
 * fraction, then an optional unit; the bytes must come out whole and fit 64
 * bits. 0 on success (0 bytes included: limits are the caller's), -1 when
 * malformed, VB_CLI_SIZE_NOT_WHOLE when well formed but not a whole number
 * of bytes ("1.5", "2.0000001M"). */
#define VB_CLI_SIZE_NOT_WHOLE (-2)
int vb_cli_parse_bytes(const char *text, uint64_t *out);

/* Parses a whole number in [min, max]: decimal digits only, no sign, no
 * unit. 0 on success, -1 when malformed or out of range. */
int vb_cli_parse_whole(const char *text, uint64_t min, uint64_t max, uint64_t *out);

/* Parses a decimal number in [min, max] (seconds, a percentage): an
 * optional sign, digits, an optional fraction and an optional exponent
 * (1e-3), nothing else: no hex, no inf or nan, no unit. `suffix` (or
 * NULL) may follow it once ("%"). 0 on success, -1 when malformed or out
 * of range. */
int vb_cli_parse_decimal(const char *text, const char *suffix, double min, double max, double *out);

/* Checks `command`'s --pytorch-alloc-conf `conf` as PyTorch would read it
 * before it becomes the spec pytorch[CONF], so that a refusal names the
 * option the user wrote (not an allocator list they did not): 0, or one
 * error line and VB_EXIT_USAGE. */
int vb_cli_check_pytorch_conf(const char *command, const char *conf);

/* For a --param given to scenario `name`, which takes none: one error line
 * naming the scenarios that do take one; VB_EXIT_USAGE. */
int vb_cli_param_refused(const char *command, const char *name);

/* Parses `command`'s `option`, a simulated device's memory: bytes as
 * vb_cli_parse_bytes reads them, from `minimum` to VB_SIM_MAX_CAPACITY.
 * 0, or VB_EXIT_USAGE after one error line (naming the limit when above). */
int vb_cli_parse_capacity(const char *command, const char *option, const char *text, uint64_t minimum,
                          uint64_t *out);

/* vb_cli_parse_bytes for the option `option` of `command`: 0, or one error
 * line "COMMAND: bad OPTION 'TEXT': <VB_CLI_SIZE_RULE>" (after "not a whole
 * number of bytes; " when that is what is wrong) and 2. */
int vb_cli_size_option(const char *command, const char *option, const char *text, uint64_t *out);

/* Bytes for people: "512 B", "64.0 MiB", "1.50 GiB". */
void vb_cli_format_bytes(uint64_t bytes, char *out, size_t capacity);

/* ------------------------------------------------------------------------ */
/* The commands                                                              */
/* ------------------------------------------------------------------------ */

int vb_cmd_list(int argc, char **argv);
int vb_cmd_tune(int argc, char **argv);
int vb_cmd_explain(int argc, char **argv);
int vb_cmd_claims(int argc, char **argv);
int vb_cmd_replay(int argc, char **argv);
int vb_cmd_microbench(int argc, char **argv);
int vb_cmd_run(int argc, char **argv);
int vb_cmd_gen_trace(int argc, char **argv);
int vb_cmd_check_sim(int argc, char **argv);
int vb_cmd_compare(int argc, char **argv);
int vb_cmd_merge(int argc, char **argv);
int vb_cmd_report(int argc, char **argv);

/* `run` and `replay` share one option table and one body (cmd_run.c):
 * `trace_command` 1 is `replay TRACE`, 0 `run`. */
int vb_run_command(int argc, char **argv, int trace_command);

#endif
