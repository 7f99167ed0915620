/* Benchmarks of the firmware core: forward passes and ZO steps timed with the port's tick
 * counter (hb_port_ticks), reported as text lines through hb_port_write.
 *
 * Port-independent: this code uses the core's API (hb_graph.h, hb_model.h, core/zo/) and two
 * HAL calls, nothing else, so the same C measures on every port. The unit of a tick is the
 * port's: nanoseconds of CLOCK_MONOTONIC in the host build (bench/host_main.c); executed
 * instructions on the an547 port under `qemu-system-arm -icount shift=0` (one instruction
 * advances QEMU's virtual clock by 1 ns), which hb_port_ticks reads there. The caller names
 * the unit in hb_bench_report_build; ticks of different units are never compared.
 *
 * Per op: time a blob that holds that one op (a blob per op shape; no hook in the
 * interpreter). Per model: the model's blob. A forward run includes hb_graph_forward's copy
 * of the input into its activation buffer, as every forward pass on the device does.
 *
 * Memory: the blob stays where the caller put it (4-byte aligned; the ZO bench perturbs and
 * updates its weights in place); everything else lives in the caller's arena (16-byte
 * aligned). No heap. Statistics use one static array of HB_BENCH_MAX_RUNS samples. */
#ifndef HB_BENCH_H
#define HB_BENCH_H

#include <stdint.h>

#include "hb_model.h"
#include "hb_status.h"

#define HB_BENCH_MAX_RUNS 4096u /* timed runs per measurement (the samples array) */
#define HB_BENCH_MAX_SAVED_Q 64u /* losses of the first PROBE kept for the report */
/* APPLY's coefficients: (L+ - L-) x this, from the first PROBE, clamped to +-HB_COEFF_LIMIT
 * (Q16: a loss difference of 1/64 moves a weight by about one LSB per sample) */
#define HB_BENCH_COEFF_GAIN 64

/* Ticks of one measurement over its runs: the fastest, the median (the lower middle for an
 * even count) and the slowest run. The timer's own cost (hb_bench_tick_overhead) is
 * subtracted from every run. */
typedef struct {
    uint32_t runs;
    uint64_t min, median, max;
} hb_bench_stats;

/* The cost of reading the tick counter twice (the least of 64 empty intervals): subtracted
 * from every timed run. Measured once, at the first call. */
/* A marker call for a per-function profile under QEMU (bench/qemu/insn_split.c): does nothing. */
void hb_bench_mark(void);

uint64_t hb_bench_tick_overhead(void);

typedef struct {
    uint16_t ops;         /* ops in the blob */
    uint32_t act_bytes;   /* the activation plan */
    uint32_t input_size;  /* bytes of one input */
    uint32_t output_size; /* elements of the output */
    hb_bench_stats forward;
    const int8_t *output; /* the output of the first run (a copy in the arena) */
    int stable;           /* every timed run gave the first run's output, byte for byte */
} hb_bench_forward_result;

/* Load the blob (hb_blob_load, in place), place its activations at the start of the arena,
 * run one untimed forward pass on input (input_len bytes, the model's input size), then
 * `runs` timed ones (1..HB_BENCH_MAX_RUNS). Returns 0, or -1 with st set: the blob's
 * refusal (BAD_MODEL), an input of the wrong size, runs out of range, or an arena smaller
 * than act_bytes + the output (MODEL_TOO_LARGE, with both sizes). The model stays loaded. */
int hb_bench_forward(uint8_t *blob, uint32_t len, uint8_t *arena, uint32_t arena_bytes,
                     const int8_t *input, uint32_t input_len, uint32_t runs,
                     hb_bench_forward_result *r, hb_status *st);

/* The fastest run: the best estimate where a run can only be slowed (elapsed time); the
 * median: where a clock may also under-count a run (a thread CPU clock on a VM). */
enum { HB_BENCH_STAT_MIN = 0, HB_BENCH_STAT_MEDIAN = 1 };

typedef struct {
    uint16_t q;         /* seeds per PROBE and APPLY, 1..HB_MAX_Q */
    uint16_t batch;     /* PROBE's mini-batch, 1..HB_MAX_BATCH */
    uint16_t eps;       /* 1..HB_MAX_EPS */
    uint32_t runs;      /* timed PROBEs and APPLYs (and PRNG passes), 1..HB_BENCH_MAX_RUNS */
    uint32_t seed;      /* the first PROBE's seeds are seed, seed+1, ...; each run moves on */
    uint32_t item_runs; /* timed single forward passes and loss batches, 1..HB_BENCH_MAX_RUNS */
    uint8_t split_stat; /* HB_BENCH_STAT_*: which run of each part the split uses */
    uint8_t no_scratch; /* 1: PROBE without scratch (every pass from the input, rows on demand:
                           the reference path); 0: the arena's rest is its scratch */
} hb_bench_zo_args;

typedef struct {
    /* the model and its ZO method (codes of gen/hb_zo.h) */
    uint16_t n_trained;
    uint64_t weight_elems, bias_elems; /* trained elements */
    uint8_t dist, scaling, estimator, rounding, master;
    uint32_t pool_size;
    uint64_t arena_used;   /* act_bytes + zo work bytes + the PRNG parts' pool copy */
    uint32_t n_forward;    /* forward passes per PROBE: 2 q B (two-point), (q + 1) B (one-sided) */
    uint32_t n_perturbed;  /* of which perturbed: 2 q B, q B */
    /* measured, ticks */
    hb_bench_stats forward;     /* one hb_graph_forward (items of the slot in turn) */
    hb_bench_stats prefix;      /* its ops before the frozen prefix's cut (0: no cut) */
    uint32_t cut_op;            /* hb_model_cut: the frozen prefix's end, 0: none */
    uint64_t prefix_bytes, copy_bytes, scratch_bytes; /* the PROBE's scratch: its two parts */
    uint64_t words_bytes;                             /* and its third (hb_model_words_bytes) */
    uint8_t used_prefix, used_copy, used_words;       /* which the PROBE used */
    hb_bench_stats loss;        /* hb_loss_item of one item (a batch of B timed, divided by B) */
    hb_bench_stats scale;       /* hb_zo_scale of every trained tensor, one seed */
    hb_bench_stats draw_rows;   /* every trained element's sample, one seed, row by row as a
                                   perturbed forward pass draws them (hb_zo_row_samples) */
    hb_bench_stats draw_chunks; /* the same, a chunk of elements at a time as APPLY draws them
                                   (hb_zo_samples) */
    hb_bench_stats probe;       /* hb_model_probe(q, B) */
    hb_bench_stats apply;       /* hb_model_apply(q) */
    /* PROBE and APPLY split, from each part's run chosen by split_stat (the last part of each
     * step is the remainder, so it may come out slightly negative when the parts are timed
     * noisily) */
    int64_t probe_total;   /* probe's min or median */
    int64_t probe_forward; /* n_forward x forward: the forward passes as inference costs them */
    int64_t probe_loss;    /* n_forward x loss */
    int64_t probe_prng;    /* q x scale + n_perturbed x draw_rows: a PROBE draws its samples
                              while each perturbed forward pass reads its rows */
    int64_t probe_perturb; /* the rest: deltas and clamps into the row buffer, the batch's
                              indices, loss means */
    int64_t apply_total;   /* apply's min or median */
    int64_t apply_prng;    /* q x (scale + draw_chunks) */
    int64_t apply_update;  /* the rest: accumulate, round, masters and weights */
    /* what the bench checked */
    uint32_t crc_initial;  /* hb_model_weights_crc after load */
    uint32_t crc_probed;   /* after every PROBE (a PROBE changes no weight: == crc_initial) */
    uint32_t crc_applied;  /* after the APPLYs */
    uint16_t saved_q;      /* losses of the first PROBE: min(q, HB_BENCH_MAX_SAVED_Q) */
    int32_t lp[HB_BENCH_MAX_SAVED_Q], lm[HB_BENCH_MAX_SAVED_Q];
    /* one EVAL of every item (after the APPLYs): without the prefix cache, making its
     * entries (the bench's scratch as the free region), reading them; its hits and loss sum
     * the same all three times (eval_same) */
    uint64_t eval_plain, eval_making, eval_cached;
    uint32_t n_items, eval_correct, cache_cap, cache_bytes;
    uint8_t eval_same;
} hb_bench_zo_result;

/* Load the blob as a ZO model (hb_blob_load, hb_model_load: it needs a LOSS section, and its
 * ZOCF if any), bind activations and ZO work in the arena, and time: single forward passes,
 * the loss, the PRNG's parts (scales; every trained element's sample drawn row by row as a
 * PROBE's forward pass does, and in chunks as APPLY does; from the ZOCF as the device reads
 * it), then `runs` PROBEs on the slot (seeds moving on every run) and `runs`
 * APPLYs (coefficients (L+ - L-) x HB_BENCH_COEFF_GAIN of the first PROBE, every APPLY with
 * the first PROBE's seeds). The slot must suit the model (its
 * item size, n_classes = the output size or 0 for "the model's", labels < n_classes,
 * n_items >= 1). Returns 0, or
 * -1 with st set (the model's refusal, an argument out of range, a slot that does not fit,
 * an arena too small: MODEL_TOO_LARGE with the sizes). */
int hb_bench_zo(uint8_t *blob, uint32_t len, uint8_t *arena, uint32_t arena_bytes,
                const hb_slot *slot, const hb_bench_zo_args *a, hb_bench_zo_result *r,
                hb_status *st);

/* ---- the report: one line per record, `record key=value ...`, through hb_port_write -------
 * Strings are quoted ("..."); a record's keys are listed with its function. */

/* `build compiler="..." flags="..." clock="<unit>" tick_overhead=N` (the compiler from
 * __VERSION__; flags as the build passed them in HB_BENCH_FLAGS). */
void hb_bench_report_build(const char *clock_unit);

/* `forward ops= act_bytes= input= output= runs= min= median= max= stable=` then
 * `output hex=<the first run's output, two hex digits per byte>`. */
void hb_bench_report_forward(const hb_bench_forward_result *r);

/* `zo trained= weight_elems= bias_elems= dist= scaling= estimator= rounding= master= pool=
 * arena= q= batch= eps= n_forward= n_perturbed=`; `zo_time part=<forward|loss|scale|draw_rows|
 * draw_chunks|probe|apply> runs= min= median= max=` per part; `zo_split step=probe total= forward= loss=
 * prng= perturb=`; `zo_split step=apply total= prng= update=`; `zo_check crc_initial=
 * crc_probed= crc_applied= restored=`; `zo_losses lp=a,b,... lm=a,b,...`; `zo_eval items=
 * correct= plain= making= cached= cache_cap= cache_bytes= same=` (ticks of one EVAL of every
 * item without the prefix cache, making its entries, reading them). */
void hb_bench_report_zo(const hb_bench_zo_args *a, const hb_bench_zo_result *r);

/* `error code=N message="..."`: a refusal in the report's format. */
void hb_bench_report_error(const hb_status *st);

/* The kernels alone on CMSIS-NN's anchor shapes (bench.c): CONV_2D 3x3 16x16x16 -> 32,
 * DEPTHWISE_CONV_2D 3x3 16x16x64, FC 256 -> 128, and CONV_2D 1x1 16x16x16 -> 32, the anchor's
 * data; one report line per kernel (`kernel name=... macs=... runs=... min=... checksum=...`).
 * Its buffers come from malloc (a bench, not the firmware). 0, or -1 with st set. */
int hb_bench_kernels(uint32_t runs, hb_status *st);

#endif /* HB_BENCH_H */
