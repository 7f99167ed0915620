/* insn_split: a QEMU TCG plugin counting executed guest instructions per address between
 * marker calls (benchmarks/bench_an547.py turns addresses into functions with the ELF's
 * symbols).
 *
 *   qemu-system-arm ... -plugin build/qemu/libinsn_split.so,mark=0xADDR,out=FILE
 *
 * Every translated block gets a record (its instructions' addresses) and an inline counter
 * QEMU increments each time the block runs. Each execution of the instruction at `mark` (the
 * first instruction of the image's hb_bench_mark) closes the window opened by the one before:
 * odd hits open a window, even hits close it. At a close, each record's executions since the
 * open are added to every one of its instructions' addresses in that window. At exit FILE gets
 * "window W" lines, each followed by "ADDR COUNT" lines (hex address, decimal count).
 *
 * A block is counted when it is entered; one that leaves early (an exception inside it) is
 * counted whole. The marker function's own few instructions fall on either side of a window.
 * Written by hand for this project (no code taken from QEMU's example plugins). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qemu_plugin_api.h"

HB_QEMU_PLUGIN_EXPORT int qemu_plugin_version = 1;

typedef struct {
    uint64_t count;     /* executions so far (QEMU's inline add) */
    uint64_t at_open;   /* count when the current window opened */
    uint32_t n;         /* instructions */
    uint64_t *vaddr;    /* their addresses */
} block;

typedef struct {
    uint64_t vaddr, count;
} hit;

enum { MAX_WINDOWS = 64 };

static block **blocks;
static size_t n_blocks, cap_blocks;
static uint64_t mark_addr;
static unsigned mark_hits;
static char out_path[4096];
/* per window: a table of address counts (open addressing on the address) */
static hit *tables[MAX_WINDOWS];
static size_t table_cap[MAX_WINDOWS], table_used[MAX_WINDOWS];

static void fail(const char *why) {
    fprintf(stderr, "insn_split: %s\n", why);
    exit(2);
}

static void add(unsigned w, uint64_t vaddr, uint64_t count) {
    if (table_used[w] * 2 >= table_cap[w]) { /* grow to keep half empty */
        const size_t cap = table_cap[w] ? 2 * table_cap[w] : 4096;
        hit *t = calloc(cap, sizeof *t);
        if (!t) fail("out of memory");
        for (size_t i = 0; i < table_cap[w]; i++) {
            const hit *h = &tables[w][i];
            if (!h->count) continue;
            size_t j = (h->vaddr >> 1) & (cap - 1);
            while (t[j].count) j = (j + 1) & (cap - 1);
            t[j] = *h;
        }
        free(tables[w]);
        tables[w] = t;
        table_cap[w] = cap;
    }
    size_t j = (vaddr >> 1) & (table_cap[w] - 1);
    while (tables[w][j].count && tables[w][j].vaddr != vaddr) j = (j + 1) & (table_cap[w] - 1);
    if (!tables[w][j].count) {
        tables[w][j].vaddr = vaddr;
        table_used[w]++;
    }
    tables[w][j].count += count;
}

static void on_mark(unsigned int vcpu, void *udata) {
    (void)vcpu;
    (void)udata;
    const int opening = mark_hits % 2 == 0;
    const unsigned w = mark_hits / 2;
    mark_hits++;
    for (size_t i = 0; i < n_blocks; i++) {
        block *b = blocks[i];
        if (opening) {
            b->at_open = b->count;
        } else if (w < MAX_WINDOWS && b->count != b->at_open) {
            for (uint32_t k = 0; k < b->n; k++) add(w, b->vaddr[k], b->count - b->at_open);
        }
    }
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    const size_t n = qemu_plugin_tb_n_insns(tb);
    block *b = calloc(1, sizeof *b);
    if (!b || !(b->vaddr = calloc(n ? n : 1, sizeof *b->vaddr))) fail("out of memory");
    b->n = (uint32_t)n;
    for (size_t k = 0; k < n; k++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, k);
        b->vaddr[k] = qemu_plugin_insn_vaddr(insn);
        if (b->vaddr[k] == mark_addr)
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_mark, QEMU_PLUGIN_CB_NO_REGS, NULL);
    }
    /* a block translated inside a window starts counting from zero there */
    b->at_open = 0;
    if (n_blocks == cap_blocks) {
        cap_blocks = cap_blocks ? 2 * cap_blocks : 4096;
        blocks = realloc(blocks, cap_blocks * sizeof *blocks);
        if (!blocks) fail("out of memory");
    }
    blocks[n_blocks++] = b;
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &b->count, 1);
}

static void on_exit(qemu_plugin_id_t id, void *udata) {
    (void)id;
    (void)udata;
    FILE *f = fopen(out_path, "w");
    if (!f) {
        qemu_plugin_outs("insn_split: cannot write the out= file\n");
        return;
    }
    fprintf(f, "marks %u\n", mark_hits);
    for (unsigned w = 0; w < MAX_WINDOWS && w < (mark_hits + 1) / 2; w++) {
        fprintf(f, "window %u\n", w);
        for (size_t i = 0; i < table_cap[w]; i++)
            if (tables[w][i].count)
                fprintf(f, "%" PRIx64 " %" PRIu64 "\n", tables[w][i].vaddr, tables[w][i].count);
    }
    fclose(f);
}

HB_QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                              int argc, char **argv) {
    (void)info;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "mark=", 5) == 0) {
            mark_addr = strtoull(argv[i] + 5, NULL, 0) & ~(uint64_t)1; /* Thumb bit off */
        } else if (strncmp(argv[i], "out=", 4) == 0) {
            snprintf(out_path, sizeof out_path, "%s", argv[i] + 4);
        } else {
            fprintf(stderr, "insn_split: unknown argument %s (say mark=ADDR,out=FILE)\n", argv[i]);
            return -1;
        }
    }
    if (!mark_addr || !out_path[0]) {
        fprintf(stderr, "insn_split: say mark=ADDR (hb_bench_mark's address) and out=FILE\n");
        return -1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_exit, NULL);
    return 0;
}
