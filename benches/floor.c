// benches/floor.c: the floor for podtap's kernel work, one process, pipelined netlink.
//
// Built by benches/run.sh (gcc -O2). Every request carries NLM_F_ACK; at most WINDOW
// are in flight, acks are read as they come (an unbounded burst hits ENOBUFS).
//
//   floor attach-tc NETNS N     for the first N non-loopback links of NETNS: a persistent
//                               TAP (TUNSETIFF+TUNSETPERSIST+owner), link group + alias,
//                               MTU, ingress qdisc on both, a redirect each way, TAP up
//                               after tc. The redirect is podtap's: u32 match-all
//                               + mirred egress redirect
//   floor attach-read NETNS N   `dump` (below), then `attach-tc`, in one process: the
//                               kernel work of an attach that reads what podtap's scan
//                               reads (nothing parsed or printed but the byte count)
//   floor detach NETNS          pod ingress qdiscs deleted, group delete, waits for the ack
//   floor probe NETNS           RTNL stall probe: RTM_GETLINK round trips until SIGTERM,
//                               prints the worst one and every one over 5 ms as JSON
//   floor detach-early NETNS    as detach, but a forked child sends the group delete; we
//                               return once RTM_DELLINK was seen for every TAP ifindex
//
//   floor attach-bridge NETNS N a bridge per link (group, alias, MTU), link and TAP enslaved
//   floor detach-bridge-early NETNS
//                               pod links released, bridges out of the group; a child
//                               deletes the TAPs by group, then the bridges one request
//                               each; we return once every TAP's RTM_DELLINK was seen
//
//   floor dump NETNS            the floor of a scan: the dumps `podtap scan` makes (links,
//                               addresses, neighbours, routes of every family and table,
//                               IPv4 and IPv6 rules), one after another on one socket,
//                               every byte read and dropped, nothing parsed; prints the
//                               bytes read
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <linux/netlink.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/tc_act/tc_mirred.h>
#include <linux/if_arp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

extern unsigned int if_nametoindex(const char *ifname);  // <net/if.h> clashes with <linux/if.h>
#define WINDOW 32
#define GROUP 4177
#define ALIAS "podtap-floor"
#define MAXIF 512

static int nl;
static unsigned seq, inflight;

static void die(const char *m) { perror(m); exit(1); }

struct req { struct nlmsghdr h; char buf[1024]; };

static struct rtattr *addattr(struct nlmsghdr *h, int type, const void *d, int len) {
    /* The attributes go into the buffer after the header (struct req). GCC,
       once this is inlined, sizes the object as the header alone and warns
       (-Wstringop-overflow): hide where the pointer came from. */
    char *msg = (char *)h;
    __asm__("" : "+r"(msg));
    struct rtattr *a = (struct rtattr *)(msg + NLMSG_ALIGN(h->nlmsg_len));
    a->rta_type = type; a->rta_len = RTA_LENGTH(len);
    if (len) memcpy(RTA_DATA(a), d, len);
    h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + RTA_ALIGN(a->rta_len);
    return a;
}
static struct rtattr *nest(struct nlmsghdr *h, int type) { return addattr(h, type | NLA_F_NESTED, NULL, 0); }
static void endnest(struct nlmsghdr *h, struct rtattr *a) { a->rta_len = (char *)h + h->nlmsg_len - (char *)a; }

static void read_acks(int min_left) {
    char buf[65536];
    while (inflight > (unsigned)min_left) {
        ssize_t n = recv(nl, buf, sizeof buf, 0);
        if (n < 0) { if (errno == EINTR) continue; die("recv"); }
        for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_type == NLMSG_ERROR) {
                struct nlmsgerr *e = NLMSG_DATA(h);
                if (e->error && e->error != -ENOENT) { errno = -e->error; die("netlink"); }
                inflight--;
            }
        }
    }
}
static void sendreq(struct nlmsghdr *h) {
    if (inflight >= WINDOW) read_acks(WINDOW - 1);
    h->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
    h->nlmsg_seq = ++seq;
    if (send(nl, h, h->nlmsg_len, 0) < 0) die("send");
    inflight++;
}

static void enter(const char *ns) {
    char p[256];
    snprintf(p, sizeof p, "/run/netns/%s", ns);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) die(p);
    close(fd);
}
static int nlopen(unsigned groups) {
    int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = groups };
    if (s < 0 || bind(s, (void *)&sa, sizeof sa) < 0) die("netlink socket");
    int big = 1 << 20;
    setsockopt(s, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    return s;
}

struct link { int idx, mtu, group, lo; char name[IFNAMSIZ]; };
static struct link links[MAXIF];
static int nlinks;

static void dump_links(void) {
    struct req r = { .h = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg)), .nlmsg_type = RTM_GETLINK,
                            .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = ++seq } };
    if (send(nl, &r, r.h.nlmsg_len, 0) < 0) die("send dump");
    char buf[65536];
    nlinks = 0;
    for (;;) {
        ssize_t n = recv(nl, buf, sizeof buf, 0);
        if (n < 0) die("recv dump");
        for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_type == NLMSG_DONE) return;
            if (h->nlmsg_type != RTM_NEWLINK || nlinks >= MAXIF) continue;
            struct ifinfomsg *i = NLMSG_DATA(h);
            struct link *l = &links[nlinks++];
            memset(l, 0, sizeof *l);
            l->idx = i->ifi_index; l->lo = i->ifi_type == ARPHRD_LOOPBACK;
            int len = IFLA_PAYLOAD(h);
            for (struct rtattr *a = IFLA_RTA(i); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
                if (a->rta_type == IFLA_MTU) l->mtu = *(int *)RTA_DATA(a);
                if (a->rta_type == IFLA_GROUP) l->group = *(int *)RTA_DATA(a);
                if (a->rta_type == IFLA_IFNAME) snprintf(l->name, IFNAMSIZ, "%s", (char *)RTA_DATA(a));
            }
        }
    }
}

static void qdisc(int type, int idx) {
    struct req r = { .h = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct tcmsg)), .nlmsg_type = type,
                            .nlmsg_flags = type == RTM_NEWQDISC ? NLM_F_CREATE | NLM_F_EXCL : 0 } };
    struct tcmsg *t = NLMSG_DATA(&r.h);
    t->tcm_family = AF_UNSPEC; t->tcm_ifindex = idx;
    t->tcm_handle = TC_H_MAKE(TC_H_INGRESS, 0); t->tcm_parent = TC_H_INGRESS;
    addattr(&r.h, TCA_KIND, "ingress", 8);
    sendreq(&r.h);
}
// A new filter at prio 1, protocol all, on `from`'s ingress hook.
static void filter_header(struct req *r, int from) {
    *r = (struct req){ .h = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct tcmsg)), .nlmsg_type = RTM_NEWTFILTER,
                              .nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL } };
    struct tcmsg *t = NLMSG_DATA(&r->h);
    t->tcm_family = AF_UNSPEC; t->tcm_ifindex = from;
    t->tcm_parent = TC_H_MAKE(TC_H_INGRESS, 0);
    t->tcm_info = TC_H_MAKE(1u << 16, htons(ETH_P_ALL));
}

static void redirect(int from, int to) {
    struct req r;
    filter_header(&r, from);
    addattr(&r.h, TCA_KIND, "u32", 4);
    struct rtattr *o = nest(&r.h, TCA_OPTIONS);
    char sel[sizeof(struct tc_u32_sel) + sizeof(struct tc_u32_key)] = { 0 };
    ((struct tc_u32_sel *)sel)->flags = TC_U32_TERMINAL;
    ((struct tc_u32_sel *)sel)->nkeys = 1;
    addattr(&r.h, TCA_U32_SEL, sel, sizeof sel);
    struct rtattr *acts = nest(&r.h, TCA_U32_ACT);
    struct rtattr *a1 = nest(&r.h, 1);
    addattr(&r.h, TCA_ACT_KIND, "mirred", 7);
    struct rtattr *ao = nest(&r.h, TCA_ACT_OPTIONS);
    struct tc_mirred m = { .action = TC_ACT_STOLEN, .eaction = TCA_EGRESS_REDIR, .ifindex = to };
    addattr(&r.h, TCA_MIRRED_PARMS, &m, sizeof m);
    endnest(&r.h, ao); endnest(&r.h, a1); endnest(&r.h, acts); endnest(&r.h, o);
    sendreq(&r.h);
}

static void setlink(int idx, int mtu, int group, const char *alias, int up) {
    struct req r = { .h = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg)), .nlmsg_type = RTM_NEWLINK } };
    struct ifinfomsg *i = NLMSG_DATA(&r.h);
    i->ifi_index = idx;
    if (up) { i->ifi_flags = IFF_UP; i->ifi_change = IFF_UP; }
    if (mtu) addattr(&r.h, IFLA_MTU, &mtu, 4);
    if (group) addattr(&r.h, IFLA_GROUP, &group, 4);
    if (alias) addattr(&r.h, IFLA_IFALIAS, alias, strlen(alias) + 1);
    sendreq(&r.h);
}
static void group_delete(void) {
    struct req r = { .h = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg)), .nlmsg_type = RTM_DELLINK } };
    int g = GROUP;
    addattr(&r.h, IFLA_GROUP, &g, 4);
    sendreq(&r.h);
}
static int mktap(const char *name) {
    int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    if (fd < 0) die("/dev/net/tun");
    struct ifreq ifr = { 0 };
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
    snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) die("TUNSETIFF");
    if (ioctl(fd, TUNSETOWNER, 0) < 0) die("TUNSETOWNER");
    if (ioctl(fd, TUNSETPERSIST, 1) < 0) die("TUNSETPERSIST");
    close(fd);
    return (int)if_nametoindex(name);
}

static void newbridge(const char *name, int mtu) {
    struct req r = { .h = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg)), .nlmsg_type = RTM_NEWLINK,
                            .nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL } };
    int g = GROUP;
    addattr(&r.h, IFLA_IFNAME, name, strlen(name) + 1);
    addattr(&r.h, IFLA_MTU, &mtu, 4);
    addattr(&r.h, IFLA_GROUP, &g, 4);
    addattr(&r.h, IFLA_IFALIAS, ALIAS, strlen(ALIAS) + 1);
    struct rtattr *li = nest(&r.h, IFLA_LINKINFO);
    addattr(&r.h, IFLA_INFO_KIND, "bridge", 6);
    endnest(&r.h, li);
    sendreq(&r.h);
}
static void enslave(int idx, int master) {
    struct req r = { .h = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg)), .nlmsg_type = RTM_NEWLINK } };
    ((struct ifinfomsg *)NLMSG_DATA(&r.h))->ifi_index = idx;
    addattr(&r.h, IFLA_MASTER, &master, 4);
    sendreq(&r.h);
}
static void attach_bridge(int n) {
    dump_links();
    int pods[MAXIF], pmtu[MAXIF], k = 0;
    for (int i = 0; i < nlinks && k < n; i++)
        if (!links[i].lo && links[i].group != GROUP) { pods[k] = links[i].idx; pmtu[k] = links[i].mtu; k++; }
    if (k < n) { fprintf(stderr, "floor: only %d links\n", k); exit(1); }
    for (int i = 0; i < n; i++) {
        char name[IFNAMSIZ];
        snprintf(name, sizeof name, "fbr%d", i);
        newbridge(name, pmtu[i]);
    }
    read_acks(0);
    for (int i = 0; i < n; i++) {
        char name[IFNAMSIZ];
        snprintf(name, sizeof name, "fbr%d", i);
        int br = (int)if_nametoindex(name);
        snprintf(name, sizeof name, "ftap%d", i);
        int tap = mktap(name);
        setlink(tap, pmtu[i], GROUP, ALIAS, 0);
        enslave(pods[i], br);
        enslave(tap, br);
        setlink(br, 0, 0, NULL, 1);
        setlink(tap, 0, 0, NULL, 1);
    }
    read_acks(0);
}
// As podtap: the pod links leave their bridges, the bridges leave the group, then a
// child deletes the TAPs by group and the bridges one request each (acked before the
// next); the parent returns once RTM_DELLINK was seen for every TAP.
static void detach_bridge_early(void) {
    int mon = nlopen(RTMGRP_LINK);
    dump_links();
    int taps[MAXIF], brs[MAXIF], k = 0, nb = 0;
    for (int i = 0; i < nlinks; i++) {
        if (links[i].group == GROUP) {
            if (!strncmp(links[i].name, "fbr", 3)) brs[nb++] = links[i].idx;
            else taps[k++] = links[i].idx;
        } else if (!links[i].lo) enslave(links[i].idx, 0);
    }
    for (int i = 0; i < nb; i++) {
        struct req r = { .h = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg)), .nlmsg_type = RTM_NEWLINK } };
        ((struct ifinfomsg *)NLMSG_DATA(&r.h))->ifi_index = brs[i];
        int g = 0;
        addattr(&r.h, IFLA_GROUP, &g, 4);
        sendreq(&r.h);
    }
    read_acks(0);
    pid_t c = fork();
    if (c < 0) die("fork");
    if (c == 0) {
        nl = nlopen(0); inflight = 0;
        group_delete(); read_acks(0);
        for (int i = 0; i < nb; i++) {
            struct req r = { .h = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg)), .nlmsg_type = RTM_DELLINK } };
            ((struct ifinfomsg *)NLMSG_DATA(&r.h))->ifi_index = brs[i];
            sendreq(&r.h);
            read_acks(0);
        }
        _exit(0);
    }
    int seen = 0, done[MAXIF] = { 0 };
    char buf[65536];
    while (seen < k) {
        ssize_t n = recv(mon, buf, sizeof buf, 0);
        if (n < 0) { if (errno == EINTR) continue; die("recv monitor"); }
        for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_type != RTM_DELLINK) continue;
            struct ifinfomsg *i = NLMSG_DATA(h);
            if (i->ifi_family != AF_UNSPEC) continue; // a port leaving a bridge (AF_BRIDGE)
            for (int j = 0; j < k; j++)
                if (taps[j] == i->ifi_index && !done[j]) { done[j] = 1; seen++; }
        }
    }
}

static void attach_tc(int n) {
    dump_links();
    int pods[MAXIF], pmtu[MAXIF], taps[MAXIF], k = 0;
    for (int i = 0; i < nlinks && k < n; i++)
        if (!links[i].lo && links[i].group != GROUP) { pods[k] = links[i].idx; pmtu[k] = links[i].mtu; k++; }
    if (k < n) { fprintf(stderr, "floor: only %d links\n", k); exit(1); }
    for (int i = 0; i < n; i++) {
        char name[IFNAMSIZ];
        snprintf(name, sizeof name, "ftap%d", i);
        taps[i] = mktap(name);
        setlink(taps[i], pmtu[i], GROUP, ALIAS, 0);
        // As podtap (src/apply/requests.rs): the TAP's qdisc first, so the
        // grace period the pod link's qdisc waits for covers the TAP's too.
        qdisc(RTM_NEWQDISC, taps[i]);
        qdisc(RTM_NEWQDISC, pods[i]);
        redirect(pods[i], taps[i]);
        redirect(taps[i], pods[i]);
        setlink(taps[i], 0, 0, NULL, 1);
    }
    read_acks(0);
}

// Every non-loopback link not in our group loses its ingress qdisc (ENOENT ignored). Returns
// the TAP ifindexes (our group) in taps.
static int teardown_pods(int *taps) {
    dump_links();
    int k = 0;
    for (int i = 0; i < nlinks; i++) {
        if (links[i].group == GROUP) taps[k++] = links[i].idx;
        else if (!links[i].lo) qdisc(RTM_DELQDISC, links[i].idx);
    }
    read_acks(0);
    return k;
}

static void detach(int early) {
    int taps[MAXIF];
    int mon = early ? nlopen(RTMGRP_LINK) : -1;
    int k = teardown_pods(taps);
    if (!early) { group_delete(); read_acks(0); return; }
    pid_t c = fork();
    if (c < 0) die("fork");
    if (c == 0) { nl = nlopen(0); inflight = 0; group_delete(); read_acks(0); _exit(0); }
    int seen = 0, done[MAXIF] = { 0 };
    char buf[65536];
    while (seen < k) {
        ssize_t n = recv(mon, buf, sizeof buf, 0);
        if (n < 0) { if (errno == EINTR) continue; die("recv monitor"); }
        for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_type != RTM_DELLINK) continue;
            struct ifinfomsg *i = NLMSG_DATA(h);
            for (int j = 0; j < k; j++)
                if (taps[j] == i->ifi_index && !done[j]) { done[j] = 1; seen++; }
        }
    }
}

// floor probe NETNS: RTM_GETLINK of lo in a loop until SIGTERM/SIGINT; prints
// {"worst_ms":..,"n":..,"over5_ms":[..]}: the worst round trip (the worst RTNL
// stall seen) and every round trip over 5 ms (each one RTNL hold it waited for).
static volatile sig_atomic_t stop;
static void onsig(int s) { (void)s; stop = 1; }
static double mono(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }
static void probe(void) {
    struct sigaction sa = { .sa_handler = onsig };
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    double worst = 0; long n = 0;
    static double hold[4096]; int nhold = 0;  // round trips over 5 ms: one RTNL hold each
    char buf[8192];
    while (!stop) {
        struct req r = { .h = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg)), .nlmsg_type = RTM_GETLINK,
                                .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = ++seq } };
        ((struct ifinfomsg *)NLMSG_DATA(&r.h))->ifi_index = 1;
        double t0 = mono();
        if (send(nl, &r, r.h.nlmsg_len, 0) < 0) { if (errno == EINTR) break; die("send probe"); }
        if (recv(nl, buf, sizeof buf, 0) < 0) { if (errno == EINTR) break; die("recv probe"); }
        double d = mono() - t0;
        if (d > worst) worst = d;
        if (d > 5 && nhold < 4096) hold[nhold++] = d;
        if (n++ == 0) { printf("ready\n"); fflush(stdout); }
        usleep(200);
    }
    printf("{\"worst_ms\":%.3f,\"n\":%ld,\"over5_ms\":[", worst, n);
    for (int i = 0; i < nhold; i++) printf("%s%.3f", i ? "," : "", hold[i]);
    printf("]}\n");
}

// floor dump NETNS: each dump request sent, its datagrams read (64 KiB buffer; the
// kernel fills at most 32 KiB per datagram) until NLMSG_DONE, nothing parsed past the
// header; prints {"bytes":..,"messages":..}.
static void dump_all(void) {
    static char buf[65536];
    struct { int type; int family; size_t len; } asks[] = {
        { RTM_GETLINK, AF_UNSPEC, sizeof(struct ifinfomsg) },
        { RTM_GETADDR, AF_UNSPEC, sizeof(struct ifaddrmsg) },
        { RTM_GETNEIGH, AF_UNSPEC, sizeof(struct ndmsg) },
        { RTM_GETROUTE, AF_UNSPEC, sizeof(struct rtmsg) },
        { RTM_GETRULE, AF_INET, sizeof(struct rtmsg) },
        { RTM_GETRULE, AF_INET6, sizeof(struct rtmsg) },
    };
    long bytes = 0, msgs = 0;
    for (size_t k = 0; k < sizeof asks / sizeof asks[0]; k++) {
        struct req r = { .h = { .nlmsg_len = NLMSG_LENGTH(asks[k].len), .nlmsg_type = asks[k].type,
                                .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = ++seq } };
        *(unsigned char *)NLMSG_DATA(&r.h) = (unsigned char)asks[k].family;
        if (send(nl, &r, r.h.nlmsg_len, 0) < 0) die("send dump");
        for (int done = 0; !done;) {
            ssize_t n = recv(nl, buf, sizeof buf, 0);
            if (n < 0) { if (errno == EINTR) continue; die("recv dump"); }
            bytes += n;
            for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
                msgs++;
                if (h->nlmsg_type == NLMSG_DONE) done = 1;
                if (h->nlmsg_type == NLMSG_ERROR) { errno = -((struct nlmsgerr *)NLMSG_DATA(h))->error; die("dump"); }
            }
        }
    }
    printf("{\"bytes\":%ld,\"messages\":%ld}\n", bytes, msgs);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: floor attach-tc NETNS N | detach NETNS | detach-early NETNS\n"); return 2; }
    enter(argv[2]);
    nl = nlopen(0);
    if (!strcmp(argv[1], "attach-tc") && argc == 4) attach_tc(atoi(argv[3]));
    else if (!strcmp(argv[1], "attach-read") && argc == 4) { dump_all(); attach_tc(atoi(argv[3])); }
    else if (!strcmp(argv[1], "detach")) detach(0);
    else if (!strcmp(argv[1], "detach-early")) detach(1);
    else if (!strcmp(argv[1], "probe")) probe();
    else if (!strcmp(argv[1], "attach-bridge") && argc == 4) attach_bridge(atoi(argv[3]));
    else if (!strcmp(argv[1], "detach-bridge-early")) detach_bridge_early();
    else if (!strcmp(argv[1], "dump")) dump_all();
    else { fprintf(stderr, "floor: unknown subcommand %s\n", argv[1]); return 2; }
    return 0;
}
