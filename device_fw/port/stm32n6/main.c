/* hilbench-stm32n6: the firmware core on the STM32N6570-DK (Cortex-M55), loaded into AXISRAM
 * by a debugger in development boot, serving the protocol on USART1 (the ST-LINK's virtual COM
 * port) at STM32N6_BAUD.
 *
 * At each boot: the cycle counter, USART1, hb_device_init over the arena (AXISRAM, above the
 * image), then every received byte goes to hb_device_rx; the core sleeps (WFI) while the ring
 * is empty. HELLO's firmware string carries the image's GNU build id, so the loader can tell
 * that the board already runs this ELF. RESET restarts the firmware in place (a system reset
 * would erase AXISRAM1/2 and the image with it); a 64-byte block at the top of the RAM,
 * outside the image, keeps the boot count that the boot nonce is made from. */
#include <stdint.h>
#include <string.h>

#include "hb_device.h"
#include "hb_port.h"
#include "hb_status.h"
#include "hb_stm32n6.h"
#include "hb_wire.h"
#include "stm32n6.h"

extern uint8_t __arena_start[], __arena_end[], __build_id_note[];
extern uint32_t __noinit_start[];
void Reset_Handler(void);

typedef struct {
    uint32_t magic;
    uint32_t boots; /* boots since the block was last found without its magic */
    uint32_t seed;  /* taken at that cold boot */
} persist;
#define PERSIST_MAGIC 0x4842364Eu /* "HB6N" */
#define PERSIST ((volatile persist *)__noinit_start)

#define TICK_NS_Q16 ((uint32_t)((1000000000ull << 16) / HB_STM32N6_CPU_HZ))

static char device_id[HB_MAX_STRING + 1];
static char firmware[HB_MAX_STRING + 1];
static uint32_t boot;

/* ---- the HAL (core/hb_port.h) ---------------------------------------------------------- */

void hb_port_write(const uint8_t *data, size_t n) { hb_n6_uart_write(data, n); }
uint64_t hb_port_ticks(void) { return hb_n6_cycles(); }
uint32_t hb_port_tick_ns_q16(void) { return TICK_NS_Q16; }
uint8_t hb_port_timing_source(void) { return HB_TIMING_DEVICE; }
const char *hb_port_device_id(void) { return device_id; }
const char *hb_port_firmware(void) { return firmware; }

uint32_t hb_port_boot_nonce(void) { return cm_mix32(PERSIST->seed ^ cm_mix32(boot + 0x9E3779B9u)); }

void hb_port_reset(void) {
    hb_n6_uart_flush(); /* the RESET answer is out */
    cm_irq_disable();
    SYST_CSR = 0;
    USART_CR1 = 0;
    cm_dsb();
    __asm volatile("b Reset_Handler"); /* the startup again: .bss, VTOR, main() */
    for (;;) cm_wfi();
}

/* ---- identity ---------------------------------------------------------------------------- */

/* The first HB_STM32N6_BUILD_ID_DIGITS hex digits of the GNU build id: the note's header is
 * namesz, descsz, type (4 bytes each) and "GNU\0", then the id. */
static void build_id_hex(char *out) {
    static const char hex[] = "0123456789abcdef";
    const uint8_t *note = __build_id_note;
    uint32_t descsz = (uint32_t)note[4] | (uint32_t)note[5] << 8 | (uint32_t)note[6] << 16 |
                      (uint32_t)note[7] << 24;
    size_t digits = 0;
    for (uint32_t i = 0; i < descsz && digits + 2 <= HB_STM32N6_BUILD_ID_DIGITS; i++) {
        out[digits++] = hex[note[16 + i] >> 4];
        out[digits++] = hex[note[16 + i] & 15u];
    }
    out[digits] = 0;
}

static void identity(void) {
    char id[HB_STM32N6_BUILD_ID_DIGITS + 1];
    build_id_hex(id);
    memcpy(device_id, HB_STM32N6_MSG_DEVICE_ID, sizeof HB_STM32N6_MSG_DEVICE_ID);
    const hb_arg a[] = {HB_I(HB_PROTOCOL_VERSION), HB_S(id)};
    hb_format(firmware, sizeof firmware, HB_STM32N6_MSG_FIRMWARE, a, 2);
}

/* ---- serving ----------------------------------------------------------------------------- */

int main(void) {
    volatile persist *p = PERSIST;
    hb_n6_cycles_init();
    if (p->magic != PERSIST_MAGIC) { /* cold: seed from leftover RAM and the debug clock */
        p->seed = cm_mix32(p->seed ^ p->boots ^ DWT_CYCCNT ^ SYST_CVR);
        p->boots = 0;
        p->magic = PERSIST_MAGIC;
    }
    boot = p->boots++;
    identity();
    hb_n6_uart_init();
    uint32_t arena_bytes = (uint32_t)(__arena_end - __arena_start);
    if (arena_bytes > HB_DEFAULT_ARENA_BYTES) arena_bytes = HB_DEFAULT_ARENA_BYTES;
    hb_device_init(__arena_start, arena_bytes, HB_MAX_PAYLOAD);
    cm_irq_enable();

    static const cm_serve_ring ring = {hb_n6_uart_peek, hb_n6_uart_consume, hb_n6_uart_pending,
                                       NULL};
    cm_serve(&ring);
}
