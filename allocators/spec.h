/* vrambench — allocator specs, as the CLI, the trace replayer and the
 * PyTorch plug-in (VRAMBENCH_ALLOCATOR) take them. */
#ifndef VB_SPEC_H
#define VB_SPEC_H

#include <stddef.h>
#include <string.h>

#include "allocator.h"

/* ------------------------------------------------------------------------ */
/* Allocator specs: "caching" or "caching[max_split_size_mb=256,...]"         */
/* ------------------------------------------------------------------------ */

#define VB_SPEC_MAX_ENTRIES 32

/* printf arguments for "%.*s%s": `text` cut to VB_SPEC_QUOTE_MAX bytes, with
 * "..." after a cut, so that an error line quoting a long spec keeps its
 * reason (vb_error holds 511 bytes). */
#define VB_SPEC_QUOTE_MAX 100
#define VB_SPEC_QUOTED(text) VB_SPEC_QUOTE_MAX, (text), strlen(text) > VB_SPEC_QUOTE_MAX ? "..." : ""

typedef struct vb_allocator_spec {
    char name[320];                   /* the registered allocator, or external:PATH.so */
    char label[512];                  /* canonical: name, or name[k=v,...] */
    vb_config_entry entries[VB_SPEC_MAX_ENTRIES];
    size_t entry_count;
    char *strings[2 * VB_SPEC_MAX_ENTRIES]; /* owned copies behind entries */
    size_t string_count;
} vb_allocator_spec;

/* Parses one spec. An unknown allocator, an unclosed bracket, an empty or
 * malformed KEY=VALUE is VB_ERR_INVALID with a message. Keys and values are
 * checked against the allocator's options only when it is created. */
vb_status vb_allocator_spec_parse(const char *text, vb_allocator_spec *out);

/* Sets KEY=VALUE on a spec (replacing an earlier value of KEY) and rebuilds
 * its label. */
vb_status vb_allocator_spec_set(vb_allocator_spec *spec, const char *key, const char *value);

/* The spec's entries as a config for vb_allocator_create. */
vb_config vb_allocator_spec_config(const vb_allocator_spec *spec);

void vb_allocator_spec_free(vb_allocator_spec *spec);

/* 1 when `a` and `b` are the same spec: the same name as written and the
 * same KEY=VALUE options in any order (caching[a=1,b=2] is caching[b=2,a=1]). */
int vb_allocator_spec_same(const vb_allocator_spec *a, const vb_allocator_spec *b);

/* Parses a list: specs split at top-level commas (commas inside brackets
 * belong to the spec), where the item "all" stands for every registered
 * allocator. A repeated spec (vb_allocator_spec_same) is kept once. On success `*out` holds
 * `*count` specs (free with vb_allocator_spec_list_free). */
vb_status vb_allocator_spec_list_parse(const char *text, vb_allocator_spec **out, size_t *count);

/* The length of `text` up to the first `stop` outside brackets, or to its
 * end: specs hold ',' and '=' inside their brackets ("caching[a=1,b=2]").
 * Brackets are not checked here; vb_allocator_spec_parse does. */
size_t vb_spec_span(const char *text, char stop);

/* The length of the list item that starts at `item`: vb_spec_span to the
 * first comma outside brackets. */
size_t vb_spec_list_item_length(const char *item);
void vb_allocator_spec_list_free(vb_allocator_spec *specs, size_t count);

/* Creates each spec's allocator once on `dev`, so that an unknown key or a
 * bad value is an error before anything runs or is printed; the first
 * failure's status (its message set). An external: spec's library is
 * loaded: callers that must not load one check for those first. */
vb_status vb_allocator_spec_list_check(vb_device *dev, const vb_allocator_spec *specs, size_t count);

#endif
