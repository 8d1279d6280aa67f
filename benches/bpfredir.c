// benches/bpfredir.c: the tc BPF redirect contenders of the data-path benchmark.
//
// Compiled at run time by benches/run.sh (gcc -O2) into a temp dir; run inside
// the pod netns (ip netns exec). The program is four instructions, loaded with
// the bpf(2) syscall: r1 = TARGET's ifindex; r2 = 0 (egress); call
// bpf_redirect; exit (its return, TC_ACT_REDIRECT, is the verdict in
// direct-action mode and for tcx). Its name is podtap_redir.
//
//   bpfredir tcx-attach DEV TARGET  load, attach to DEV's tcx ingress (BPF_PROG_ATTACH,
//                                   BPF_TCX_INGRESS: stays attached without an fd, until
//                                   detached or DEV is deleted)
//   bpfredir tcx-peer DEV TARGET    the same with bpf_redirect_peer: the frame enters
//                                   the ingress of TARGET's veth peer (another netns)
//                                   directly, without TARGET's transmit and backlog
//   bpfredir tcx-detach DEV         detach every program on DEV's tcx ingress
//   bpfredir pin PATH TARGET        load, pin at PATH on a bpffs (for
//                                   `tc filter add ... bpf object-pinned PATH da`)
//
// The uapi headers on the build machine may predate tcx (Linux 6.6), so the
// attach type and the BPF_PROG_QUERY fields it needs are spelled out here.
#define _GNU_SOURCE
#include <linux/bpf.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TCX_INGRESS 46 /* BPF_TCX_INGRESS */

static long sys_bpf(int cmd, void *attr, unsigned size) { return syscall(__NR_bpf, cmd, attr, size); }

static int load(const char *target, int peer) {
    unsigned tgt = if_nametoindex(target);
    if (!tgt) { perror(target); return -1; }
    struct bpf_insn insn[4] = {
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_1, .imm = (int32_t)tgt},
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_2, .imm = 0},
        {.code = BPF_JMP | BPF_CALL, .imm = peer ? BPF_FUNC_redirect_peer : BPF_FUNC_redirect},
        {.code = BPF_JMP | BPF_EXIT},
    };
    static char log[4096];
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.prog_type = BPF_PROG_TYPE_SCHED_CLS;
    a.insns = (uintptr_t)insn;
    a.insn_cnt = 4;
    a.license = (uintptr_t)"GPL";
    a.log_buf = (uintptr_t)log;
    a.log_size = sizeof log;
    a.log_level = 1;
    strcpy(a.prog_name, "podtap_redir");
    int fd = sys_bpf(BPF_PROG_LOAD, &a, sizeof a);
    if (fd < 0) { perror("BPF_PROG_LOAD"); fprintf(stderr, "%s\n", log); }
    return fd;
}

/* BPF_PROG_QUERY's attr as of Linux 6.6 (target_ifindex shares target_fd). */
struct query {
    uint32_t target, attach_type, query_flags, attach_flags;
    uint64_t prog_ids;
    uint32_t count, pad;
    uint64_t prog_attach_flags, link_ids, link_attach_flags, revision;
};

static int tcx_detach(const char *dev) {
    unsigned ifindex = if_nametoindex(dev);
    if (!ifindex) { perror(dev); return 1; }
    uint32_t ids[64];
    struct query q = {.target = ifindex, .attach_type = TCX_INGRESS,
                      .prog_ids = (uintptr_t)ids, .count = 64};
    if (sys_bpf(BPF_PROG_QUERY, &q, sizeof q) < 0) { perror("BPF_PROG_QUERY"); return 1; }
    for (uint32_t i = 0; i < q.count && i < 64; i++) {
        union bpf_attr a;
        memset(&a, 0, sizeof a);
        a.prog_id = ids[i];
        int fd = sys_bpf(BPF_PROG_GET_FD_BY_ID, &a, sizeof a);
        if (fd < 0) { perror("BPF_PROG_GET_FD_BY_ID"); return 1; }
        memset(&a, 0, sizeof a);
        a.target_fd = ifindex;
        a.attach_bpf_fd = fd;
        a.attach_type = TCX_INGRESS;
        if (sys_bpf(BPF_PROG_DETACH, &a, sizeof a) < 0) { perror("BPF_PROG_DETACH"); return 1; }
        close(fd);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "tcx-detach")) return tcx_detach(argv[2]);
    if (argc != 4) {
        fprintf(stderr, "usage: bpfredir tcx-attach|tcx-peer DEV TARGET | tcx-detach DEV | pin PATH TARGET\n");
        return 2;
    }
    int fd = load(argv[3], !strcmp(argv[1], "tcx-peer"));
    if (fd < 0) return 1;
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    if (!strcmp(argv[1], "tcx-attach") || !strcmp(argv[1], "tcx-peer")) {
        a.target_fd = if_nametoindex(argv[2]);
        if (!a.target_fd) { perror(argv[2]); return 1; }
        a.attach_bpf_fd = fd;
        a.attach_type = TCX_INGRESS;
        if (sys_bpf(BPF_PROG_ATTACH, &a, sizeof a) < 0) { perror("BPF_PROG_ATTACH tcx"); return 1; }
    } else if (!strcmp(argv[1], "pin")) {
        a.pathname = (uintptr_t)argv[2];
        a.bpf_fd = fd;
        if (sys_bpf(BPF_OBJ_PIN, &a, sizeof a) < 0) { perror("BPF_OBJ_PIN"); return 1; }
    } else {
        fprintf(stderr, "bpfredir: unknown mode %s\n", argv[1]);
        return 2;
    }
    return 0;
}
