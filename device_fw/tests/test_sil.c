/* The SIL program (port/host/main.c, build/host/hilbench-sil or $HB_SIL) as a user runs it:
 * its options (a bad one is one line naming cause and fix, exit 2), the three links (--stdio,
 * --pty, --listen), a device state that outlives connections, a clean exit on SIGTERM and
 * SIGINT, and its end when its parent dies. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "hb_bytes.h"
#include "hb_frame.h"
#include "hb_msg.h"

static const char *sil;

typedef struct {
    pid_t pid;
    int in, out, err; /* our ends: its stdin, stdout, stderr */
} child;

static child spawn(char *const argv[]) {
    int pin[2], pout[2], perr[2];
    child c = {-1, -1, -1, -1};
    if (pipe(pin) || pipe(pout) || pipe(perr)) return c;
    c.pid = fork();
    if (c.pid == 0) {
        dup2(pin[0], 0);
        dup2(pout[1], 1);
        dup2(perr[1], 2);
        close(pin[1]);
        close(pout[0]);
        close(perr[0]);
        execv(sil, argv);
        _exit(127);
    }
    close(pin[0]);
    close(pout[1]);
    close(perr[1]);
    c.in = pin[1];
    c.out = pout[0];
    c.err = perr[0];
    return c;
}

/* read up to n bytes, waiting at most ms milliseconds for each piece; stop early at the end
 * of a line (line = 1) or of a frame (line = 2: a 0x00 after other bytes) */
/* line 1: up to a newline; line 2: up to the end of a frame; line 4: of two frames (a boot
 * banner's LOG frame, then the answer); 0: until n bytes or silence */
static size_t read_some(int fd, uint8_t *buf, size_t n, int ms, int line) {
    size_t got = 0;
    int ends = 0;
    while (got < n) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, ms) <= 0) break;
        ssize_t k = read(fd, buf + got, line == 1 ? 1 : n - got);
        if (k <= 0) break;
        for (size_t i = got; i < got + (size_t)k; i++) /* a 0 after a frame's bytes ends it */
            if (buf[i] == 0 && i > 0 && buf[i - 1] != 0) ends++;
        got += (size_t)k;
        if (line == 1 && buf[got - 1] == '\n') break;
        if (line >= 2 && ends >= line / 2) break;
    }
    return got;
}

static int wait_exit(pid_t pid, int ms) {
    for (int t = 0; t < ms; t += 10) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        struct timespec d = {0, 10 * 1000 * 1000};
        nanosleep(&d, NULL);
    }
    return -1;
}

static void close_child(child *c) {
    if (c->in >= 0) close(c->in);
    if (c->out >= 0) close(c->out);
    if (c->err >= 0) close(c->err);
}

/* HELLO with `token`, seq; the answer's boot nonce (0 if none came) */
static uint8_t wire[HB_MAX_ENCODED_LEN + 2], body[HB_MAX_PAYLOAD + HB_FRAME_OVERHEAD];

static size_t request(uint8_t type, uint16_t seq, const uint8_t *p, uint16_t n) {
    if (n) memcpy(body + HB_HEADER_SIZE, p, n);
    return hb_frame_encode(wire, body, HB_PROTOCOL_VERSION, type, seq, n);
}

static size_t hello(uint16_t seq, uint32_t token) {
    uint8_t p[HB_SIZE_HELLO];
    hb_msg_put(p, HB_F_HELLO_HOST_PROTOCOL_VERSION, HB_PROTOCOL_VERSION);
    hb_msg_put(p, HB_F_HELLO_SESSION, token);
    return request(HB_TYPE_HELLO, seq, p, HB_SIZE_HELLO);
}

/* the first frame in buf: its type and payload copy; 0 if none */
static uint8_t rx_buf[HB_MAX_ENCODED_LEN];
static int log_frames; /* LOG frames first_frame stepped over */

static int first_frame(const uint8_t *buf, size_t n, hb_frame *f) {
    hb_rx rx;
    hb_frame_rx_init(&rx, rx_buf, HB_MAX_PAYLOAD);
    size_t at = 0;
    while (at < n) {
        hb_rx_event ev;
        hb_problem kind;
        at += hb_frame_rx_feed(&rx, buf + at, n - at, &ev, f, &kind);
        if (ev == HB_RX_FRAME && f->type == HB_TYPE_LOG && f->seq == 0) {
            log_frames++; /* the SIL's own words (its boot banner): a host takes them aside */
            continue;
        }
        if (ev == HB_RX_FRAME) return 1;
    }
    return 0;
}

/* bytes from fd until they hold a frame that is not the SIL's own words (a banner may come
 * first, in a read of its own on a loaded host): 1 with it in f, 0 after ms of silence */
static int read_answer(int fd, uint8_t *buf, size_t n, int ms, hb_frame *f) {
    size_t got = 0;
    for (int reads = 0; reads < 8 && got < n; reads++) {
        size_t k = read_some(fd, buf + got, n - got, ms, 2);
        if (k == 0) return 0;
        got += k;
        if (first_frame(buf, got, f)) return 1;
    }
    return 0;
}

static void bad_option(char *const argv[], const char *needle) {
    child c = spawn(argv);
    uint8_t err[512] = {0};
    size_t n = read_some(c.err, err, sizeof err - 1, 3000, 0);
    int rc = wait_exit(c.pid, 3000);
    int lines = 0;
    for (size_t i = 0; i < n; i++) lines += err[i] == '\n';
    CHECK(rc == 2, "%s: exit %d", argv[1], rc);
    CHECK(lines == 1 && strstr((char *)err, needle) && strstr((char *)err, ": "),
          "%s: stderr '%s'", argv[1], err);
    close_child(&c);
}

static void test_options(void) {
    bad_option((char *[]){"sil", NULL}, "add --pty, --stdio or --listen");
    bad_option((char *[]){"sil", "--pty", "--stdio", NULL}, "exclude each other");
    bad_option((char *[]){"sil", "--stdio", "--max-payload", "100", NULL}, "outside 256..4096");
    bad_option((char *[]){"sil", "--stdio", "--max-payload", "x1", NULL}, "is not a number");
    bad_option((char *[]){"sil", "--stdio", "--arena-bytes", "1000", NULL}, "multiple of 16");
    bad_option((char *[]){"sil", "--stdio", "--bogus", NULL}, "unknown option --bogus");
    bad_option((char *[]){"sil", "--stdio", "--boot-nonce", NULL}, "needs a value");
    char long_id[HB_MAX_STRING + 2];
    memset(long_id, 'x', sizeof long_id - 1);
    long_id[sizeof long_id - 1] = 0;
    bad_option((char *[]){"sil", "--stdio", "--device-id", long_id, NULL}, "at most 64");
    bad_option((char *[]){"sil", "--listen", "no-port-here", NULL}, "HOST:PORT");
}

static void test_stdio(void) {
    child c = spawn((char *[]){"sil", "--stdio", "--boot-nonce", "0x100", "--device-id",
                               "sil-test", "--max-payload", "1024", NULL});
    size_t n = hello(5, 77);
    CHECK(write(c.in, wire, n) == (ssize_t)n, "write");
    uint8_t buf[512];
    size_t got = read_some(c.out, buf, sizeof buf, 3000, 4); /* the boot banner, the answer */
    hb_frame f;
    CHECK(first_frame(buf, got, &f) && f.type == (HB_TYPE_HELLO | HB_RESPONSE_BIT) && f.seq == 5,
          "stdio HELLO: %zu bytes", got);
    if (got && f.type == (HB_TYPE_HELLO | HB_RESPONSE_BIT)) {
        CHECK(hb_msg_u32(f.payload, HB_F_HELLO_R_BOOT_NONCE) == 0x100, "nonce");
        CHECK(hb_msg_u16(f.payload, HB_F_HELLO_R_MAX_PAYLOAD) == 1024, "max_payload");
        CHECK((hb_msg_u32(f.payload, HB_F_HELLO_R_CAPABILITIES) &
               (HB_CAP_CYCLE_COUNTER | HB_CAP_MODELED_TIMING)) == 0,
              "the SIL reports no device timing");
        CHECK(hb_msg_u8(f.payload, HB_F_HELLO_R_DEVICE_ID_LEN) == 8 &&
                  !memcmp(hb_msg_ptr(f.payload, HB_F_HELLO_R_DEVICE_ID), "sil-test", 8),
              "device id");
    }
    /* a RESET: the next boot's nonce is 0x101 */
    n = request(HB_TYPE_RESET, 6, NULL, 0);
    CHECK(write(c.in, wire, n) == (ssize_t)n, "write");
    got = read_some(c.out, buf, sizeof buf, 3000, 2);
    n = hello(7, 77);
    CHECK(write(c.in, wire, n) == (ssize_t)n, "write");
    got = read_some(c.out, buf, sizeof buf, 3000, 4); /* the new boot's banner, the answer */
    CHECK(first_frame(buf, got, &f) && hb_msg_u32(f.payload, HB_F_HELLO_R_BOOT_NONCE) == 0x101,
          "nonce after RESET");
    close(c.in); /* the end of stdin ends it */
    c.in = -1;
    CHECK(wait_exit(c.pid, 3000) == 0, "stdio: exit at the end of input");
    close_child(&c);
}

static void test_pty(void) {
    child c = spawn((char *[]){"sil", "--pty", NULL});
    char path[256] = {0};
    read_some(c.out, (uint8_t *)path, sizeof path - 1, 3000, 1);
    path[strcspn(path, "\n")] = 0;
    CHECK(path[0] == '/', "pty path '%s'", path);
    for (int round = 0; round < 2 && path[0] == '/'; round++) { /* open, use, close, twice */
        int fd = open(path, O_RDWR | O_NOCTTY);
        CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
        if (fd < 0) break;
        struct termios tio;
        tcgetattr(fd, &tio);
        cfmakeraw(&tio);
        tcsetattr(fd, TCSANOW, &tio);
        size_t n = hello((uint16_t)(10 + round), 1234);
        CHECK(write(fd, wire, n) == (ssize_t)n, "write");
        uint8_t buf[512];
        hb_frame f;
        CHECK(read_answer(fd, buf, sizeof buf, 3000, &f) && f.seq == 10 + round, "pty round %d",
              round);
        /* nothing of ours comes back as input: a second read finds nothing */
        CHECK(read_some(fd, buf, sizeof buf, 200, 0) == 0, "echo");
        close(fd);
    }
    kill(c.pid, SIGTERM);
    CHECK(wait_exit(c.pid, 3000) == 0, "pty: SIGTERM ends it cleanly");
    close_child(&c);
}

static int connect_to(uint16_t port) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
        close(s);
        return -1;
    }
    return s;
}

static void test_tcp(void) {
    child c = spawn((char *[]){"sil", "--listen", "127.0.0.1:0", NULL});
    char line[256] = {0};
    read_some(c.out, (uint8_t *)line, sizeof line - 1, 3000, 1);
    unsigned port = 0;
    CHECK(sscanf(line, "listening 127.0.0.1:%u", &port) == 1 && port > 0, "'%s'", line);
    /* connection 1: a session and the first chunk of an upload */
    int s = connect_to((uint16_t)port);
    CHECK(s >= 0, "connect");
    uint8_t buf[512], p[64];
    hb_frame f;
    size_t n = hello(1, 99);
    CHECK(write(s, wire, n) == (ssize_t)n, "write");
    read_some(s, buf, sizeof buf, 3000, 4); /* the boot banner, then HELLO's answer */
    hb_msg_put(p, HB_F_LOAD_DATA_SLOT, 1);
    hb_msg_put(p, HB_F_LOAD_DATA_TOTAL_LEN, 20);
    hb_msg_put(p, HB_F_LOAD_DATA_OFFSET, 0);
    memset(hb_msg_wptr(p, HB_F_LOAD_DATA_CHUNK), 0, 10);
    n = request(HB_TYPE_LOAD_DATA, 2, p, HB_MIN_SIZE_LOAD_DATA + 10);
    CHECK(write(s, wire, n) == (ssize_t)n, "write");
    size_t got = read_some(s, buf, sizeof buf, 3000, 2);
    CHECK(first_frame(buf, got, &f) && f.type == (HB_TYPE_LOAD_DATA | HB_RESPONSE_BIT),
          "first chunk");
    close(s);
    /* connection 2: the same session goes on; the upload continues at offset 10 */
    s = connect_to((uint16_t)port);
    CHECK(s >= 0, "reconnect");
    hb_msg_put(p, HB_F_LOAD_DATA_OFFSET, 10);
    n = request(HB_TYPE_LOAD_DATA, 3, p, HB_MIN_SIZE_LOAD_DATA + 10);
    CHECK(write(s, wire, n) == (ssize_t)n, "write");
    got = read_some(s, buf, sizeof buf, 3000, 2);
    CHECK(first_frame(buf, got, &f) && f.seq == 3, "second connection: %zu bytes", got);
    if (got && f.type == HB_TYPE_ERROR) /* 20 zero bytes: a blob with n_items 0 */
        CHECK(hb_msg_u16(f.payload, HB_F_ERROR_CODE) == HB_ERR_BAD_ARGUMENT,
              "the upload completed and its blob was checked");
    else
        CHECK(0, "type 0x%02x", f.type);
    close(s);
    kill(c.pid, SIGINT);
    CHECK(wait_exit(c.pid, 3000) == 0, "tcp: SIGINT ends it cleanly");
    close_child(&c);
}

static void test_parent_death(void) {
    /* a middle process starts the SIL and exits: the SIL must go too */
    int pids[2];
    CHECK(pipe(pids) == 0, "pipe");
    pid_t middle = fork();
    if (middle == 0) {
        pid_t p = fork();
        if (p == 0) {
            int null = open("/dev/null", O_RDWR);
            dup2(null, 0);
            dup2(null, 1);
            execv(sil, (char *[]){"sil", "--pty", NULL});
            _exit(127);
        }
        if (write(pids[1], &p, sizeof p) != sizeof p) _exit(1);
        struct timespec d = {0, 300 * 1000 * 1000}; /* let it start */
        nanosleep(&d, NULL);
        _exit(0);
    }
    pid_t grandchild = 0;
    CHECK(read(pids[0], &grandchild, sizeof grandchild) == sizeof grandchild, "pid");
    waitpid(middle, NULL, 0);
    int gone = 0;
    for (int t = 0; t < 300 && !gone; t++) { /* up to 3 s */
        char stat_path[64], state = 0;
        snprintf(stat_path, sizeof stat_path, "/proc/%d/stat", (int)grandchild);
        FILE *f = fopen(stat_path, "r");
        if (!f) gone = 1;
        else {
            if (fscanf(f, "%*d %*s %c", &state) != 1 || state == 'Z') gone = 1;
            fclose(f);
        }
        struct timespec d = {0, 10 * 1000 * 1000};
        if (!gone) nanosleep(&d, NULL);
    }
    CHECK(gone, "the SIL outlived its parent");
    if (!gone) kill(grandchild, SIGKILL);
    close(pids[0]);
    close(pids[1]);
}

int main(void) {
    sil = getenv("HB_SIL") ? getenv("HB_SIL") : "build/host/hilbench-sil";
    if (access(sil, X_OK) != 0) {
        fprintf(stderr, "test_sil: no SIL program at %s (make host, or set HB_SIL)\n", sil);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    test_options();
    test_stdio();
    test_pty();
    test_tcp();
    test_parent_death();
    CHECK(log_frames >= 2, "boot banners seen: %d (one per session after a boot)", log_frames);
    TEST_MAIN_END("test_sil");
}
