/* LD_PRELOAD for Apache ZooKeeper under the nemesis: a JVM's outgoing TCP connections to
 * 127.0.0.0/8 leave from the address the server listens on, as zkcompat's test hook
 * ZKCOMPAT_TEST_BIND_PEER_SOURCE makes its own do (zkcompat/peer/links.py).
 *
 * Why: Linux gives an unbound socket connecting to 127.0.0.K the source 127.0.0.1, so every
 * ZooKeeper's quorum and election links would come from 127.0.0.1 and the nemesis's
 * per-address nft rules (net.py) could not tell them apart. ZooKeeper 3.8 has no setting
 * for the source address of its peer links.
 *
 * The server's own address is the first specific 127.x address it binds (ZooKeeper binds
 * its client port on clientPortAddress, then its AdminServer and election port, all on
 * the member's host, before it connects to any peer). It does nothing in a process that is
 * not java (the variable reaches the ensemble command and zkcompat too), to a socket
 * already bound, or before that first bind. It says once, on stderr (server.log), which
 * address it binds: the runner waits for that line.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

static int (*real_bind)(int, const struct sockaddr *, socklen_t);
static int (*real_connect)(int, const struct sockaddr *, socklen_t);
static int active = -1; /* -1: not decided yet */
static volatile in_addr_t own; /* network order; 0 until the first 127.x bind */
static volatile int said;

extern char *program_invocation_short_name;

static int is_loopback(in_addr_t a) { return (ntohl(a) >> 24) == 127; }

static void setup(void) {
    if (!real_bind) real_bind = dlsym(RTLD_NEXT, "bind");
    if (!real_connect) real_connect = dlsym(RTLD_NEXT, "connect");
    if (active < 0) active = strcmp(program_invocation_short_name, "java") == 0;
}

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    setup();
    if (active && !own && addr && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        in_addr_t a = ((const struct sockaddr_in *)addr)->sin_addr.s_addr;
        if (is_loopback(a)) own = a;
    }
    return real_bind(fd, addr, len);
}

int connect(int fd, const struct sockaddr *addr, socklen_t len) {
    setup();
    if (active && own && addr && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)
        && is_loopback(((const struct sockaddr_in *)addr)->sin_addr.s_addr)) {
        struct sockaddr_in mine;
        socklen_t mine_len = sizeof mine;
        if (getsockname(fd, (struct sockaddr *)&mine, &mine_len) == 0 && mine.sin_family == AF_INET
            && mine.sin_port == 0 && mine.sin_addr.s_addr == INADDR_ANY) {
            struct sockaddr_in source = {.sin_family = AF_INET, .sin_port = 0};
            source.sin_addr.s_addr = own;
            int saved = errno;
            if (real_bind(fd, (struct sockaddr *)&source, sizeof source) == 0 && !said) {
                char text[INET_ADDRSTRLEN];
                said = 1;
                unsigned char *b = (unsigned char *)&source.sin_addr.s_addr;
                snprintf(text, sizeof text, "%u.%u.%u.%u", b[0], b[1], b[2], b[3]);
                fprintf(stderr, "nemesis_bind_source: outgoing links leave from host=%s\n", text);
                fflush(stderr);
            }
            errno = saved;
        }
    }
    return real_connect(fd, addr, len);
}
