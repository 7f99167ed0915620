/* Helpers shared by test_nn.c, test_graph.c and test_blob.c: load a blob from a golden-vector
 * array into a 16-byte aligned buffer (as the arena holds it), run every sample of a vector
 * through the loaded graph and compare with the expected outputs. */
#ifndef HB_TEST_NN_VECTORS_H
#define HB_TEST_NN_VECTORS_H

#include <stdint.h>

#include "hb_graph.h"
#include "hbgv.h"

/* the array called printf(fmt, i); NULL if absent */
const hbgv_array *nnv_array(const hbgv_file *f, const char *fmt, int i);
/* a 16-byte aligned malloc'ed copy of a u8 array (freed by the next call for the same slot) */
uint8_t *nnv_copy(int slot, const hbgv_array *a);
/* a 16-byte aligned activation region of n bytes, filled with garbage (slot as above) */
uint8_t *nnv_act(int slot, uint32_t n);
/* load blob (slot 0) and bind a region (slot 1); checks act_bytes == want_act; 0 on success */
int nnv_load(hb_graph *g, const hbgv_array *blob, int64_t want_act, hb_status *st, const char *what);
/* forward every row of x and compare with the rows of y */
void nnv_forward_all(hb_graph *g, const hbgv_array *x, const hbgv_array *y, const char *what);
void nnv_free(void);

#endif
