/* CRC-32 (zlib semantics), byte-wise with a 256-entry table built on first use (1 KiB of
 * RAM; the only literal is the polynomial, the check value 0xCBF43926 pins it). */
#include "hb_crc.h"

#define HB_CRC32_POLY 0xEDB88320u /* IEEE 802.3, reflected */

static uint32_t crc_table[256];
static int crc_table_ready;

static void crc_table_init(void) {
    for (uint32_t i = 0; i < 256u; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1u) ? (c >> 1) ^ HB_CRC32_POLY : c >> 1;
        crc_table[i] = c;
    }
    crc_table_ready = 1;
}

uint32_t hb_crc32(uint32_t crc, const uint8_t *p, size_t n) {
    if (!crc_table_ready) crc_table_init();
    uint32_t c = ~crc;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
    return ~c;
}
