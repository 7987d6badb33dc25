/* vrambench — what the subcommands share: error lines, option tables
 * (parsing and --help), name lists and sizes. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "allocators/allocator.h"
#include "allocators/pytorch_conf.h"
#include "base/closest.h"
#include "scenarios/scenario.h"
#include "cli.h"
#include "text.h"

/* Formats `format`, makes it one safe line and prints it on `out` after
 * `prefix`: what the user gave (file names, specs, a trace's bytes) is
 * echoed as it is only when it is text: a control character (an escape
 * sequence, a newline that would make two lines) or a byte that is not UTF-8
 * becomes '?'. */
static void print_line(FILE *out, const char *prefix, const char *format, va_list args)
{
    char fixed[1024], *message = fixed;
    va_list again;
    va_copy(again, args);
    int length = vsnprintf(fixed, sizeof fixed, format, args);
    if (length >= (int)sizeof fixed && (message = malloc((size_t)length + 1)) != NULL)
        vsnprintf(message, (size_t)length + 1, format, again);
    va_end(again);
    if (!message) message = fixed; /* cut short rather than lost */
    vb_text_sanitize(message, 1);
    fprintf(out, "%s%s\n", prefix, message);
    if (message != fixed) free(message);
}

int vb_cli_error(int exit_status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    print_line(stderr, "vrambench: error: ", format, args);
    va_end(args);
    return exit_status;
}

void vb_cli_line(FILE *out, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    print_line(out, "", format, args);
    va_end(args);
}

/* The errno of the first failed vb_cli_flush_stdout (one process, one stdout). */
static int stdout_failure;

void vb_cli_flush_stdout(void)
{
    errno = 0;
    if (fflush(stdout) != 0 && !stdout_failure) stdout_failure = errno ? errno : EIO;
}

int vb_cli_stdout_failure(void)
{
    return stdout_failure;
}

int vb_cli_status_error(vb_status status)
{
    const char *message = vb_last_error();
    return vb_cli_error(status == VB_ERR_INVALID ? VB_EXIT_USAGE : VB_EXIT_FAILURE, "%s",
                        message[0] ? message : vb_status_name(status));
}

/* ======================================================================== */
/* Options                                                                  */
/* ======================================================================== */

/* 1 if the option belongs to the usage's variant. */
static int option_applies(const vb_cli_usage *usage, const vb_cli_option *option)
{
    unsigned variants = option->only & ~VB_CLI_REPEATS;
    return variants == 0 || usage->variant == 0 || (variants & usage->variant) != 0;
}

void vb_cli_parser_init(vb_cli_parser *parser, const vb_cli_usage *usage, int argc, char **argv)
{
    *parser = (vb_cli_parser){usage, argc, argv, 1, VB_EXIT_OK, 0, {0}};
}

/* 1 if `word` (its first `length` bytes) is `name`. */
static int is_named(const char *name, const char *word, size_t length)
{
    return name && strlen(name) == length && strncmp(name, word, length) == 0;
}

/* "; did you mean --NAME?" among the options of the usage's variant. */
static const char *nearest_option(const vb_cli_usage *usage, const char *word, char *out, size_t capacity)
{
    const char *known[130];
    size_t count = 0;
    for (const vb_cli_option *o = usage->options; o && o->name && count + 3 < sizeof known / sizeof *known; o++)
        if (option_applies(usage, o)) known[count++] = o->name;
    known[count++] = "--help";
    known[count] = NULL;
    return vb_did_you_mean(word, known, out, capacity);
}

/* One error line and VB_CLI_STOP. */
static int stop(vb_cli_parser *parser, const char *format, ...) __attribute__((format(printf, 2, 3)));
static int stop(vb_cli_parser *parser, const char *format, ...)
{
    char message[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    /* Through vb_cli_error: what the user typed is echoed sanitized. */
    parser->exit_status = vb_cli_error(VB_EXIT_USAGE, "%s: %s (vrambench %s --help lists its options)",
                                       parser->usage->command, message, parser->usage->command);
    return VB_CLI_STOP;
}

int vb_cli_next(vb_cli_parser *parser, const char **value)
{
    *value = NULL;
    if (parser->next >= parser->argc) return VB_CLI_END;
    const vb_cli_usage *usage = parser->usage;
    const char *word = parser->argv[parser->next++];
    if (!parser->only_arguments && strcmp(word, "--") == 0) { /* the end of the options */
        parser->only_arguments = 1;
        return vb_cli_next(parser, value);
    }
    if (parser->only_arguments) {
        *value = word;
        if (usage->arguments) return VB_CLI_ARGUMENT;
        return stop(parser, "unexpected argument '%s': it takes none, only options", word);
    }
    if (strcmp(word, "--help") == 0 || strcmp(word, "-h") == 0) {
        vb_cli_print_help(stdout, usage); /* a failed write is main's to report, as every command's output */
        parser->exit_status = VB_EXIT_OK;
        return VB_CLI_STOP;
    }
    if (word[0] != '-' || word[1] == '\0') {
        *value = word;
        if (usage->arguments) return VB_CLI_ARGUMENT;
        return stop(parser, "unexpected argument '%s': it takes none, only options", word);
    }
    const char *equals = strncmp(word, "--", 2) == 0 ? strchr(word, '=') : NULL;
    size_t length = equals ? (size_t)(equals - word) : strlen(word);
    for (int i = 0; usage->options && usage->options[i].name; i++) {
        const vb_cli_option *option = &usage->options[i];
        if (!is_named(option->name, word, length) && !is_named(option->alias, word, length)) continue;
        if (!option_applies(usage, option))
            return stop(parser, "%s does not apply to %s", option->name, usage->command);
        if (!option->value) {
            if (equals) return stop(parser, "%s takes no value", option->name);
            return i;
        }
        if (equals) *value = equals + 1;
        else if (parser->next < parser->argc) *value = parser->argv[parser->next++];
        else return stop(parser, "%s needs a value: %s", option->name, option->value);
        /* A second value would silently replace the first: refused, as a second TRACE is. */
        uint64_t *given = i < 256 ? &parser->given[i / 64] : NULL, bit = (uint64_t)1 << (i % 64);
        if (given && !(option->only & VB_CLI_REPEATS)) {
            if (*given & bit) return stop(parser, "%s given twice", option->name);
            *given |= bit;
        }
        return i;
    }
    char unknown[128];
    snprintf(unknown, sizeof unknown, "%.*s", (int)(length < sizeof unknown ? length : sizeof unknown - 1), word);
    char hint[160];
    return stop(parser, "unknown option '%s'%s", unknown, nearest_option(usage, unknown, hint, sizeof hint));
}

int vb_cli_stopped(const vb_cli_parser *parser)
{
    return parser->exit_status == VB_EXIT_OK ? VB_EXIT_HELP : parser->exit_status;
}

/* Prints `text` with each line indented by `indent` spaces. */
static void print_indented(FILE *out, const char *text, int indent)
{
    while (*text) {
        size_t line = strcspn(text, "\n");
        fprintf(out, "%*s%.*s\n", indent, "", (int)line, text);
        text += line + (text[line] == '\n');
    }
}

void vb_cli_print_help(FILE *out, const vb_cli_usage *usage)
{
    fprintf(out, "usage: vrambench %s%s%s [OPTIONS]\n\n", usage->command, usage->arguments ? " " : "",
            usage->arguments ? usage->arguments : "");
    print_indented(out, usage->summary, 0);
    fputs("\noptions:\n", out);
    for (const vb_cli_option *o = usage->options; o && o->name; o++) {
        if (!option_applies(usage, o)) continue;
        fprintf(out, "  %s%s%s%s%s\n", o->alias ? o->alias : "", o->alias ? ", " : "", o->name, o->value ? " " : "",
                o->value ? o->value : "");
        print_indented(out, o->help, 6);
    }
    fputs("  -h, --help\n      this help\n", out);
    if (usage->arguments)
        fputs("  --\n      the end of the options: every word after it is an argument (a file named -x)\n", out);
    if (usage->notes) {
        fputc('\n', out);
        print_indented(out, usage->notes, 0);
    }
}

/* ======================================================================== */
/* Names                                                                    */
/* ======================================================================== */

const char *const *vb_cli_allocator_names(void)
{
    static const char *names[64];
    if (!names[0])
        for (size_t i = 0; vb_allocator_registry[i] && i + 1 < sizeof names / sizeof names[0]; i++)
            names[i] = vb_allocator_registry[i]->name;
    return names;
}

/* Joins `known` into one comma-separated line. */
static void join(const char *const *known, char *out, size_t capacity)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; known[i] && used < capacity; i++)
        used += (size_t)snprintf(out + used, capacity - used, "%s%s", i ? ", " : "", known[i]);
}

int vb_cli_names(const char *spec, const char *what, const char *const *known, vb_name_list *out)
{
    size_t known_count = 0;
    while (known[known_count]) known_count++;
    memset(out, 0, sizeof *out);
    out->storage = strdup(spec);
    out->names = calloc(known_count + strlen(spec) + 1, sizeof *out->names);
    if (!out->storage || !out->names) {
        vb_name_list_free(out);
        return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    }
    /* An empty name (",views", "views,", "views,,x"), as --allocator refuses
     * one: strtok would skip it without a word. */
    size_t length = strlen(spec);
    if (length == 0 || spec[0] == ',' || spec[length - 1] == ',' || strstr(spec, ",,")) {
        vb_name_list_free(out);
        return vb_cli_error(VB_EXIT_USAGE, "empty %s name in '%s'", what, spec);
    }
    /* A set, as --allocator is: a repeated name, or "all" among names, adds nothing new (names stay
     * NULL-terminated: there is room past every known one). */
    for (char *save = NULL, *name = strtok_r(out->storage, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        if (strcmp(name, "all") == 0) {
            for (size_t i = 0; i < known_count; i++)
                if (!vb_name_known(known[i], out->names)) out->names[out->count++] = known[i];
            continue;
        }
        if (!vb_name_known(name, known)) {
            char names[1024], nearest[160];
            join(known, names, sizeof names);
            vb_did_you_mean(name, known, nearest, sizeof nearest);
            int status = vb_cli_error(VB_EXIT_USAGE, "unknown %s '%s'%s (known: %s, or all)", what, name, nearest,
                                      names);
            vb_name_list_free(out);
            return status;
        }
        if (!vb_name_known(name, out->names)) out->names[out->count++] = name;
    }
    if (out->count == 0) {
        vb_name_list_free(out);
        return vb_cli_error(VB_EXIT_USAGE, "no %s named in '%s'", what, spec);
    }
    return VB_EXIT_OK;
}

void vb_name_list_free(vb_name_list *list)
{
    free(list->storage);
    free(list->names);
    memset(list, 0, sizeof *list);
}

/* ======================================================================== */
/* Sizes                                                                    */
/* ======================================================================== */

int vb_cli_parse_bytes(const char *text, uint64_t *out)
{
    static const char *const units[] = {"", "k", "m", "g", "t"}; /* 1024^index */
    const char *c = text;
    if (*c < '0' || *c > '9') return -1;
    unsigned __int128 whole = 0, fraction = 0, scale = 1;
    for (; *c >= '0' && *c <= '9'; c++) {
        whole = whole * 10 + (unsigned)(*c - '0');
        if (whole > UINT64_MAX) return -1;
    }
    if (*c == '.') {
        c++;
        if (*c < '0' || *c > '9') return -1;
        for (; *c >= '0' && *c <= '9'; c++) {
            if (scale > (unsigned __int128)UINT64_MAX) return -1; /* more digits than any size needs */
            fraction = fraction * 10 + (unsigned)(*c - '0');
            scale *= 10;
        }
    }
    /* The unit: a letter (or none), then "", "B" or "iB" ("B" alone: bytes). */
    size_t index = 0, letter = strcspn(c, "bBiI");
    if (letter == 1) {
        for (index = 1; index < sizeof units / sizeof *units; index++)
            if (strncasecmp(c, units[index], 1) == 0) break;
        if (index == sizeof units / sizeof *units) return -1;
        c++;
    } else if (letter != 0) {
        return -1;
    }
    if (*c && strcasecmp(c, "b") != 0 && (index == 0 || strcasecmp(c, "ib") != 0)) return -1;
    unsigned __int128 unit = (unsigned __int128)1 << (10 * index);
    unsigned __int128 fraction_bytes = fraction * unit;
    if (fraction_bytes % scale != 0) return VB_CLI_SIZE_NOT_WHOLE;
    unsigned __int128 bytes = whole * unit + fraction_bytes / scale;
    if (bytes > UINT64_MAX) return -1;
    *out = (uint64_t)bytes;
    return 0;
}

int vb_cli_parse_whole(const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
    if (text[0] < '0' || text[0] > '9') return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || value < min || value > max) return -1;
    *out = value;
    return 0;
}

int vb_cli_parse_decimal(const char *text, const char *suffix, double min, double max, double *out)
{
    /* Checked by hand first: strtod also takes hex, inf, nan and leading blanks. */
    const char *at = text + (*text == '+' || *text == '-');
    size_t digits = strspn(at, "0123456789");
    at += digits;
    if (*at == '.') {
        size_t fraction = strspn(at + 1, "0123456789");
        digits += fraction;
        at += 1 + fraction;
    }
    if (digits == 0) return -1;
    if (*at == 'e' || *at == 'E') {
        const char *exponent = at + 1 + (at[1] == '+' || at[1] == '-');
        size_t exponent_digits = strspn(exponent, "0123456789");
        if (exponent_digits == 0) return -1;
        at = exponent + exponent_digits;
    }
    if (*at != '\0' && !(suffix && strcmp(at, suffix) == 0)) return -1;
    errno = 0;
    double value = strtod(text, NULL);
    if (errno != 0 || !isfinite(value) || value < min || value > max) return -1;
    *out = value;
    return 0;
}

int vb_cli_size_option(const char *command, const char *option, const char *text, uint64_t *out)
{
    int parsed = vb_cli_parse_bytes(text, out);
    if (parsed == 0) return VB_EXIT_OK;
    return vb_cli_error(VB_EXIT_USAGE, "%s: bad %s '%s': %s" VB_CLI_SIZE_RULE, command, option, text,
                        parsed == VB_CLI_SIZE_NOT_WHOLE ? "not a whole number of bytes; " : "");
}

void vb_cli_format_bytes(uint64_t bytes, char *out, size_t capacity)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024) {
        snprintf(out, capacity, "%llu B", (unsigned long long)bytes);
        return;
    }
    double value = (double)bytes / 1024;
    size_t unit = 0;
    while (value >= 1024 && unit + 1 < sizeof units / sizeof *units) value /= 1024, unit++;
    snprintf(out, capacity, value < 10 ? "%.2f %s" : "%.1f %s", value, units[unit]);
}

int vb_cli_parse_capacity(const char *command, const char *option, const char *text, uint64_t minimum,
                          uint64_t *out)
{
    uint64_t bytes = 0;
    if (vb_cli_size_option(command, option, text, &bytes) != VB_EXIT_OK) return VB_EXIT_USAGE;
    if (bytes < minimum) {
        char least[32];
        if (minimum % VB_MiB == 0) snprintf(least, sizeof least, "%llu MiB", (unsigned long long)(minimum / VB_MiB));
        else vb_cli_format_bytes(minimum, least, sizeof least);
        return vb_cli_error(VB_EXIT_USAGE, "%s: %s %s is below %s, the driver's smallest allocation", command, option,
                            text, least); /* as given: rounded, 2047K would read "2.00 MiB" */
    }
    if (bytes > VB_SIM_MAX_CAPACITY)
        return vb_cli_error(VB_EXIT_USAGE,
                            "%s: %s %s is more than the simulated device can have (at most " VB_SIM_MAX_CAPACITY_TEXT
                            " = %llu bytes)",
                            command, option, text, (unsigned long long)VB_SIM_MAX_CAPACITY);
    *out = bytes;
    return 0;
}

int vb_cli_check_pytorch_conf(const char *command, const char *conf)
{
    vb_pytorch_conf parsed;
    if (vb_pytorch_conf_parse(conf, &parsed) == VB_OK) return VB_EXIT_OK;
    return vb_cli_error(VB_EXIT_USAGE, "%s: --pytorch-alloc-conf '%s': %s", command, conf, vb_last_error());
}

int vb_cli_param_refused(const char *command, const char *name)
{
    char takers[512] = "";
    size_t used = 0;
    for (size_t i = 0; vb_scenario_registry[i] && used < sizeof takers; i++)
        if (vb_scenario_registry[i]->parameter)
            used += (size_t)snprintf(takers + used, sizeof takers - used, "%s%s: %s", used ? "; " : "",
                                     vb_scenario_registry[i]->name, vb_scenario_registry[i]->parameter);
    return vb_cli_error(VB_EXIT_USAGE, "%s: scenario %s takes no --param (%s)", command, name,
                        used ? takers : "no scenario takes one");
}
