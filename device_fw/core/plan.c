/* The activation planner (docs/model-blob.md, "The activation plan"; mirrored by
 * hilbench/device/plan.py):
 *
 *   every activation the graph uses (the graph input, each op's output) is one int8 buffer of
 *   its element count, live from the step it is written (input: 0, op j's output: j) through
 *   the last op that reads it (the graph output: through step n_ops); buffers are placed in
 *   birth order, each at the lowest multiple of 16 where it overlaps no placed buffer whose
 *   life overlaps its own; act_bytes = pad16(highest end).
 *
 * O(buffers^2) with buffers <= 1 + HB_MAX_OPS; the working tables are static. */
#include "graph_types.h"

#include "hb_bytes.h"

enum { MAX_BUFFERS = 1 + HB_MAX_OPS * HB_OP_MAX_OUTPUTS };

typedef struct {
    uint64_t offset, size;
    uint16_t tensor, first, last;
} buffer;

static buffer bufs[MAX_BUFFERS];
static uint16_t by_offset[MAX_BUFFERS]; /* placed buffers, sorted by offset */
static uint16_t last_read[HB_MAX_TENSORS];

uint64_t hb_plan_activations(hb_graph *g) {
    uint32_t nb = 0;
    /* birth order: the input, then every op's outputs */
    bufs[nb++] = (buffer){0, g->tensors[g->input].n, g->input, 0, 0};
    for (uint16_t j = 0; j < g->n_ops; j++) {
        const hb_op *op = &g->ops[j];
        for (uint8_t k = 0; k < op->n_out; k++) {
            const uint16_t t = op->idx[op->n_in + k];
            bufs[nb++] = (buffer){0, g->tensors[t].n, t, j, j};
        }
    }
    /* lives: through the last op that reads it; the graph output through the end */
    for (uint16_t t = 0; t < g->n_tensors; t++) last_read[t] = 0;
    for (uint16_t j = 0; j < g->n_ops; j++) {
        const hb_op *op = &g->ops[j];
        for (uint8_t k = 0; k < op->n_in; k++) last_read[op->idx[k]] = j;
    }
    for (uint32_t b = 0; b < nb; b++) {
        buffer *x = &bufs[b];
        if (last_read[x->tensor] > x->last) x->last = last_read[x->tensor];
        if (x->tensor == g->output) x->last = g->n_ops;
    }
    /* place, in birth order */
    uint64_t top = 0;
    for (uint32_t b = 0; b < nb; b++) {
        buffer *x = &bufs[b];
        uint64_t off = 0;
        for (uint32_t i = 0; i < b; i++) {
            const buffer *y = &bufs[by_offset[i]];
            if (y->first > x->last || x->first > y->last) continue; /* lives apart */
            if (off + x->size <= y->offset) break; /* fits below; later ones start higher */
            const uint64_t end = hb_pad16(y->offset + y->size);
            if (end > off) off = end;
        }
        x->offset = off;
        if (off + x->size > top) top = off + x->size;
        uint32_t k = b; /* insert after every buffer at an offset <= off */
        while (k > 0 && bufs[by_offset[k - 1]].offset > off) {
            by_offset[k] = by_offset[k - 1];
            k--;
        }
        by_offset[k] = (uint16_t)b;
    }
    for (uint32_t b = 0; b < nb; b++) g->tensors[bufs[b].tensor].offset = (uint32_t)bufs[b].offset;
    return hb_pad16(top);
}
