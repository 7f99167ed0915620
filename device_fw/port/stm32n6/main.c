/* hilbench-stm32n6: the firmware core on the STM32N6570-DK (Cortex-M55), loaded into AXISRAM
 * by a debugger in development boot, serving the protocol on USART1 (the ST-LINK's virtual COM
 * port) at STM32N6_BAUD.
 *
 * At each boot: the reset cause, the caches, the bring-up (bringup.c: power, memories,
 * Sleep-mode clocks, PLL1 at HB_N6_CLOCK_MHZ, the watchdog), USART1, the cycle counter, the
 * boot nonce's seed, hb_device_init over the arena (AXISRAM above the image up to the end of
 * AXISRAM6), then every received byte goes to hb_device_rx; the core sleeps (WFI) while the
 * ring is empty (busy-polls with N6_SERVE=poll) and kicks the watchdog each turn. HELLO's
 * firmware string carries the image's GNU build id. RESET and a fault restart the firmware in
 * place (a system reset would erase AXISRAM1/2 and the image with it); a 64-byte block at the
 * top of DTCM, outside the image, keeps the boot count that the boot nonce is made from. */
#include <stdint.h>
#include <string.h>

#include "hb_device.h"
#include "hb_log.h"
#include "hb_port.h"
#include "hb_status.h"
#include "hb_stm32n6.h"
#include "cm_mmio.h"
#include "hb_wire.h"
#include "port.h"
#include "stm32n6.h"

extern uint8_t __arena_start[], __arena_end[], __build_id_note[];
extern uint32_t __noinit_start[];
void Reset_Handler(void);

typedef struct {
    uint32_t magic;
    uint32_t boots; /* boots since the block was last found without its magic */
    uint32_t seed;  /* taken at that cold boot */
    uint32_t after_fault; /* the last boot ended in a fault report */
} persist;
#define PERSIST_MAGIC 0x4842364Eu /* "HB6N" */
#define PERSIST ((volatile persist *)__noinit_start)

static char device_id[HB_MAX_STRING + 1];
static char firmware[HB_MAX_STRING + 1];
static uint32_t boot;
static hb_port_info_t info;
static uint32_t tick_ns_q16;

uint32_t hb_n6_cpu_hz(void) { return info.cpu_hz; }

const hb_port_info_t *hb_port_info(void) {
    hb_n6_uart_errors e;
    hb_n6_uart_errors_get(&e);
    info.uart_overrun = e.overrun;
    info.uart_framing = e.framing;
    info.uart_noise = e.noise;
    info.uart_dropped = e.dropped;
    info.caches = cm_caches_state();
    return &info;
}

/* LOAD_STAGE and LOAD_COMMIT: the probe's AHB-AP writes bypass the M55's D-cache */
void hb_port_stage_sync(const uint8_t *p, uint32_t n) { cm_dcache_flush_range((uintptr_t)p, n); }

/* the serving loop's idle hook (port/cortex_m/serve.c): the watchdog's kick */
void cm_serve_idle(void) {
    if (info.watchdog_ms) hb_n6_watchdog_kick();
}

/* ---- the HAL (core/hb_port.h) ---------------------------------------------------------- */

void hb_port_write(const uint8_t *data, size_t n) { hb_n6_uart_write(data, n); }
uint64_t hb_port_ticks(void) { return hb_n6_cycles(); }
uint32_t hb_port_tick_ns_q16(void) { return tick_ns_q16; }
uint8_t hb_port_timing_source(void) { return HB_TIMING_DEVICE; }
const char *hb_port_device_id(void) { return device_id; }
const char *hb_port_firmware(void) { return firmware; }

uint32_t hb_port_boot_nonce(void) { return cm_mix32(PERSIST->seed ^ cm_mix32(boot + 0x9E3779B9u)); }

void hb_n6_restart(int after_fault) {
    cm_irq_disable();
    PERSIST->after_fault = after_fault ? 1u : 0u;
    SYST_CSR = 0;
    hb_mmio_wr(N6_USART_CR1, 0);
    cm_dsb();
    cm_restart(Reset_Handler); /* the startup again: .bss, VTOR, main() */
}

void hb_port_reset(void) {
    hb_n6_uart_flush(); /* the RESET answer is out */
    hb_n6_restart(0);
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

/* ---- the boot nonce's seed ------------------------------------------------------------ */

/* Taken once per cold boot, after the bring-up, so that it has something to mix: leftover RAM
 * (the kept block, and AXISRAM6's last KiB, which was in shutdown: its content after power-up
 * is undefined), and the cycle counter, which has run through the PLL lock, the voltage and
 * UART waits (their lengths vary from boot to boot). Not a cryptographic seed: the nonce only
 * has to differ between boots (docs/protocol.md). */
#define N6_AXISRAM6_END 0x343C0000u
static uint32_t cold_seed(volatile persist *p) {
    uint32_t h = cm_mix32(p->seed ^ p->boots ^ p->magic);
    const volatile uint32_t *leftover = (const volatile uint32_t *)(N6_AXISRAM6_END - 1024u);
    for (uint32_t i = 0; i < 256u; i++) h = cm_mix32(h ^ leftover[i]);
    return cm_mix32(h ^ DWT_CYCCNT ^ SYST_CVR);
}

/* ---- bring-up -------------------------------------------------------------------------- */

static void bringup(void) {
    uint32_t errors = 0;
    info.reset_flags = hb_n6_reset_flags();
    info.reset_cause = hb_n6_reset_cause(info.reset_flags);
    cm_caches_enable();
    errors |= hb_n6_power_init();
    hb_n6_memories_init();
    hb_n6_sleep_clocks_init();
    info.cpu_hz = hb_n6_clocks_init(hb_n6_clock_plan_for(HB_N6_CLOCK_MHZ), &errors);
    errors |= hb_n6_uart_init(STM32N6_BAUD);
    info.uart_baud = STM32N6_BAUD;
    info.uart_kernel_hz = hb_n6_uart_kernel_hz();
    info.watchdog_ms = hb_n6_watchdog_init(HB_N6_WATCHDOG_MS, &errors);
    info.bringup_errors = errors;
    info.caches = cm_caches_state();
    tick_ns_q16 = (uint32_t)((1000000000ull << 16) / info.cpu_hz);
}

/* ---- serving ----------------------------------------------------------------------------- */

/* after each batch of received bytes: a LOG line when the UART's error counters moved */
static void uart_log(void) {
    const hb_port_info_t *i = hb_port_info();
    hb_log_uart(i->uart_overrun, i->uart_framing, i->uart_noise, i->uart_dropped);
}

int main(void) {
    volatile persist *p = PERSIST;
    hb_n6_cycles_init(); /* first: the bring-up's waits then vary the count the seed mixes */
    bringup();
    if (p->magic != PERSIST_MAGIC) { /* cold */
        p->seed = cold_seed(p);
        p->boots = 0;
        p->after_fault = 0;
        p->magic = PERSIST_MAGIC;
    } else if (!(info.reset_flags & ~(N6_RCC_RSR_RMVF))) {
        /* no reset flag: a restart in place (RESET, or a fault) */
        info.reset_cause |= HB_RESET_RESTART | (p->after_fault ? HB_RESET_FAULT : 0u);
    }
    p->after_fault = 0;
    boot = p->boots++;
    hb_n6_cycles_init(); /* again, at the CPU clock the bring-up set (SysTick runs from it) */
    identity();
    uint32_t arena_bytes = (uint32_t)(__arena_end - __arena_start);
    if (arena_bytes > HB_DEFAULT_ARENA_BYTES) arena_bytes = HB_DEFAULT_ARENA_BYTES;
    info.arena_bytes = arena_bytes;
    hb_device_init(__arena_start, arena_bytes, HB_MAX_PAYLOAD);
    hb_log_boot(hb_reset_reason(info.reset_cause));
    if (info.reset_cause & HB_RESET_FAULT)
        hb_log(HB_LOG_FAULT, "the previous boot ended in a fault (its report went out then)",
               sizeof "the previous boot ended in a fault (its report went out then)" - 1);
    cm_irq_enable();

    static const cm_serve_ring ring = {hb_n6_uart_peek, hb_n6_uart_consume, hb_n6_uart_pending,
                                       uart_log};
    cm_serve(&ring);
}
