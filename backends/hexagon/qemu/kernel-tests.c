/*
 * kernel-tests.c: unit tests of the htp C as DSP code. `cargo xtask
 * hexagon-qemu` builds this file with the htp sources twice, for the host
 * (the portable C: the known answers) and for Hexagon v67 with HVX (the HVX
 * paths where they exist), runs the Hexagon binary under qemu-hexagon and
 * compares the two outputs line by line; they must be identical.
 *
 * Each case sends MAP, OP and UNMAP requests through htp_main_loop (main.c)
 * over an in-memory platform and prints the op's status and an FNV-1a hash
 * of its output bytes. The conversion cases also compare the whole-row
 * conversions of hvx-convert.h with the per-element reference inside the
 * binary, so a Hexagon run checks the HVX paths bit for bit by itself.
 *
 * Both builds use qemu/mini-math.c for expf, sin, cos, ... (not a libm), so
 * outputs may differ only where the kernels or the compilers do.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "htp-ctx.h"
#include "htp-msg.h"
#include "hvx-utils.h"

void htp_main_loop(struct htp_context * ctx);

#define MAX_REQS 16
#define MAX_BUFS 8

/* ---- an in-memory platform ------------------------------------------------------------ */

struct test_plat {
    struct htp_req reqs[MAX_REQS];
    struct htp_rsp rsps[MAX_REQS];
    uint32_t n_reqs, next, n_rsps;
    uint8_t * mem[MAX_BUFS + 1]; /* fd -> memory */
    uint64_t size[MAX_BUFS + 1];
};

static int t_read(void * c, struct htp_req * req) {
    struct test_plat * p = (struct test_plat *) c;
    if (p->next == p->n_reqs) {
        return 1;
    }
    *req = p->reqs[p->next++];
    return 0;
}

static int t_write(void * c, const struct htp_rsp * rsp) {
    struct test_plat * p = (struct test_plat *) c;
    p->rsps[p->n_rsps++] = *rsp;
    return 0;
}

static void * t_map(void * c, int32_t fd, uint64_t size) {
    struct test_plat * p = (struct test_plat *) c;
    return fd >= 1 && fd <= MAX_BUFS && p->mem[fd] != NULL && size <= p->size[fd] ? p->mem[fd] : NULL;
}

static void t_unmap(void * c, int32_t fd, void * addr, uint64_t size) {
    (void) c;
    (void) fd;
    (void) addr;
    (void) size;
}

static void t_run(void * c, htp_job_fn job, void * data, uint32_t nth) {
    (void) c;
    for (uint32_t i = 0; i < nth; i++) {
        job(data, i, nth);
    }
}

static uint64_t t_now(void * c) {
    (void) c;
    return 0;
}

static uint8_t * g_vtcm;
static const uint64_t VTCM_BYTES = 2u << 20;

/* ---- data ---------------------------------------------------------------------------------- */

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;

static uint32_t rnd32(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t) (g_rng >> 32);
}

/* A value in [-1, 1) with 24 random bits. */
static float rnd_f(void) {
    return (float) (int32_t) (rnd32() >> 8) * (1.0f / 8388608.0f) - 1.0f;
}

static uint64_t fnv(const uint8_t * p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 0x100000001b3ull;
    }
    return h;
}

static uint32_t type_bytes(uint32_t type, uint32_t ne0) {
    switch (type) {
        case HTP_TYPE_F32:
        case HTP_TYPE_I32:
            return 4 * ne0;
        case HTP_TYPE_F16:
            return 2 * ne0;
        case HTP_TYPE_Q4_0:
            return ne0 / 32 * 18;
        default: /* Q8_0 */
            return ne0 / 32 * 34;
    }
}

/* A contiguous tensor in buffer `buf` at `offset`. */
static struct htp_tensor tensor(uint64_t buf, uint64_t offset, uint32_t type, uint32_t n0, uint32_t n1, uint32_t n2,
                                uint32_t n3) {
    struct htp_tensor t;
    memset(&t, 0, sizeof(t));
    t.buf = buf;
    t.offset = offset;
    t.type = type;
    t.ne[0] = n0;
    t.ne[1] = n1;
    t.ne[2] = n2;
    t.ne[3] = n3;
    t.nb[0] = type == HTP_TYPE_F32 || type == HTP_TYPE_I32 ? 4 : type == HTP_TYPE_F16 ? 2 : (type == HTP_TYPE_Q4_0 ? 18 : 34);
    t.nb[1] = type_bytes(type, n0);
    t.nb[2] = t.nb[1] * n1;
    t.nb[3] = t.nb[2] * n2;
    return t;
}

static uint64_t nbytes(const struct htp_tensor * t) {
    return (uint64_t) t->nb[3] * t->ne[3];
}

/* Fills a tensor's bytes with random valid data of its type. */
static void fill(uint8_t * p, const struct htp_tensor * t) {
    uint64_t rows = (uint64_t) t->ne[1] * t->ne[2] * t->ne[3];
    for (uint64_t r = 0; r < rows; r++) {
        uint8_t * row = p + r * t->nb[1];
        switch (t->type) {
            case HTP_TYPE_F32:
                for (uint32_t i = 0; i < t->ne[0]; i++) {
                    float v = rnd_f();
                    memcpy(row + 4 * i, &v, 4);
                }
                break;
            case HTP_TYPE_F16:
                for (uint32_t i = 0; i < t->ne[0]; i++) {
                    uint16_t h = htp_f32_to_f16(rnd_f());
                    memcpy(row + 2 * i, &h, 2);
                }
                break;
            default: { /* Q4_0 / Q8_0: a small positive f16 scale and random quants */
                uint32_t bsz = t->type == HTP_TYPE_Q4_0 ? 18 : 34;
                for (uint32_t b = 0; b < t->ne[0] / 32; b++) {
                    uint16_t d = htp_f32_to_f16((float) (rnd32() % 1000 + 1) * (1.0f / 65536.0f));
                    memcpy(row + b * bsz, &d, 2);
                    for (uint32_t i = 2; i < bsz; i++) {
                        row[b * bsz + i] = (uint8_t) rnd32();
                    }
                }
                break;
            }
        }
    }
}

/* ---- running one op --------------------------------------------------------------------- */

/* Runs one op over tensors that live in buffers 1..n_bufs of the given sizes
 * (filled by the caller), prints status and output hash. */
static void run_case(const char * name, struct htp_req * op, uint8_t ** bufs, const uint64_t * sizes, uint32_t n_bufs,
                     uint32_t n_threads) {
    static struct test_plat p;
    memset(&p, 0, sizeof(p));
    for (uint32_t i = 0; i < n_bufs; i++) {
        struct htp_req * m = &p.reqs[p.n_reqs++];
        memset(m, 0, sizeof(*m));
        m->kind = HTP_MSG_MAP;
        m->seq = p.n_reqs;
        m->params[0] = (int32_t) i + 1;
        m->dst.buf = 100 + i;
        m->dst.offset = sizes[i];
        p.mem[i + 1] = bufs[i];
        p.size[i + 1] = sizes[i];
    }
    op->kind = HTP_MSG_OP;
    op->seq = ++p.n_reqs;
    p.reqs[p.n_reqs - 1] = *op;
    struct htp_platform plat = { &p, t_read, t_write, t_map, t_unmap, t_run, t_now };
    static struct htp_context ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.plat = &plat;
    ctx.vtcm = g_vtcm;
    ctx.vtcm_bytes = VTCM_BYTES;
    ctx.n_threads = n_threads;
    htp_main_loop(&ctx);
    const struct htp_rsp * r = &p.rsps[p.n_rsps - 1];
    const struct htp_tensor * d = &op->dst;
    uint8_t * out = bufs[d->buf - 100] + d->offset;
    uint32_t first = 0;
    memcpy(&first, out, 4);
    printf("%s: status=%u hash=%llx first=%x %s\n", name, r->status, (unsigned long long) fnv(out, nbytes(d)), first,
           r->status ? r->detail : "");
}

/* One op with sources a, b (optional) and a result, each in its own buffer. */
static void op2(const char * name, uint32_t op, const int32_t * params, struct htp_tensor a, const struct htp_tensor * b,
                struct htp_tensor d, uint32_t n_threads) {
    uint8_t * bufs[3];
    uint64_t sizes[3];
    struct htp_req req;
    memset(&req, 0, sizeof(req));
    req.op = op;
    if (params != NULL) {
        memcpy(req.params, params, sizeof(req.params));
    }
    req.n_src = b ? 2 : 1;
    struct htp_tensor * ts[3] = { &req.src[0], &req.src[1], &req.dst };
    req.src[0] = a;
    if (b) {
        req.src[1] = *b;
    }
    req.dst = d;
    uint32_t n = 0;
    for (uint32_t i = 0; i < 3; i++) {
        if (i == 1 && !b) {
            continue;
        }
        ts[i]->buf = 100 + n;
        ts[i]->offset = 0;
        sizes[n] = nbytes(ts[i]);
        bufs[n] = (uint8_t *) malloc(sizes[n]);
        if (i < 2) {
            fill(bufs[n], ts[i]);
        } else {
            memset(bufs[n], 0xee, sizes[n]);
        }
        n++;
    }
    run_case(name, &req, bufs, sizes, n, n_threads);
}

static int32_t fbits(float f) {
    int32_t i;
    memcpy(&i, &f, 4);
    return i;
}

/* ---- conversion cases ----------------------------------------------------------------------- */

static void conversions(void) {
    /* every f16 bit pattern through the row conversion vs the per-element reference */
    static uint16_t h[65536];
    static float f[65536];
    for (uint32_t i = 0; i < 65536; i++) {
        h[i] = (uint16_t) i;
    }
    htp_row_f16_to_f32(f, h, 65536);
    uint32_t bad = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        float want = htp_f16_to_f32((uint16_t) i);
        bad += memcmp(&f[i], &want, 4) != 0;
    }
    printf("%s: mismatches=%u hash=%llx\n", "f16->f32 all patterns", bad,
           (unsigned long long) fnv((const uint8_t *) f, sizeof(f)));

    /* f32 -> f16 around every rounding boundary of every exponent, both signs */
    static const uint32_t mans[] = { 0, 1, 0xfff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000, 0x5000, 0x7fefff,
                                     0x7ff000, 0x7fffff, 0x400000, 0x401000, 0x123456, 0x2aaaaa };
    static float src[2 * 256 * 16 + 64];
    static uint16_t got[2 * 256 * 16 + 64];
    uint32_t n = 0;
    for (uint32_t s = 0; s < 2; s++) {
        for (uint32_t e = 0; e < 256; e++) {
            for (uint32_t m = 0; m < sizeof(mans) / sizeof(mans[0]); m++) {
                uint32_t bits = (s << 31) | (e << 23) | mans[m];
                memcpy(&src[n++], &bits, 4);
            }
        }
    }
    for (uint32_t i = 0; i < 64; i++) {
        src[n++] = rnd_f() * 70000.0f;
    }
    htp_row_f32_to_f16(got, src, n);
    bad = 0;
    for (uint32_t i = 0; i < n; i++) {
        bad += got[i] != htp_f32_to_f16(src[i]);
    }
    printf("%s: mismatches=%u hash=%llx\n", "f32->f16 rounding edges", bad,
           (unsigned long long) fnv((const uint8_t *) got, 2 * n));

    /* Q8_0 / Q4_0 blocks with scales of every exponent (subnormal and zero too), both signs */
    static uint16_t deq[2][2048 * 32];
    uint32_t bad_q[2] = { 0, 0 };
    for (uint32_t b = 0; b < 2048; b++) {
        uint8_t blk[34];
        uint16_t dh = (uint16_t) (((b & 1) << 15) | ((b / 2 % 31) << 10) | (rnd32() & 0x3ff));
        if (b % 97 == 0) {
            dh &= 0x8000; /* a zero scale */
        }
        memcpy(blk, &dh, 2);
        for (uint32_t i = 2; i < 34; i++) {
            blk[i] = (uint8_t) rnd32();
        }
        uint16_t * q8 = &deq[0][b * 32];
        uint16_t * q4 = &deq[1][b * 32];
        htp_block_q8_0_to_f16(q8, blk);
        htp_block_q4_0_to_f16(q4, blk);
        float d = htp_f16_to_f32(dh);
        for (uint32_t j = 0; j < 32; j++) {
            bad_q[0] += q8[j] != htp_f32_to_f16(d * (float) (int8_t) blk[2 + j]);
            int nib = j < 16 ? (blk[2 + j] & 0x0f) : (blk[2 + j - 16] >> 4);
            bad_q[1] += q4[j] != htp_f32_to_f16(d * (float) (nib - 8));
        }
    }
    printf("%s: mismatches=%u hash=%llx\n", "q8_0 blocks -> f16", bad_q[0],
           (unsigned long long) fnv((const uint8_t *) deq[0], sizeof(deq[0])));
    printf("%s: mismatches=%u hash=%llx\n", "q4_0 blocks -> f16", bad_q[1],
           (unsigned long long) fnv((const uint8_t *) deq[1], sizeof(deq[1])));
}

/* ---- op cases --------------------------------------------------------------------------------- */

static void mul_mats(void) {
    static const uint32_t wtypes[] = { HTP_TYPE_F32, HTP_TYPE_F16, HTP_TYPE_Q4_0, HTP_TYPE_Q8_0 };
    static const char * wnames[] = { "f32", "f16", "q4_0", "q8_0" };
    for (uint32_t w = 0; w < 4; w++) {
        for (uint32_t act = 0; act < 2; act++) {
            uint32_t at = act ? HTP_TYPE_F16 : HTP_TYPE_F32;
            char name[48];
            snprintf(name, sizeof(name), "mul_mat %s x %s", wnames[w], act ? "f16" : "f32");
            struct htp_tensor a = tensor(0, 0, wtypes[w], 128, 40, 2, 1);
            struct htp_tensor b = tensor(0, 0, at, 128, 37, 2, 1);
            op2(name, HTP_OP_MUL_MAT, NULL, a, &b, tensor(0, 0, HTP_TYPE_F32, 40, 37, 2, 1), 3);
        }
    }
    /* K not a multiple of the 32-wide tile, weights broadcast over dim 2 */
    struct htp_tensor a = tensor(0, 0, HTP_TYPE_F16, 70, 33, 1, 1);
    struct htp_tensor b = tensor(0, 0, HTP_TYPE_F32, 70, 5, 3, 1);
    op2("mul_mat f16 k=70 bcast", HTP_OP_MUL_MAT, NULL, a, &b, tensor(0, 0, HTP_TYPE_F32, 33, 5, 3, 1), 2);
}

static void row_ops(void) {
    static const char * bin[] = { "add", "sub", "mul", "div" };
    for (uint32_t op = HTP_OP_ADD; op <= HTP_OP_DIV; op++) {
        char name[48];
        snprintf(name, sizeof(name), "%s f32+f16 bcast", bin[op - HTP_OP_ADD]);
        struct htp_tensor b = tensor(0, 0, HTP_TYPE_F16, 96, 1, 3, 1);
        op2(name, op, NULL, tensor(0, 0, HTP_TYPE_F32, 96, 4, 3, 1), &b, tensor(0, 0, HTP_TYPE_F32, 96, 4, 3, 1), 2);
    }
    int32_t p[HTP_MAX_PARAMS] = { 0 };
    p[0] = fbits(0.37f);
    p[1] = fbits(-0.5f);
    op2("scale f16 -> f16", HTP_OP_SCALE, p, tensor(0, 0, HTP_TYPE_F16, 200, 3, 1, 1), NULL,
        tensor(0, 0, HTP_TYPE_F16, 200, 3, 1, 1), 2);
    p[0] = fbits(1e-5f);
    op2("rms_norm", HTP_OP_RMS_NORM, p, tensor(0, 0, HTP_TYPE_F32, 300, 5, 1, 1), NULL,
        tensor(0, 0, HTP_TYPE_F32, 300, 5, 1, 1), 2);
    p[0] = fbits(0.125f);
    p[1] = 0;
    struct htp_tensor mask = tensor(0, 0, HTP_TYPE_F16, 77, 6, 1, 1);
    op2("soft_max f16 mask", HTP_OP_SOFTMAX, p, tensor(0, 0, HTP_TYPE_F32, 77, 6, 1, 1), &mask,
        tensor(0, 0, HTP_TYPE_F32, 77, 6, 1, 1), 2);
    memset(p, 0, sizeof(p));
    p[0] = 0; /* GLU_OP_SWIGLU */
    op2("swiglu", HTP_OP_GLU_SWIGLU, p, tensor(0, 0, HTP_TYPE_F32, 128, 4, 1, 1), NULL,
        tensor(0, 0, HTP_TYPE_F32, 64, 4, 1, 1), 2);
    op2("cpy f32 -> f16", HTP_OP_CPY, NULL, tensor(0, 0, HTP_TYPE_F32, 130, 7, 1, 1), NULL,
        tensor(0, 0, HTP_TYPE_F16, 130, 7, 1, 1), 2);
    op2("cpy f16 -> f32", HTP_OP_CPY, NULL, tensor(0, 0, HTP_TYPE_F16, 130, 7, 1, 1), NULL,
        tensor(0, 0, HTP_TYPE_F32, 130, 7, 1, 1), 2);
}

static void rope_and_rows(void) {
    for (int neox = 0; neox < 2; neox++) {
        int32_t p[HTP_MAX_PARAMS] = { 0 };
        p[1] = 64;         /* n_dims */
        p[2] = neox ? 2 : 0;
        p[4] = 4096;       /* n_ctx_orig */
        p[5] = fbits(10000.0f);
        p[6] = fbits(neox ? 0.25f : 1.0f);
        p[7] = fbits(neox ? 1.0f : 0.0f);
        p[8] = fbits(1.0f);
        p[9] = fbits(32.0f);
        p[10] = fbits(1.0f);
        struct htp_req req;
        memset(&req, 0, sizeof(req));
        req.op = HTP_OP_ROPE;
        memcpy(req.params, p, sizeof(p));
        req.n_src = 2;
        req.src[0] = tensor(100, 0, HTP_TYPE_F16, 64, 4, 6, 1);
        req.src[1] = tensor(101, 0, HTP_TYPE_I32, 6, 1, 1, 1);
        req.dst = tensor(102, 0, HTP_TYPE_F16, 64, 4, 6, 1);
        uint64_t sizes[3] = { nbytes(&req.src[0]), 24, nbytes(&req.dst) };
        uint8_t * bufs[3] = { (uint8_t *) malloc(sizes[0]), (uint8_t *) malloc(24), (uint8_t *) malloc(sizes[2]) };
        fill(bufs[0], &req.src[0]);
        int32_t pos[6] = { 0, 1, 17, 300, 2047, 4095 };
        memcpy(bufs[1], pos, 24);
        run_case(neox ? "rope neox f16 yarn" : "rope normal f16", &req, bufs, sizes, 3, 2);
    }
    /* GET_ROWS from q8_0 and f16 tables */
    static const uint32_t types[] = { HTP_TYPE_Q8_0, HTP_TYPE_F16 };
    for (int t = 0; t < 2; t++) {
        struct htp_req req;
        memset(&req, 0, sizeof(req));
        req.op = HTP_OP_GET_ROWS;
        req.n_src = 2;
        req.src[0] = tensor(100, 0, types[t], 64, 50, 1, 1);
        req.src[1] = tensor(101, 0, HTP_TYPE_I32, 5, 1, 1, 1);
        req.dst = tensor(102, 0, HTP_TYPE_F32, 64, 5, 1, 1);
        uint64_t sizes[3] = { nbytes(&req.src[0]), 20, nbytes(&req.dst) };
        uint8_t * bufs[3] = { (uint8_t *) malloc(sizes[0]), (uint8_t *) malloc(20), (uint8_t *) malloc(sizes[2]) };
        fill(bufs[0], &req.src[0]);
        int32_t idx[5] = { 3, 49, 0, 7, 7 };
        memcpy(bufs[1], idx, 20);
        run_case(t ? "get_rows f16" : "get_rows q8_0", &req, bufs, sizes, 3, 2);
    }
    /* an error answer: an index out of range */
    struct htp_req req;
    memset(&req, 0, sizeof(req));
    req.op = HTP_OP_GET_ROWS;
    req.n_src = 2;
    req.src[0] = tensor(100, 0, HTP_TYPE_F32, 8, 3, 1, 1);
    req.src[1] = tensor(101, 0, HTP_TYPE_I32, 1, 1, 1, 1);
    req.dst = tensor(102, 0, HTP_TYPE_F32, 8, 1, 1, 1);
    uint64_t sizes[3] = { 96, 4, 32 };
    uint8_t * bufs[3] = { (uint8_t *) calloc(1, 96), (uint8_t *) malloc(4), (uint8_t *) calloc(1, 32) };
    int32_t bad = 9;
    memcpy(bufs[1], &bad, 4);
    run_case("get_rows index 9 of 3", &req, bufs, sizes, 3, 1);
}

int main(void) {
    g_vtcm = (uint8_t *) malloc(VTCM_BYTES);
#if defined(__HVX__)
    printf("# htp kernel tests: Hexagon v%d, HVX v%d\n", __HEXAGON_ARCH__, __HVX_ARCH__);
#else
    printf("# htp kernel tests: host (portable C)\n");
#endif
    conversions();
    mul_mats();
    row_ops();
    rope_and_rows();
    printf("# done\n");
    return 0;
}
