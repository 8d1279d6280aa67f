// benches/standin.c: a tiny user-space stand-in for a VMM, and a frame generator.
//
// Compiled at run time by benches/run.sh (gcc -O2 -pthread) into a temp dir.
//
// echo and fwd stop after SECONDS or at EOF on stdin, whichever comes first.
//
//   standin echo tap NAME SECONDS     open TAP NAME (IFF_TAP|IFF_NO_PI|IFF_VNET_HDR)
//                                     like a VMM does, echo every frame back; a NAME
//                                     starting with '/' is a macvtap's device node
//   standin echo pkt IFNAME SECONDS   same loop on an AF_PACKET socket bound to
//                                     IFNAME (the bare-veth baseline: no TAP, no wiring)
//   standin fwd tap NAME IFNAME SECONDS
//   standin fwd pkt IFNAME1 IFNAME2 SECONDS
//                                     forward frames both ways between the TAP (or a
//                                     packet socket) and a packet socket on IFNAME, both
//                                     with a virtio-net header, so GSO/TSO frames pass
//                                     through whole (for the TCP test)
//   standin hold tap NAME SECONDS
//   standin hold pkt IFNAME SECONDS   open the TAP (or packet socket) as echo does and
//                                     never read it: frames sent to it go through the
//                                     whole wiring and are dropped at its full queue
//   standin echo4 tap NAME SECONDS GUESTMAC
//                                     a routed (l3) guest with the MAC GUESTMAC: answers
//                                     ARP requests (for any IPv4 address) and echoes
//                                     gen4's IPv4/UDP frames back, MACs, IPv4 addresses
//                                     and UDP ports swapped (the IPv4 header and UDP
//                                     checksums are sums, so the swap keeps them valid)
//   standin hold4 tap NAME SECONDS GUESTMAC
//                                     hold for a routed guest: reads (and drops) frames
//                                     only until it has answered one ARP request, so that
//                                     the netns has the guest's MAC; then never reads
//   standin rss CMD ARGS...            run CMD, print its peak RSS (KiB) on stderr
//                                     (fallback when /usr/bin/time is missing)
//   standin gen IFNAME SECONDS SIZE DSTMAC
//                                     blast SIZE-byte Ethernet frames (ethertype 0x88b5)
//                                     out of IFNAME, count the ones echoed back
//   standin gen4 IFNAME SECONDS SIZE DSTMAC SRCIP DSTIP
//                                     the same with SIZE-byte IPv4/UDP frames from SRCIP
//                                     port 40000 to DSTIP port 9000 (TTL 64, valid IPv4
//                                     and UDP checksums); counts the UDP frames that come
//                                     back from port 9000 to port 40000
//
// Every mode prints one line of JSON on stdout (echo and gen: with cpu_s, the
// process's CPU time).  The echo loop is the same code
// for the TAP fd and the packet socket, so that only the wiring differs.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_packet.h>
#include <linux/if_tun.h>
#include <linux/virtio_net.h>
#include <net/ethernet.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ETH_P_BENCH 0x88b5
#define GEN4_SPORT 40000  // gen4's UDP source port
#define GEN4_DPORT 9000   // gen4's UDP destination port: what echo4 answers
extern unsigned int if_nametoindex(const char *ifname);  // <net/if.h> clashes with <linux/if.h>
#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* this process's CPU time, user + system, all threads: with tick accounting the
 * softirq work done in its context (the wiring, for frames it sends) counts too */
static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void die(const char *what) {
    fprintf(stderr, "standin: %s: %s\n", what, strerror(errno));
    exit(1);
}

// NAME is a TAP name, or (starting with '/') a macvtap's character device node.
static int open_tap(const char *name, int offload) {
    int macvtap = name[0] == '/';
    int fd = open(macvtap ? name : "/dev/net/tun", O_RDWR | O_CLOEXEC);
    if (fd < 0) die(macvtap ? "open macvtap node" : "open /dev/net/tun");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    if (!macvtap) strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) die("TUNSETIFF");
    int hdr = sizeof(struct virtio_net_hdr);
    if (ioctl(fd, TUNSETVNETHDRSZ, &hdr) < 0) die("TUNSETVNETHDRSZ");
    if (offload && ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6) < 0)
        die("TUNSETOFFLOAD");
    return fd;
}

static int open_pkt(const char *ifname, int proto, int vnet) {
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(proto));
    if (fd < 0) die("socket(AF_PACKET)");
    int one = 1;
    setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
    if (vnet && setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) < 0)
        die("PACKET_VNET_HDR");
    int buf = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    struct sockaddr_ll sll;
    memset(&sll, 0, sizeof sll);
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(proto);
    sll.sll_ifindex = if_nametoindex(ifname);
    if (!sll.sll_ifindex) die("if_nametoindex");
    if (bind(fd, (struct sockaddr *)&sll, sizeof sll) < 0) die("bind(AF_PACKET)");
    return fd;
}

static int parse_mac(const char *s, unsigned char mac[6]) {
    unsigned int m[6];
    if (sscanf(s, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) != 6) return -1;
    for (int i = 0; i < 6; i++) mac[i] = m[i];
    return 0;
}

static void swap_bytes(unsigned char *a, unsigned char *b, size_t n) {
    unsigned char t[16];
    memcpy(t, a, n);
    memcpy(a, b, n);
    memcpy(b, t, n);
}

// ETH (a frame of N bytes) is an ARP request: turn it into the reply of a guest
// with the MAC MAC that owns the address asked for. 0 when it is not one.
static int arp_reply(unsigned char *eth, size_t n, const unsigned char mac[6]) {
    if (n < 42 || eth[12] != 0x08 || eth[13] != 0x06) return 0;
    unsigned char *a = eth + 14;  // htype 1, ptype 0x0800, hlen 6, plen 4, op
    if (a[0] != 0 || a[1] != 1 || a[2] != 8 || a[3] != 0 || a[4] != 6 || a[5] != 4 || a[6] != 0 ||
        a[7] != 1)
        return 0;
    unsigned char asked[4];
    memcpy(asked, a + 24, 4);
    memcpy(eth, eth + 6, 6);   // to the asker
    memcpy(eth + 6, mac, 6);
    a[7] = 2;                  // reply
    memcpy(a + 18, a + 8, 10); // target = the asker's MAC and address
    memcpy(a + 8, mac, 6);     // sender = this guest,
    memcpy(a + 14, asked, 4);  // with the address asked for
    return 1;
}

// ETH (N bytes) is one of gen4's frames: IPv4, no fragment, UDP to GEN4_DPORT.
// Returns the UDP header's offset in ETH, else 0.
static size_t gen4_udp(const unsigned char *eth, size_t n, int dport) {
    if (n < 14 + 20 + 8 || eth[12] != 0x08 || eth[13] != 0x00) return 0;
    const unsigned char *ip = eth + 14;
    size_t ihl = (ip[0] & 0x0f) * 4;
    if ((ip[0] >> 4) != 4 || ihl < 20 || ip[9] != 17 || n < 14 + ihl + 8) return 0;
    if (((ip[6] & 0x1f) | ip[7]) != 0) return 0;  // a fragment
    const unsigned char *udp = ip + ihl;
    if (((udp[2] << 8) | udp[3]) != dport) return 0;
    return 14 + ihl;
}

// The stand-in's loop: read a frame, swap the MACs, write it back. With IP
// (echo4), a routed guest's: answer ARP, echo gen4's frames with the IPv4
// addresses and UDP ports swapped too.
static int echo_loop(int argc, char **argv, int ip) {
    if (argc < (ip ? 6 : 5)) return 2;
    int tap = !strcmp(argv[2], "tap");
    unsigned char guest[6];
    if (ip && (!tap || parse_mac(argv[5], guest))) return 2;
    int fd = tap ? open_tap(argv[3], 0) : open_pkt(argv[3], ETH_P_BENCH, 0);
    size_t hdr = tap ? sizeof(struct virtio_net_hdr) : 0;
    double secs = atof(argv[4]);
    unsigned char buf[65536];
    unsigned long rx = 0, tx = 0, bytes = 0, arp = 0;
    double start = now(), first = 0, last = 0;
    // Runs until SECONDS pass or stdin reaches EOF (the driver closes it when done).
    struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = 0, .events = POLLIN}};
    printf("{\"ready\":true}\n");
    fflush(stdout);
    while (now() - start < secs) {
        if (poll(p, 2, 100) <= 0) continue;
        if (p[1].revents) break;
        if (!(p[0].revents & POLLIN)) continue;
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            die("read");
        }
        if ((size_t)n < hdr + 14) continue;
        unsigned char *eth = buf + hdr;
        size_t udp = 0;
        if (ip) {
            if (arp_reply(eth, n - hdr, guest)) {
                memset(buf, 0, hdr);  // no offload flags on a frame made here
                if (write(fd, buf, n) == n) arp++;
                continue;
            }
            if (!(udp = gen4_udp(eth, n - hdr, GEN4_DPORT))) continue;  // other traffic of the netns
        } else {
            uint16_t type = (eth[12] << 8) | eth[13];
            if (type != ETH_P_BENCH) continue;  // ignore IPv6 RS/ND noise
        }
        if (!first) first = now();
        last = now();
        rx++;
        bytes += n - hdr;
        swap_bytes(eth, eth + 6, 6);
        if (ip) {
            swap_bytes(eth + 14 + 12, eth + 14 + 16, 4);  // IPv4 source, destination
            swap_bytes(eth + udp, eth + udp + 2, 2);      // UDP ports
        }
        if (write(fd, buf, n) == n) tx++;
    }
    printf("{\"rx\":%lu,\"tx\":%lu,\"bytes\":%lu,\"arp_replies\":%lu,\"active_s\":%.6f,"
           "\"cpu_s\":%.6f}\n", rx, tx, bytes, arp, last > first ? last - first : 0.0, cpu_s());
    return 0;
}

static int echo(int argc, char **argv) { return echo_loop(argc, argv, 0); }
static int echo4(int argc, char **argv) { return echo_loop(argc, argv, 1); }

// Forwarder: two fds, both carrying a virtio_net_hdr, one thread per direction.
struct fwd_dir {
    int from, to;
    atomic_ulong frames;
    volatile int stop;
};

static void *fwd_loop(void *arg) {
    struct fwd_dir *d = arg;
    static __thread unsigned char buf[65536 + 64];
    struct pollfd p = {.fd = d->from, .events = POLLIN};
    while (!d->stop) {
        if (poll(&p, 1, 100) <= 0) continue;
        ssize_t n = read(d->from, buf, sizeof buf);
        if (n <= 0) continue;
        if (write(d->to, buf, n) == n) atomic_fetch_add(&d->frames, 1);
    }
    return NULL;
}

static int fwd(int argc, char **argv) {
    if (argc < 6) return 2;
    int tap = !strcmp(argv[2], "tap");
    int a = tap ? open_tap(argv[3], 1) : open_pkt(argv[3], ETH_P_ALL, 1);
    int b = open_pkt(argv[4], ETH_P_ALL, 1);
    double secs = atof(argv[5]);
    struct fwd_dir d1 = {.from = a, .to = b}, d2 = {.from = b, .to = a};
    pthread_t t1, t2;
    pthread_create(&t1, NULL, fwd_loop, &d1);
    pthread_create(&t2, NULL, fwd_loop, &d2);
    printf("{\"ready\":true}\n");
    fflush(stdout);
    double start = now();
    struct pollfd in = {.fd = 0, .events = POLLIN};
    while (now() - start < secs)
        if (poll(&in, 1, 50) > 0) break;  // stdin EOF: the driver is done
    d1.stop = d2.stop = 1;
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    printf("{\"a_to_b\":%lu,\"b_to_a\":%lu}\n", (unsigned long)d1.frames,
           (unsigned long)d2.frames);
    return 0;
}

// Generator: a sender thread and a receiver counting echoed frames.
static atomic_ulong g_rx;
static volatile int g_stop;
static int g_fd;
static int g_ip;  // gen4: IPv4/UDP frames

// The Internet checksum of N bytes (even N) added to SUM, folded, not inverted.
static uint32_t csum_add(uint32_t sum, const unsigned char *p, size_t n) {
    for (size_t i = 0; i + 1 < n; i += 2) sum += (p[i] << 8) | p[i + 1];
    if (n & 1) sum += p[n - 1] << 8;
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return sum;
}

static void *gen_rx(void *arg) {
    (void)arg;
    unsigned char buf[65536];
    struct pollfd p = {.fd = g_fd, .events = POLLIN};
    while (!g_stop) {
        if (poll(&p, 1, 50) <= 0) continue;
        struct sockaddr_ll from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(g_fd, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
        if (n <= 0) continue;
        if (from.sll_pkttype == PACKET_OUTGOING) continue;
        if (g_ip) {  // only gen4's frames coming back: from port 9000 to port 40000
            size_t u = gen4_udp(buf, n, GEN4_SPORT);
            if (!u || ((buf[u] << 8) | buf[u + 1]) != GEN4_DPORT) continue;
        }
        atomic_fetch_add(&g_rx, 1);
    }
    return NULL;
}

static int gen_loop(int argc, char **argv, int ip) {
    if (argc < (ip ? 8 : 6)) return 2;
    const char *ifname = argv[2];
    double secs = atof(argv[3]);
    int size = atoi(argv[4]);
    unsigned char m[6];
    if (parse_mac(argv[5], m)) return 2;
    if (size < (ip ? 14 + 20 + 8 : 14) || size > 9000) return 2;
    struct in_addr saddr, daddr;
    if (ip && (inet_pton(AF_INET, argv[6], &saddr) != 1 || inet_pton(AF_INET, argv[7], &daddr) != 1))
        return 2;
    g_ip = ip;
    g_fd = open_pkt(ifname, ip ? ETH_P_IP : ETH_P_BENCH, 0);
    unsigned char frame[9000];
    memset(frame, 0xa5, sizeof frame);
    memcpy(frame, m, 6);
    // Source: a fixed locally administered MAC (the peer's).
    unsigned char src[6] = {0x06, 0x00, 0xc6, 0x12, 0x00, 0x01};
    memcpy(frame + 6, src, 6);
    frame[12] = ETH_P_BENCH >> 8;
    frame[13] = ETH_P_BENCH & 0xff;
    if (ip) {
        frame[12] = 0x08, frame[13] = 0x00;
        unsigned char *iph = frame + 14, *udp = iph + 20;
        int tot = size - 14, ulen = tot - 20;
        memset(iph, 0, 28);
        iph[0] = 0x45;
        iph[2] = tot >> 8, iph[3] = tot & 0xff;
        iph[6] = 0x40;  // DF
        iph[8] = 64;    // TTL
        iph[9] = 17;    // UDP
        memcpy(iph + 12, &saddr, 4);
        memcpy(iph + 16, &daddr, 4);
        uint16_t c = ~csum_add(0, iph, 20);
        iph[10] = c >> 8, iph[11] = c & 0xff;
        udp[0] = GEN4_SPORT >> 8, udp[1] = GEN4_SPORT & 0xff;
        udp[2] = GEN4_DPORT >> 8, udp[3] = GEN4_DPORT & 0xff;
        udp[4] = ulen >> 8, udp[5] = ulen & 0xff;
        unsigned char pseudo[12];
        memcpy(pseudo, iph + 12, 8);
        pseudo[8] = 0, pseudo[9] = 17, pseudo[10] = ulen >> 8, pseudo[11] = ulen & 0xff;
        c = ~csum_add(csum_add(0, pseudo, 12), udp, ulen);
        if (!c) c = 0xffff;
        udp[6] = c >> 8, udp[7] = c & 0xff;
    }
    pthread_t t;
    pthread_create(&t, NULL, gen_rx, NULL);
    unsigned long tx = 0, drops = 0;
    double start = now(), end = start + secs;
    while (1) {
        // Check the clock every 64 frames.
        if ((tx & 63) == 0 && now() >= end) break;
        ssize_t n = send(g_fd, frame, size, 0);
        if (n == size)
            tx++;
        else if (errno == ENOBUFS || errno == EAGAIN)
            drops++, sched_yield();
        else
            die("send");
    }
    double elapsed = now() - start;
    usleep(200000);  // let in-flight echoes arrive
    g_stop = 1;
    pthread_join(t, NULL);
    printf("{\"tx\":%lu,\"send_errors\":%lu,\"echoed\":%lu,\"elapsed_s\":%.6f,\"cpu_s\":%.6f}\n", tx,
           drops, (unsigned long)g_rx, elapsed, cpu_s());
    return 0;
}

static int gen(int argc, char **argv) { return gen_loop(argc, argv, 0); }
static int gen4(int argc, char **argv) { return gen_loop(argc, argv, 1); }

// rss CMD ARGS...: run CMD, print its peak RSS in KiB (wait4 ru_maxrss) on stderr.
// This process is tiny, so the RSS it had before exec does not mask CMD's.
static int rss(int argc, char **argv) {
    if (argc < 3) return 2;
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0) die("wait4");
    fprintf(stderr, "%ld\n", ru.ru_maxrss);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

// Open like echo, read nothing: the one-way test's sink. With IP (hold4), read
// until one ARP request is answered (a routed netns resolves the guest before it
// sends it anything), then nothing.
static int hold_loop(int argc, char **argv, int ip) {
    if (argc < (ip ? 6 : 5)) return 2;
    int tap = !strcmp(argv[2], "tap");
    unsigned char guest[6];
    if (ip && (!tap || parse_mac(argv[5], guest))) return 2;
    int fd = tap ? open_tap(argv[3], 0) : open_pkt(argv[3], ETH_P_BENCH, 0);
    printf("{\"ready\":true}\n");
    fflush(stdout);
    double secs = atof(argv[4]), start = now();
    unsigned long arp = 0, skipped = 0;
    struct pollfd p[2] = {{.fd = 0, .events = POLLIN}, {.fd = fd, .events = POLLIN}};
    while (now() - start < secs) {
        int left = (int)((secs - (now() - start)) * 1000) + 1;
        if (poll(p, ip && !arp ? 2 : 1, left) <= 0) continue;  // SECONDS, or EOF on stdin
        if (p[0].revents) break;
        if (!(p[1].revents & POLLIN)) continue;
        unsigned char buf[65536];
        size_t hdr = sizeof(struct virtio_net_hdr);
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < (ssize_t)(hdr + 14)) continue;
        if (arp_reply(buf + hdr, n - hdr, guest)) {
            memset(buf, 0, hdr);
            if (write(fd, buf, n) == n) arp++;
        } else {
            skipped++;  // frames queued at the netns's neighbour entry, flushed with the reply
        }
    }
    close(fd);
    printf("{\"rx\":0,\"tx\":0,\"arp_replies\":%lu,\"read_before_reply\":%lu,\"cpu_s\":%.6f}\n",
           arp, skipped, cpu_s());
    return 0;
}

static int hold(int argc, char **argv) { return hold_loop(argc, argv, 0); }
static int hold4(int argc, char **argv) { return hold_loop(argc, argv, 1); }

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2) return 2;
    if (!strcmp(argv[1], "echo")) return echo(argc, argv);
    if (!strcmp(argv[1], "hold")) return hold(argc, argv);
    if (!strcmp(argv[1], "fwd")) return fwd(argc, argv);
    if (!strcmp(argv[1], "gen")) return gen(argc, argv);
    if (!strcmp(argv[1], "echo4")) return echo4(argc, argv);
    if (!strcmp(argv[1], "hold4")) return hold4(argc, argv);
    if (!strcmp(argv[1], "gen4")) return gen4(argc, argv);
    if (!strcmp(argv[1], "rss")) return rss(argc, argv);
    fprintf(stderr, "usage: standin echo|echo4|hold|hold4|fwd|gen|gen4|rss ...\n");
    return 2;
}
