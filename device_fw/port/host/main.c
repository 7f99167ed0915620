/* hilbench-sil: the firmware core as a Linux program (software in the loop).
 *
 *   hilbench-sil --pty                    open a pty, print its path (one line), serve it
 *   hilbench-sil --stdio                  serve stdin/stdout
 *   hilbench-sil --listen HOST:PORT       serve TCP, one connection at a time (port 0: any);
 *                                         prints "listening HOST:PORT"
 *   options: --arena-bytes N  --max-payload N  --boot-nonce N  --device-id S  --firmware S
 *
 * The device state (session, model, data) lives as long as the program, across connections,
 * as a board's does. It stops cleanly on SIGTERM/SIGINT, at the end of stdin (--stdio), and
 * when its parent dies (PR_SET_PDEATHSIG, and a check of getppid() while idle). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "hb_cli.h"
#include "hb_device.h"
#include "hb_log.h"
#include "hb_port.h"
#include "hb_wire.h"
#include "port.h"

#define IDLE_POLL_MS 200 /* how often an idle SIL looks at its parent and the stop flag */
#define READ_CHUNK 65536

static volatile sig_atomic_t stop_requested;
static pid_t parent_at_start;

/* the port's state: where answers go, the identity, the boot nonces */
static int out_fd = -1;
static int out_broken; /* the peer went away mid-write: drop output until the next peer */
static uint8_t *arena;
static uint32_t arena_bytes;
static uint16_t max_payload;
static char device_id[HB_MAX_STRING + 1] = "hilbench-sil";
static char firmware[HB_MAX_STRING + 1];
static int nonce_fixed;
static uint32_t next_nonce;

/* ---- the HAL (core/hb_port.h) ---------------------------------------------------------- */

void hb_port_write(const uint8_t *data, size_t n) {
    while (n && out_fd >= 0 && !out_broken) {
        ssize_t k = write(out_fd, data, n);
        if (k > 0) {
            data += k;
            n -= (size_t)k;
        } else if (k < 0 && errno == EINTR) {
            if (stop_requested) return;
        } else if (k < 0 && errno == EAGAIN) {
            struct pollfd p = {.fd = out_fd, .events = POLLOUT};
            if (poll(&p, 1, IDLE_POLL_MS) < 0 && errno != EINTR) out_broken = 1;
            if (stop_requested) return;
        } else {
            out_broken = 1; /* EPIPE, ECONNRESET, EIO: the host is gone */
        }
    }
}

uint64_t hb_port_ticks(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* decisions.md 10: the SIL reports no device timing (source none, duration 0); the host
 * records its own wall-clock times */
uint32_t hb_port_tick_ns_q16(void) { return 0; }
uint8_t hb_port_timing_source(void) { return HB_TIMING_NONE; }

uint32_t hb_port_boot_nonce(void) {
    if (nonce_fixed) return next_nonce++; /* --boot-nonce N: N, N+1, ... at each boot */
    uint32_t v = 0;
    while (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v)
        if (errno != EINTR) {
            v = (uint32_t)hb_port_ticks() ^ (uint32_t)getpid();
            break;
        }
    return v;
}

void hb_port_reset(void) {
    /* a board resets its core here; the SIL starts the core over in place */
    hb_device_init(arena, arena_bytes, max_payload);
    hb_log_boot("host");
}

const char *hb_port_device_id(void) { return device_id; }
const char *hb_port_firmware(void) { return firmware; }

/* what the port set (port/port.h, DEVICE_INFO): the arena; no clock, cache, UART or watchdog
 * of its own (a socket or a pty carries the bytes) */
const hb_port_info_t *hb_port_info(void) {
    static hb_port_info_t info;
    info.arena_bytes = arena_bytes;
    return &info;
}

void hb_port_stage_sync(const uint8_t *p, uint32_t n) { (void)p, (void)n; }

/* ---- options ------------------------------------------------------------------------- */

const char hb_cli_program[] = "hilbench-sil";

static void copy_string(char *dst, const char *opt, const char *text) {
    if (strlen(text) > HB_MAX_STRING) {
        char cause[128];
        snprintf(cause, sizeof cause, "%s is %zu bytes, HELLO carries at most %d", opt,
                 strlen(text), HB_MAX_STRING);
        hb_cli_usage_error(cause, "give a shorter string");
    }
    strcpy(dst, text);
}

/* ---- serving ------------------------------------------------------------------------- */

static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

static int parent_gone(void) { return getppid() != parent_at_start; }

/* Serve one byte stream until it ends (0: EOF or error) or a stop is requested (1). */
static int serve_fd(int in, int out) {
    static uint8_t buf[READ_CHUNK];
    out_fd = out;
    out_broken = 0;
    for (;;) {
        if (stop_requested || parent_gone()) return 1;
        struct pollfd p = {.fd = in, .events = POLLIN};
        int r = poll(&p, 1, IDLE_POLL_MS);
        if (r < 0 && errno != EINTR) return 0;
        if (r <= 0) continue;
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) return 0; /* EOF, or EIO on a pty whose other side closed */
        hb_device_rx(buf, (size_t)n);
        if (out_broken) return 0;
    }
}

static int serve_pty(void) {
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0) {
        fprintf(stderr, "hilbench-sil: cannot open a pty: %s\n", strerror(errno));
        return 1;
    }
    const char *path = ptsname(master);
    /* Hold the slave open ourselves, in raw mode: without it a read of the master fails (EIO)
     * between two host connections, and the default line discipline would echo our answers
     * back to us. */
    int slave = path ? open(path, O_RDWR | O_NOCTTY) : -1;
    struct termios tio;
    if (slave < 0 || tcgetattr(slave, &tio) < 0) {
        fprintf(stderr, "hilbench-sil: cannot open the pty's slave side: %s\n", strerror(errno));
        return 1;
    }
    cfmakeraw(&tio);
    tcsetattr(slave, TCSANOW, &tio);
    if (tcgetattr(master, &tio) == 0) {
        cfmakeraw(&tio);
        tcsetattr(master, TCSANOW, &tio);
    }
    fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
    printf("%s\n", path);
    fflush(stdout);
    while (!serve_fd(master, master)) {
        /* an error on the master: a host closing its side is not one (our slave stays open) */
        if (stop_requested || parent_gone()) break;
        struct timespec pause = {0, 50 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    close(slave);
    close(master);
    return 0;
}

static int serve_stdio(void) {
    /* stdout stays blocking (its file description may be shared, e.g. a terminal); a signal
     * interrupts a blocked write all the same (no SA_RESTART) */
    serve_fd(STDIN_FILENO, STDOUT_FILENO);
    return 0;
}

static int serve_tcp(const char *spec) {
    char host[256];
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof host)
        hb_cli_usage_error("--listen wants HOST:PORT",
                           "e.g. --listen 127.0.0.1:0 (port 0 picks one)");
    memcpy(host, spec, (size_t)(colon - spec));
    host[colon - spec] = 0;
    uint16_t port = (uint16_t)hb_cli_number("--listen port", colon + 1, 0, 65535);
    char portstr[8];
    snprintf(portstr, sizeof portstr, "%u", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, portstr, &hints, &res);
    if (rc != 0) {
        char cause[384];
        snprintf(cause, sizeof cause, "--listen %.256s: %s", spec, gai_strerror(rc));
        hb_cli_usage_error(cause, "give an address of this machine, e.g. 127.0.0.1:0");
    }
    int srv = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
    int one = 1;
    setsockopt(srv, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (srv < 0 || bind(srv, res->ai_addr, res->ai_addrlen) < 0 || listen(srv, 1) < 0) {
        fprintf(stderr, "hilbench-sil: cannot listen on %s: %s: pick a free port or 0\n", spec,
                strerror(errno));
        freeaddrinfo(res);
        return 1;
    }
    freeaddrinfo(res);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(srv, (struct sockaddr *)&ss, &sl);
    char name[INET6_ADDRSTRLEN] = "?";
    unsigned bound_port = 0;
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, name, sizeof name);
        bound_port = ntohs(a->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, name, sizeof name);
        bound_port = ntohs(a->sin6_port);
    }
    printf("listening %s:%u\n", name, bound_port);
    fflush(stdout);
    while (!stop_requested && !parent_gone()) {
        struct pollfd p = {.fd = srv, .events = POLLIN};
        if (poll(&p, 1, IDLE_POLL_MS) <= 0) continue;
        int conn = accept(srv, NULL, NULL);
        if (conn < 0) continue;
        setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fcntl(conn, F_SETFL, fcntl(conn, F_GETFL) | O_NONBLOCK);
        serve_fd(conn, conn); /* one connection at a time; the device outlives it */
        close(conn);
        out_fd = -1;
    }
    close(srv);
    return 0;
}

int main(int argc, char **argv) {
    enum { OPT_PTY = 1, OPT_STDIO, OPT_LISTEN, OPT_ARENA, OPT_MAXP, OPT_NONCE, OPT_ID, OPT_FW };
    static const struct option opts[] = {
        {"pty", no_argument, NULL, OPT_PTY},
        {"stdio", no_argument, NULL, OPT_STDIO},
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"arena-bytes", required_argument, NULL, OPT_ARENA},
        {"max-payload", required_argument, NULL, OPT_MAXP},
        {"boot-nonce", required_argument, NULL, OPT_NONCE},
        {"device-id", required_argument, NULL, OPT_ID},
        {"firmware", required_argument, NULL, OPT_FW},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int mode = 0;
    const char *listen_spec = NULL;
    uint64_t want_arena = HB_DEFAULT_ARENA_BYTES;
    max_payload = HB_MAX_PAYLOAD;
    snprintf(firmware, sizeof firmware, "hilbench-sil protocol %d", HB_PROTOCOL_VERSION);
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case OPT_PTY:
        case OPT_STDIO:
        case OPT_LISTEN:
            if (mode && mode != c)
                hb_cli_usage_error("--pty, --stdio and --listen exclude each other",
                                   "give one of them");
            mode = c;
            if (c == OPT_LISTEN) listen_spec = optarg;
            break;
        case OPT_ARENA:
            want_arena = hb_cli_number("--arena-bytes", optarg, 16, 0xFFFFFFF0u);
            if (want_arena % 16)
                hb_cli_usage_error("--arena-bytes must be a multiple of 16",
                                   "round it (the arena's regions are 16-byte aligned)");
            break;
        case OPT_MAXP:
            max_payload = (uint16_t)hb_cli_number("--max-payload", optarg, HB_MIN_DEVICE_PAYLOAD,
                                                  HB_MAX_PAYLOAD);
            break;
        case OPT_NONCE:
            next_nonce = (uint32_t)hb_cli_number("--boot-nonce", optarg, 0, 0xFFFFFFFFu);
            nonce_fixed = 1;
            break;
        case OPT_ID: copy_string(device_id, "--device-id", optarg); break;
        case OPT_FW: copy_string(firmware, "--firmware", optarg); break;
        case 'h':
            printf("usage: hilbench-sil (--pty | --stdio | --listen HOST:PORT) [--arena-bytes N]"
                   " [--max-payload N] [--boot-nonce N] [--device-id S] [--firmware S]\n");
            return 0;
        default: {
            char cause[160];
            const char *bad = argv[optind - 1] ? argv[optind - 1] : "?";
            if (optopt)
                snprintf(cause, sizeof cause, "option %.60s needs a value", bad);
            else
                snprintf(cause, sizeof cause, "unknown option %.60s", bad);
            hb_cli_usage_error(cause, "see hilbench-sil --help");
        }
        }
    }
    if (optind < argc) {
        char cause[160];
        snprintf(cause, sizeof cause, "unexpected argument %.60s", argv[optind]);
        hb_cli_usage_error(cause, "options only; see hilbench-sil --help");
    }
    if (!mode) hb_cli_usage_error("no link given", "add --pty, --stdio or --listen HOST:PORT");

    parent_at_start = getppid();
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (parent_gone()) return 0; /* the parent died before prctl took effect */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: a blocked poll/read returns EINTR */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    arena_bytes = (uint32_t)want_arena;
    void *mem = mmap(NULL, arena_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    if (mem == MAP_FAILED) {
        fprintf(stderr, "hilbench-sil: cannot map %u bytes of arena: %s: give a smaller "
                        "--arena-bytes\n", arena_bytes, strerror(errno));
        return 1;
    }
    arena = mem;
    hb_device_init(arena, arena_bytes, max_payload);
    hb_log_boot("host"); /* the SIL has no reset cause of its own */

    int rc = mode == OPT_PTY ? serve_pty() : mode == OPT_STDIO ? serve_stdio()
                                                               : serve_tcp(listen_spec);
    munmap(mem, arena_bytes);
    return rc;
}
