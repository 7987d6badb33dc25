/* vrambench — allocators/pytorch_conf.c against PyTorch's own parsers: one
 * table of settings PyTorch accepts, one of settings it refuses, each row
 * citing the rule (pytorch/pytorch c10/core/AllocatorConfig.{h,cpp} and
 * c10/cuda/CUDAAllocatorConfig.cpp at the commits pytorch_conf.h names),
 * then what an accepted setting becomes: the strategy, its options, and
 * that the strategy takes them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "allocators/caching_core.h"
#include "allocators/pytorch_conf.h"
#include "allocators/spec.h"
#include "base/device.h"

typedef struct accepted_case {
    const char *conf;
    const char *allocator; /* what it runs as */
    const char *options;   /* our options it sets, "key=value ..." in order ("" none) */
    const char *rule;      /* PyTorch's rule it follows */
} accepted_case;

static const accepted_case accepted[] = {
    {"", "caching", "", "no settings: the defaults"},
    {"expandable_segments:True", "expandable", "", "toBool: True"},
    {"expandable_segments:False", "caching", "", "toBool: False"},
    {"expandable_segments:True,", "expandable", "", "parseArgs: a trailing ',' is skipped"},
    {"\texpandable_segments :\tTrue\n", "expandable", "", "ConfigTokenizer: std::isspace, tabs too, is dropped"},
    {"expandable_ segments:Tr ue", "expandable", "", "ConfigTokenizer: whitespace dropped inside words too"},
    {"expandable_segments,True", "expandable", "", "checkToken's answer is unused: any separator token passes"},
    {"expandable_segments:True:max_split_size_mb:64", "expandable", "max_split_size_mb=64",
     "the token after a value is skipped, whatever it is"},
    {"max_split_size_mb:20", "caching", "max_split_size_mb=20", "parseMaxSplitSize: >= kLargeBuffer / 1 MiB"},
    {"max_split_size_mb:256MB", "caching", "max_split_size_mb=256", "toSizeT: std::stoull ignores the rest"},
    {"max_split_size_mb:+64", "caching", "max_split_size_mb=64", "toSizeT: std::stoull takes a sign"},
    {"max_split_size_mb:-1", "caching", "max_split_size_mb=17592186044415",
     "std::stoull wraps -1 to 2^64-1, capped at SIZE_MAX / 1 MiB"},
    {"max_split_size_mb:256,max_split_size_mb:512", "caching", "max_split_size_mb=512", "a later setting wins"},
    {"max_non_split_rounding_mb:256", "caching", "max_non_split_rounding_mb=256", "parseMaxNonSplitRoundingSize"},
    {"garbage_collection_threshold:0.5", "caching", "garbage_collection_threshold=0.5",
     "parseGarbageCollectionThreshold: in (0, 1)"},
    {"garbage_collection_threshold:0.5s", "caching", "garbage_collection_threshold=0.5",
     "toDouble: std::stod ignores the rest"},
    {"per_process_memory_fraction:0", "caching", "memory_fraction=0", "parsePerProcessMemoryFraction: in [0, 1]"},
    {"per_process_memory_fraction:1.0", "caching", "memory_fraction=1.0", "parsePerProcessMemoryFraction: in [0, 1]"},
    {"roundup_power2_divisions:4", "caching", "roundup_power2_divisions=4", "one power of two for every interval"},
    {"roundup_power2_divisions:[256:1,512:2,>:4]", "caching", "roundup_power2_divisions=[256:1,512:2,>:4]",
     "per interval, '>' for the rest"},
    {"roundup_power2_divisions:[ 256 : 1 ,>:0 ]", "caching", "roundup_power2_divisions=[256:1,>:0]",
     "per interval: 0 turns rounding off there"},
    {"roundup_power2_divisions:[]", "caching", "roundup_power2_divisions=[]", "an empty list changes nothing"},
    {"roundup_power2_divisions:[256:1,]", "caching", "roundup_power2_divisions=[256:1,]",
     "a ',' before ']' is skipped"},
    {"roundup_power2_divisions:[512:2,256:1]", "caching", "roundup_power2_divisions=[512:2,256:1]",
     "boundaries need not rise"},
    {"roundup_power2_divisions:4,roundup_power2_divisions:[>:8]", "caching",
     "roundup_power2_divisions=[1:4,2:8,4:8,8:8,16:8,32:8,64:8,128:8,256:8,512:8,1024:8,2048:8,4096:8,8192:8,"
     "16384:8,32768:8]",
     "a second setting edits the same 16 intervals (spelled out for our option)"},
    {"backend:native", "caching", "", "parseAllocatorConfig: native"},
    {"backend:cudaMallocAsync", "async", "", "parseAllocatorConfig: cudaMallocAsync"},
    {"backend:cudaMallocAsync,max_split_size_mb:64", "async", "", "cudaMallocAsync ignores native options (warns)"},
    {"backend:cudaMallocAsync,max_split_size_mb:64,per_process_memory_fraction:0.5", "async", "memory_fraction=0.5",
     "but not the memory fraction, which its mallocAsync checks (it was dropped without a word)"},
    {"release_lock_on_cudamalloc:True", "caching", "", "locking only"},
    {"release_lock_on_hipmalloc:False", "caching", "", "the hip spelling is accepted by every build"},
    {"pinned_use_cuda_host_register:True", "caching", "", "pinned host memory only"},
    {"pinned_use_hip_host_register:True", "caching", "", "the hip spelling is accepted by every build"},
    {"pinned_num_register_threads:128", "caching", "", "a power of two <= pinned_max_register_threads() (128)"},
    {"pinned_reserve_segment_size_mb:1", "caching", "", "parsePinnedReserveSegmentSize: > 0"},
    {"pinned_use_background_threads:True", "caching", "", "pinned host memory only"},
    {"graph_capture_record_stream_reuse:True", "caching", "", "acts only under CUDA graph capture"},
};

typedef struct refused_case {
    const char *conf;
    const char *message; /* a part of the error */
    const char *rule;
} refused_case;

static const refused_case refused[] = {
    {"expandable_segments:true", "True or False", "toBool: exactly True or False"},
    {"expandable_segments:1", "True or False", "toBool: exactly True or False"},
    {"expandable_segments", "no value", "checkIndex: the separator must be there"},
    {"expandable_segments:", "no value", "checkIndex: the value must be there"},
    {"expandable_segments=True", "unrecognized key 'expandable_segments=True'", "'=' is no separator: one word"},
    {"expandable_segments True", "unrecognized key 'expandable_segmentsTrue'", "whitespace is dropped, not a gap"},
    {"expandable_segments:True,,max_split_size_mb:64", "unrecognized key ','", "two commas: ',' in a key's place"},
    {"max_split_size_mb:19", "at least 20", "parseMaxSplitSize: >= kLargeBuffer / 1 MiB"},
    {"max_non_split_rounding_mb:10", "at least 20", "parseMaxNonSplitRoundingSize: >= 20"},
    {"max_split_size_mb:abc", "not a number", "toSizeT: std::stoull throws invalid_argument"},
    {"max_split_size_mb:99999999999999999999", "out of range", "toSizeT: std::stoull throws out_of_range"},
    {"garbage_collection_threshold:0", "(0.0, 1.0)", "in (0, 1)"},
    {"garbage_collection_threshold:1", "(0.0, 1.0)", "in (0, 1)"},
    {"garbage_collection_threshold:nan", "(0.0, 1.0)", "NaN is in no range"},
    {"garbage_collection_threshold:1e-400", "out of range", "toDouble: std::stod throws out_of_range"},
    {"per_process_memory_fraction:1.5", "[0.0, 1.0]", "in [0, 1]"},
    {"roundup_power2_divisions:3", "a power of two", "isPowerOf2_64"},
    {"roundup_power2_divisions:0", "a power of two", "the one-number form refuses 0"},
    {"roundup_power2_divisions:[256:3]", "0 or a power of two", "divisions 0 or a power of two"},
    {"roundup_power2_divisions:[300:2]", "a power of two, in MiB", "intervals powers of two"},
    {"roundup_power2_divisions:[256:1", "no closing ']'", "tokenizer[i + 1] is out of bounds"},
    {"roundup_power2_divisions:[256:1,", "no closing ']'", "the closing bracket must come"},
    {"roundup_power2_divisions:[256]", "roundup_power2_divisions", "a boundary needs ':' and a value"},
    {"backend:foo", "native or cudaMallocAsync", "parseAllocatorConfig"},
    {"backend:hipMallocAsync", "ROCm", "the CUDA build knows native and cudaMallocAsync only"},
    {"pinned_num_register_threads:256", "up to 128", "<= pinned_max_register_threads()"},
    {"pinned_num_register_threads:6", "a power of two", "isPowerOf2_64"},
    {"pinned_reserve_segment_size_mb:0", "more than 0", "parsePinnedReserveSegmentSize: > 0"},
    {"no_such_key:1", "unrecognized key 'no_such_key'", "CUDA parser: Unrecognized key"},
    {"expandable_segment:True", "unrecognized key 'expandable_segment'; did you mean expandable_segments?",
     "a slip of the keyboard: the nearest key named"},
    {"garbage_collection_treshold:0.5", "did you mean garbage_collection_threshold?",
     "a letter left out: the nearest key named"},
    {"zzz:1", "the keys that shape device memory: backend, expandable_segments, max_split_size_mb",
     "no key near: the keys that matter here listed"},
    {"large_segment_size_mb:64", "known to PyTorch, not modelled here: large_segment_size_mb",
     "AllocatorConfig.h's keys: a large-pool segment size no strategy here models"},
};

/* "key=value key=value" of a parsed setting. */
static void options_of(const vb_pytorch_conf *conf, char *out, size_t capacity)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < conf->count && used < capacity; i++)
        used += (size_t)snprintf(out + used, capacity - used, "%s%s=%s", i ? " " : "", conf->entries[i].key,
                                 conf->entries[i].value);
}

static void accepted_settings_mean_what_pytorch_reads(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof accepted / sizeof *accepted; i++) {
        const accepted_case *c = &accepted[i];
        vb_pytorch_conf conf;
        vb_status status = vb_pytorch_conf_parse(c->conf, &conf);
        if (status != VB_OK) fail_msg("'%s' (%s) was refused: %s", c->conf, c->rule, vb_last_error());
        char options[1024];
        options_of(&conf, options, sizeof options);
        if (strcmp(conf.allocator, c->allocator) != 0 || strcmp(options, c->options) != 0)
            fail_msg("'%s' (%s): %s [%s], expected %s [%s]", c->conf, c->rule, conf.allocator, options, c->allocator,
                     c->options);
    }
}

static void refused_settings_say_why_in_one_line(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        const refused_case *c = &refused[i];
        vb_pytorch_conf conf;
        vb_clear_error();
        if (vb_pytorch_conf_parse(c->conf, &conf) != VB_ERR_INVALID)
            fail_msg("'%s' (%s) was accepted", c->conf, c->rule);
        if (!strstr(vb_last_error(), c->message) || strchr(vb_last_error(), '\n'))
            fail_msg("'%s' (%s): message '%s' lacks '%s'", c->conf, c->rule, vb_last_error(), c->message);
    }
}

/* Every accepted setting makes its strategy on sim: the options handed on
 * are ones the strategy takes. */
static void accepted_settings_make_their_strategy(void **state)
{
    (void)state;
    vb_device *dev = NULL;
    assert_int_equal(vb_sim_open(1ull << 30, &dev), VB_OK);
    for (size_t i = 0; i < sizeof accepted / sizeof *accepted; i++) {
        char text[512];
        snprintf(text, sizeof text, "pytorch[%s]", accepted[i].conf);
        vb_allocator_spec spec;
        vb_allocator *allocator = NULL;
        vb_status status = vb_allocator_spec_parse(text, &spec);
        vb_config config = vb_allocator_spec_config(&spec);
        if (status == VB_OK) status = vb_allocator_create(spec.name, dev, &config, &allocator);
        if (status != VB_OK) fail_msg("%s: %s", text, vb_last_error());
        vb_allocator_destroy(allocator);
        vb_allocator_spec_free(&spec);
    }
    vb_device_close(dev);
}

/* A second roundup_power2_divisions edits the intervals the first set
 * (parseRoundUpPower2Divisions keeps the table within one parseArgs): 4 from
 * the first below 2 MiB, 8 from the second's '>' above. */
static void divisions_accumulate_as_in_pytorch(void **state)
{
    (void)state;
    vb_device *dev = NULL;
    assert_int_equal(vb_sim_open(1ull << 30, &dev), VB_OK);
    vb_allocator_spec spec;
    assert_int_equal(vb_allocator_spec_parse("pytorch[roundup_power2_divisions:4,roundup_power2_divisions:[>:8]]",
                                             &spec),
                     VB_OK);
    vb_config config = vb_allocator_spec_config(&spec);
    vb_allocator *allocator = NULL;
    assert_int_equal(vb_allocator_create(spec.name, dev, &config, &allocator), VB_OK);
    const vb_cc_allocator *cc = allocator->state;
    assert_int_equal(vb_cc_roundup_divisions(cc, 1ull << 20), 4);
    assert_int_equal(vb_cc_roundup_divisions(cc, 2ull << 20), 8);
    assert_int_equal(vb_cc_roundup_divisions(cc, 64ull << 30), 8);
    vb_allocator_destroy(allocator);
    vb_allocator_spec_free(&spec);
    vb_device_close(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accepted_settings_mean_what_pytorch_reads),
        cmocka_unit_test(refused_settings_say_why_in_one_line),
        cmocka_unit_test(accepted_settings_make_their_strategy),
        cmocka_unit_test(divisions_accumulate_as_in_pytorch),
    };
    return cmocka_run_group_tests_name("pytorch_conf", tests, NULL, NULL);
}
