/* CRC-32 as zlib computes it (IEEE 802.3, reflected polynomial 0xEDB88320, initial value and
 * final XOR 0xFFFFFFFF): docs/protocol.md "Frame body", docs/model-blob.md, WEIGHTS_CRC. */
#ifndef HB_CRC_H
#define HB_CRC_H

#include <stddef.h>
#include <stdint.h>

/* zlib.crc32(p[0..n), crc): start with crc = 0; chain by passing the previous result.
 * hb_crc32(0, "123456789", 9) == 0xCBF43926. */
uint32_t hb_crc32(uint32_t crc, const uint8_t *p, size_t n);

#endif /* HB_CRC_H */
