/* hilbench-an547: the firmware core on the MPS3 AN547 (Cortex-M55) under
 * `qemu-system-arm -M mps3-an547`, serving the protocol on UART0.
 *
 * Settings come from the semihosting command line (options of hb_an547.h, declared in
 * hilbench/target/an547.py): --boot-nonce=N, --nonce-seed=R, --arena-bytes=N,
 * --max-payload=N, --device-id=S, --firmware=S, --icount, --crash-after=N. A refused option
 * is one console line naming the cause and the fix, and exit code HB_AN547_EXIT_BAD_OPTION.
 *
 * At each boot: SysTick, UART0 (interrupt-fed receive ring), hb_device_init over the arena
 * (ISRAM), one BOOT line on the console, then every received byte goes to hb_device_rx; the
 * core sleeps (WFI) while the ring is empty. RESET is a reboot of the emulated core
 * (SYSRESETREQ): QEMU resets the machine and reloads the image; a 64-byte block at the top of
 * DTCM, outside the image, keeps the boot count across it (the nonce of boot k). */
#include <stdint.h>
#include <string.h>

#include "an547.h"
#include "board.h"
#include "hb_an547.h"
#include "hb_device.h"
#include "hb_log.h"
#include "hb_port.h"
#include "hb_status.h"
#include "hb_wire.h"
#include "port.h"
#include "semihost.h"

extern uint8_t __arena_start[], __arena_end[];
extern uint32_t __noinit_start[];

/* kept across resets (outside every loaded segment, so QEMU's reset does not clear it) */
typedef struct {
    uint32_t magic;
    uint32_t boots; /* boots since QEMU started: 0 at the first */
} persist;
#define PERSIST_MAGIC 0x48423437u /* "HB47" */
#define PERSIST ((volatile persist *)__noinit_start)

/* ns per tick (Q16) of a SysTick driven at AN547_SYSCLK_HZ; under -icount shift=0 a ns is one
 * executed instruction, so this is instructions per tick */
#define TICK_NS_Q16 ((uint32_t)((1000000000ull << 16) / AN547_SYSCLK_HZ))
_Static_assert((1000000000ull << 16) % AN547_SYSCLK_HZ == 0, "ns per tick must be exact in Q16");

static struct {
    uint32_t boot;
    uint32_t arena_bytes;
    uint16_t max_payload;
    uint8_t icount;
    uint8_t nonce_fixed;
    uint32_t nonce_base; /* --boot-nonce N, or --nonce-seed R */
    uint8_t nonce_seeded;
    uint32_t crash_after; /* 0: never */
    char device_id[HB_MAX_STRING + 1];
    char firmware[HB_MAX_STRING + 1];
} cfg;

/* ---- the HAL (core/hb_port.h) ---------------------------------------------------------- */

void hb_port_write(const uint8_t *data, size_t n) { hb_an547_uart_write(data, n); }

uint64_t hb_port_ticks(void) { return hb_an547_ticks(); }

uint32_t hb_port_tick_ns_q16(void) { return cfg.icount ? TICK_NS_Q16 : 0; }

/* Without -icount QEMU's clock is the host's, neither a board's time nor a count: none. */
uint8_t hb_port_timing_source(void) {
    return cfg.icount ? HB_TIMING_INSTRUCTIONS : HB_TIMING_NONE;
}

uint32_t hb_port_boot_nonce(void) {
    if (cfg.nonce_fixed) return cfg.nonce_base + cfg.boot;
    uint32_t seed = cfg.nonce_seeded ? cfg.nonce_base : sh_time() ^ cm_mix32(sh_clock());
    return cm_mix32(seed ^ cm_mix32(cfg.boot + 0x9E3779B9u));
}

void hb_port_reset(void) {
    hb_an547_uart_flush(); /* the RESET answer is out */
    cm_irq_disable();
    cm_dsb();
    SCS_AIRCR = AIRCR_VECTKEY | AIRCR_SYSRESETREQ;
    cm_dsb();
    for (;;) cm_wfi(); /* QEMU resets the machine: this boot ends here */
}

const char *hb_port_device_id(void) { return cfg.device_id; }
const char *hb_port_firmware(void) { return cfg.firmware; }

/* ---- what the port set (port/port.h, DEVICE_INFO) ---------------------------------------- */

/* The MPS3 board's nominal clock; QEMU models no cache, no watchdog and a UART that never
 * loses a byte on the line (its receive ring cannot overflow: the ISR masks RX instead). */
const hb_port_info_t *hb_port_info(void) {
    static hb_port_info_t info;
    info.cpu_hz = AN547_SYSCLK_HZ;
    info.arena_bytes = cfg.arena_bytes;
    info.uart_baud = AN547_UART_BAUD;
    info.uart_kernel_hz = AN547_UART_PCLK_HZ;
    info.reset_cause = cfg.boot ? HB_RESET_SOFTWARE : HB_RESET_POWER_ON;
    return &info;
}

void hb_port_stage_sync(const uint8_t *p, uint32_t n) { (void)p, (void)n; } /* no D-cache */

/* ---- options ------------------------------------------------------------------------- */

__attribute__((noreturn)) static void refuse(const char *option, const char *cause_fmt,
                                             const hb_arg *args, size_t n_args) {
    char cause[200], line[HB_STATUS_MAX];
    size_t len = hb_format(cause, sizeof cause, cause_fmt, args, n_args);
    hb_arg parts[] = {HB_S(option), HB_SN(cause, len)};
    len = hb_format(line, sizeof line, HB_AN547_MSG_BAD_OPTION, parts, 2);
    sh_line(line, len);
    sh_exit(HB_AN547_EXIT_BAD_OPTION);
}

static uint64_t number(const char *option, const char *text, uint64_t lo, uint64_t hi) {
    uint64_t v = 0;
    int base = 10;
    const char *p = text;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        base = 16;
        p += 2;
    }
    if (!*p) refuse(option, "%s is not a number: give a decimal or 0x-hex integer", &HB_S(text), 1);
    for (; *p; p++) {
        int d = (*p >= '0' && *p <= '9')   ? *p - '0'
                : (*p >= 'a' && *p <= 'f') ? *p - 'a' + 10
                : (*p >= 'A' && *p <= 'F') ? *p - 'A' + 10
                                           : 99;
        if (d >= base || v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
            refuse(option, "%s is not a number: give a decimal or 0x-hex integer", &HB_S(text),
                   1);
        v = v * (uint64_t)base + (uint64_t)d;
    }
    if (v < lo || v > hi) {
        const hb_arg a[] = {HB_S(text), HB_I(lo), HB_I(hi)};
        refuse(option, "%s is outside %d..%d: give a value in that range", a, 3);
    }
    return v;
}

static void copy_string(char *dst, const char *option, const char *text) {
    size_t n = hb_strlen(text);
    if (n > HB_MAX_STRING) {
        const hb_arg a[] = {HB_I(n), HB_I(HB_MAX_STRING)};
        refuse(option, "%d bytes, HELLO carries at most %d: give a shorter string", a, 2);
    }
    memcpy(dst, text, n + 1);
}

/* "--name=value" for option name: the value, or NULL if arg is another option */
static const char *value_of(const char *arg, const char *name) {
    size_t n = hb_strlen(name);
    if (strncmp(arg, name, n) != 0) return NULL;
    if (arg[n] == '=') return arg + n + 1;
    if (arg[n] == 0) refuse(name, "needs a value: write %s=VALUE", &HB_S(name), 1);
    return NULL;
}

static void parse_options(int argc, char **argv) {
    cfg.arena_bytes = (uint32_t)(__arena_end - __arena_start);
    if (cfg.arena_bytes > HB_DEFAULT_ARENA_BYTES) cfg.arena_bytes = HB_DEFAULT_ARENA_BYTES;
    cfg.max_payload = HB_MAX_PAYLOAD;
    memcpy(cfg.device_id, "hilbench-an547", sizeof "hilbench-an547");
    hb_arg version = HB_I(HB_PROTOCOL_VERSION);
    hb_format(cfg.firmware, sizeof cfg.firmware, "hilbench-an547 protocol %d", &version, 1);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if ((v = value_of(a, HB_AN547_OPT_BOOT_NONCE))) {
            cfg.nonce_base = (uint32_t)number(HB_AN547_OPT_BOOT_NONCE, v, 0, 0xFFFFFFFFu);
            cfg.nonce_fixed = 1;
        } else if ((v = value_of(a, HB_AN547_OPT_NONCE_SEED))) {
            cfg.nonce_base = (uint32_t)number(HB_AN547_OPT_NONCE_SEED, v, 0, 0xFFFFFFFFu);
            cfg.nonce_seeded = 1;
        } else if ((v = value_of(a, HB_AN547_OPT_ARENA_BYTES))) {
            uint64_t max = (uint64_t)(__arena_end - __arena_start);
            cfg.arena_bytes = (uint32_t)number(HB_AN547_OPT_ARENA_BYTES, v, 16, max);
            if (cfg.arena_bytes % 16)
                refuse(HB_AN547_OPT_ARENA_BYTES, "%s is not a multiple of 16: round it", &HB_S(v),
                       1);
        } else if ((v = value_of(a, HB_AN547_OPT_MAX_PAYLOAD))) {
            cfg.max_payload = (uint16_t)number(HB_AN547_OPT_MAX_PAYLOAD, v, HB_MIN_DEVICE_PAYLOAD,
                                               HB_MAX_PAYLOAD);
        } else if ((v = value_of(a, HB_AN547_OPT_DEVICE_ID))) {
            copy_string(cfg.device_id, HB_AN547_OPT_DEVICE_ID, v);
        } else if ((v = value_of(a, HB_AN547_OPT_FIRMWARE))) {
            copy_string(cfg.firmware, HB_AN547_OPT_FIRMWARE, v);
        } else if ((v = value_of(a, HB_AN547_OPT_CRASH_AFTER))) {
            cfg.crash_after = (uint32_t)number(HB_AN547_OPT_CRASH_AFTER, v, 1, 0xFFFFFFFFu);
        } else if (strcmp(a, HB_AN547_OPT_ICOUNT) == 0) {
            cfg.icount = 1;
        } else {
            refuse(a, "unknown option: see hilbench/target/an547.py for the options", NULL, 0);
        }
    }
}

/* ---- serving ------------------------------------------------------------------------- */

/* A deliberate bus fault after --crash-after frames: a load from an address nothing decodes. */
static void crash_check(void) {
    if (!cfg.crash_after) return;
    uint32_t frames = 0;
    hb_device_counters(&frames, NULL, NULL, NULL);
    if (frames < cfg.crash_after) return;
    volatile uint32_t *nowhere = (volatile uint32_t *)0xEF000000u;
    (void)*nowhere;
}

static void boot_line(void) {
    char line[HB_STATUS_MAX];
    const hb_arg a[] = {HB_I(cfg.boot), HB_I(cfg.arena_bytes), HB_I(hb_device_max_payload()),
                        HB_S(cfg.icount ? HB_AN547_TIMING_INSTRUCTIONS : HB_AN547_TIMING_NONE)};
    sh_line(line, hb_format(line, sizeof line, HB_AN547_MSG_BOOT, a, 4));
}

int main(int argc, char **argv) {
    volatile persist *p = PERSIST;
    if (p->magic != PERSIST_MAGIC) {
        p->magic = PERSIST_MAGIC;
        p->boots = 0;
    }
    cfg.boot = p->boots++;
    parse_options(argc, argv);

    hb_an547_systick_init();
    hb_an547_uart_init();
    hb_device_init(__arena_start, cfg.arena_bytes, cfg.max_payload);
    /* QEMU keeps no reset flags: the first boot is power-on, a later one followed RESET's
     * SYSRESETREQ (a fault ends QEMU instead) */
    hb_log_boot(cfg.boot ? "software" : "power-on");
    cm_irq_enable();
    boot_line();

    static const cm_serve_ring ring = {hb_an547_uart_peek, hb_an547_uart_consume,
                                       hb_an547_uart_pending, crash_check};
    cm_serve(&ring);
}
