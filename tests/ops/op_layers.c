/* op_layers.c — the harness's families of the other ops: memory, linear (dense, of 0/1 inputs, event-driven), conv
 * (every layout and workspace choice), pools, dropout, element-wise ops, the finite check, readout and losses,
 * optimizer steps, storage conversions, compact spikes and recorded graphs. Each family's comment names the row
 * fields it reads, its plain formulation (the CPU runner's reference) and its bounds. */
#include "op_harness.h"

#include "core/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- memory */

/* alloc (c->n bytes, and 0), copy_from_host, copy, zero (a middle range), sync, copy_to_host and release on each
 * side: the bytes read back are the host's with that range zeroed; so are those of ten copy_to_host_async calls
 * (more than the backend keeps on their way at once) after wait_host_copies; held_bytes does not count what alloc
 * gave out.
 * destroy: the runners free every tested backend through it (op_backend_free). */
static void run_memory(op_harness *h, const op_case *c, int v)
{
    const size_t bytes = (size_t)c->n, lo = bytes / 3, len = bytes / 3;
    snprintf(h->what, sizeof h->what, "memory %zu bytes", bytes);
    uint8_t *src = malloc(bytes + 1), *want = malloc(bytes + 1), *got = malloc(bytes + 1);
    for (size_t i = 0; i < bytes; i++) src[i] = (uint8_t)(sf_uniform(3, 1, i) * 256.0f);
    memcpy(want, src, bytes);
    memset(want + lo, 0, len);
    OP_SIDES(s)
    {
        void *a = NULL, *b = NULL, *none = NULL;
        OP(h, s, alloc, bytes, &a);
        OP(h, s, alloc, bytes, &b);
        OP(h, s, alloc, 0, &none);
        OP(h, s, copy_from_host, a, src, bytes);
        OP(h, s, copy, b, a, bytes);
        OP(h, s, zero, (char *)b + lo, len);
        OP0(h, s, sync);
        memset(got, 0x5a, bytes);
        OP(h, s, copy_to_host, got, b, bytes);
        CHECK(memcmp(got, want, bytes) == 0, "%s: side %d read back other bytes", h->what, s);
        if (sf_backend_supports(h->be[s], SF_BACKEND_OP_copy_to_host_async)) {
            memset(got, 0x5a, bytes);
            for (size_t k = 0, at = 0; k < 10; k++) {
                const size_t end = bytes * (k + 1) / 10;
                OP(h, s, copy_to_host_async, got + at, (const char *)b + at, end - at);
                at = end;
            }
            OP0(h, s, wait_host_copies);
            CHECK(memcmp(got, want, bytes) == 0, "%s: side %d read back other bytes without waiting", h->what, s);
        }
        OPV(h, s, release, a);
        OPV(h, s, release, b);
        OPV(h, s, release, none);
        if (!sf_backend_supports(h->be[s], SF_BACKEND_OP_held_bytes)) continue;
        const size_t before = OPV0(h, s, held_bytes);
        OP(h, s, alloc, bytes, &a);
        CHECK(OPV0(h, s, held_bytes) == before, "%s: side %d counts an allocation as held", h->what, s);
        OPV(h, s, release, a);
    }
    free(src), free(want), free(got);
}

OP_FAMILY(op_memory, "memory", run_memory, SF_BACKEND_OP_destroy, SF_BACKEND_OP_alloc, SF_BACKEND_OP_release,
          SF_BACKEND_OP_held_bytes, SF_BACKEND_OP_copy_from_host, SF_BACKEND_OP_copy_to_host,
          SF_BACKEND_OP_copy_to_host_async, SF_BACKEND_OP_wait_host_copies, SF_BACKEND_OP_copy, SF_BACKEND_OP_zero,
          SF_BACKEND_OP_sync);

/* ---------------------------------------------------------------- linear */

/* The bounds of a product's output stored in the activation type and of its float gradients. */
static op_tol product_act(double fp32) { return (op_tol){0.0, fp32, 1e-3, OP_BF16_ACT, OP_FP16_ACT}; }
static op_tol product_f32(double fp32, double f16) { return (op_tol){0.0, fp32, 1e-3, f16, f16}; }

/* linear_forward and linear_backward: y = x·Wᵀ + b, dx (where c->want_dx), dW, db (where c->bias) over c->rows rows
 * of c->in → c->out. No plain formulation (BLAS). Bounds: 1e-5 in fp32, 1e-3 in tf32 (10-bit operands); in 16 bits
 * y and dx the output bound, dW 1e-4 (fp32 sums of 16-bit products), db 1e-5. */
static void run_linear(op_harness *h, const op_case *c, int v)
{
    const size_t nx = (size_t)(c->rows * c->in), ny = (size_t)(c->rows * c->out), nw = (size_t)c->out * c->in;
    snprintf(h->what, sizeof h->what, "linear rows=%lld in=%d out=%d bias=%d dx=%d", (long long)c->rows, c->in, c->out,
             c->bias, c->want_dx);
    op_ten x = op_randn(h, OP_ACTV, nx, 0.0f, 1.0f, 31), w = op_randn(h, OP_ACTV, nw, 0.0f, 0.3f, 32);
    op_ten b = op_randn(h, OP_F32, (size_t)c->out, 0.0f, 0.3f, 33), dy = op_randn(h, OP_ACTV, ny, 0.0f, 1.0f, 34);
    op_ten y = op_out(h, OP_ACTV, ny), dx = op_out(h, OP_ACTV, nx), dw = op_out(h, OP_F32, nw);
    op_ten db = op_out(h, OP_F32, (size_t)c->out);
    OP_SIDES(s)
    {
        OP(h, s, linear_forward, c->rows, c->in, c->out, OP_P(x, s), OP_P(w, s), c->bias ? OP_P(b, s) : NULL,
           OP_P(y, s));
        OP(h, s, linear_backward, c->rows, c->in, c->out, OP_P(x, s), OP_P(w, s), OP_P(dy, s),
           c->want_dx ? OP_P(dx, s) : NULL, OP_P(dw, s), c->bias ? OP_P(db, s) : NULL);
    }
    op_cmp(h, "y", &y, product_act(1e-5));
    if (c->want_dx) op_cmp(h, "dx", &dx, product_act(1e-5));
    op_cmp(h, "dw", &dw, product_f32(1e-5, 1e-4));
    if (c->bias) op_cmp(h, "db", &db, product_f32(1e-5, 1e-5));
    op_free(h, &x), op_free(h, &w), op_free(h, &b), op_free(h, &dy), op_free(h, &y), op_free(h, &dx), op_free(h, &dw);
    op_free(h, &db);
}

OP_FAMILY(op_linear, "linear", run_linear, SF_BACKEND_OP_linear_forward, SF_BACKEND_OP_linear_backward);

/* binary_linear_forward, _backward and _backward_bits on 0/1 inputs at density 0.3 (c->rows, c->in, c->out,
 * c->bias): the fp32 CUDA backend's products of bf16 or TF32 parts are exact, so they meet the CPU's SGEMM at 1e-6
 * (TF32 arithmetic would miss it by 300×); the backward from x's spike bits gives the tested side's float-input bits.
 * Plain: the dense linear ops (and the dense backward for the bits one, where the reference lacks it). Bounds: y,
 * dW 1e-6 and dx, db 1e-5 in fp32; other precisions as linear's. */
static void run_binary_linear(op_harness *h, const op_case *c, int v)
{
    const int64_t rows = c->rows, words = sf_spike_words(c->in);
    const size_t nx = (size_t)(rows * c->in), ny = (size_t)(rows * c->out), nw = (size_t)c->out * c->in;
    snprintf(h->what, sizeof h->what, "binary linear rows=%lld in=%d out=%d bias=%d", (long long)rows, c->in, c->out,
             c->bias);
    float *hx = op_host_spikes(rows, c->in, 0.3, false, 41);
    uint32_t *hb = malloc(4 * (size_t)(rows * words) + 4);
    op_host_pack(rows, c->in, hx, hb, NULL, NULL);
    op_ten x = op_in(h, OP_ACTV, nx, hx), xb = op_in(h, OP_RAW, 4 * (size_t)(rows * words), hb);
    op_ten w = op_randn(h, OP_ACTV, nw, 0.0f, 0.3f, 42), b = op_randn(h, OP_F32, (size_t)c->out, 0.0f, 0.3f, 43);
    op_ten dy = op_randn(h, OP_ACTV, ny, 0.0f, 1.0f, 44), y = op_out(h, OP_ACTV, ny);
    op_ten dx = op_out(h, OP_ACTV, nx), dw = op_out(h, OP_F32, nw), db = op_out(h, OP_F32, (size_t)c->out);
    op_ten dx2 = op_out(h, OP_ACTV, nx), dw2 = op_out(h, OP_F32, nw), db2 = op_out(h, OP_F32, (size_t)c->out);
    free(hx), free(hb);
    const float *bias[2] = {c->bias ? OP_P(b, 0) : NULL, c->bias ? OP_P(b, 1) : NULL};
    float *dbias[2] = {c->bias ? OP_P(db, 0) : NULL, c->bias ? OP_P(db, 1) : NULL};
    OP_SIDES(s)
    {
        if (op_plain(h, s, SF_BACKEND_OP_binary_linear_forward)) {
            OP(h, s, linear_forward, rows, c->in, c->out, OP_P(x, s), OP_P(w, s), bias[s], OP_P(y, s));
            OP(h, s, linear_backward, rows, c->in, c->out, OP_P(x, s), OP_P(w, s), OP_P(dy, s), OP_P(dx, s),
               OP_P(dw, s), dbias[s]);
        } else {
            OP(h, s, binary_linear_forward, rows, c->in, c->out, OP_P(x, s), OP_P(w, s), bias[s], OP_P(y, s));
            OP(h, s, binary_linear_backward, rows, c->in, c->out, OP_P(x, s), OP_P(w, s), OP_P(dy, s), OP_P(dx, s),
               OP_P(dw, s), dbias[s]);
        }
    }
    const op_tol fine = {0.0, 1e-6, 1e-3, OP_BF16_ACT, OP_FP16_ACT},
                 coarse = {0.0, 1e-5, 1e-3, OP_BF16_ACT, OP_FP16_ACT};
    op_cmp(h, "y", &y, fine);
    op_cmp(h, "dw", &dw, (op_tol){0.0, 1e-6, 1e-3, 1e-4, 1e-4});
    op_cmp(h, "dx", &dx, coarse);
    if (c->bias) op_cmp(h, "db", &db, (op_tol){0.0, 1e-5, 1e-3, 1e-5, 1e-5});
    if (sf_backend_supports(h->be[1], SF_BACKEND_OP_binary_linear_backward_bits)) {
        float *dbias2[2] = {c->bias ? OP_P(db2, 0) : NULL, c->bias ? OP_P(db2, 1) : NULL};
        OP_SIDES(s)
        {
            if (op_plain(h, s, SF_BACKEND_OP_binary_linear_backward_bits))
                OP(h, s, linear_backward, rows, c->in, c->out, OP_P(x, s), OP_P(w, s), OP_P(dy, s), OP_P(dx2, s),
                   OP_P(dw2, s), dbias2[s]);
            else
                OP(h, s, binary_linear_backward_bits, rows, c->in, c->out, OP_U32(xb, s), OP_P(w, s), OP_P(dy, s),
                   OP_P(dx2, s), OP_P(dw2, s), dbias2[s]);
        }
        op_same(h, 1, "dx from bits", &dx, &dx2);
        op_same(h, 1, "dw from bits", &dw, &dw2);
        if (c->bias) op_same(h, 1, "db from bits", &db, &db2);
    }
    op_ten *all[] = {&x, &xb, &w, &b, &dy, &y, &dx, &dw, &db, &dx2, &dw2, &db2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) op_free(h, all[i]);
}

OP_FAMILY(op_binary_linear, "binary_linear", run_binary_linear, SF_BACKEND_OP_binary_linear_forward,
          SF_BACKEND_OP_binary_linear_backward, SF_BACKEND_OP_binary_linear_backward_bits);

/* ---------------------------------------------------------------- convolution */

static sf_conv_shape conv_shape(const op_case *c)
{
    return (sf_conv_shape){c->n,
                           c->C,
                           c->h,
                           c->w,
                           c->cout,
                           c->k,
                           c->stride,
                           c->pad,
                           (c->h + 2 * c->pad - c->k) / c->stride + 1,
                           (c->w + 2 * c->pad - c->k) / c->stride + 1,
                           false,
                           false,
                           (c->flags & OP_SPIKE_X) != 0};
}

/* [n][c][hw] → [n][hw][c] (to_nhwc), or back. */
static void permute(const float *src, float *dst, int64_t n, int64_t c, int64_t hw, bool to_nhwc)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t q = 0; q < hw; q++) {
                const int64_t nchw = (i * c + ch) * hw + q, nhwc = (i * hw + q) * c + ch;
                dst[to_nhwc ? nhwc : nchw] = src[to_nhwc ? nchw : nhwc];
            }
}

typedef struct {
    sf_conv_shape sh;
    op_ten x, w, b, dy, y, dx, dw, db;
    op_tol out_tol, dw_tol, db_tol;
    bool bias;
} conv_io;

/* Side 1's convolution once more with x (and dx) and/or y (and dy) NHWC, as the engine keeps tensors between
 * convolutions on such a backend: the results, put back in NCHW, against side 0's. */
static void conv_layouts(op_harness *h, const conv_io *io)
{
    const int64_t hw = (int64_t)io->sh.h * io->sh.w, ohw = (int64_t)io->sh.oh * io->sh.ow;
    float *x = op_get(h, &io->x, 0), *dy = op_get(h, &io->dy, 0);
    for (int v = 1; v < 4; v++) {
        sf_conv_shape sh = io->sh;
        sh.x_nhwc = v & 1;
        sh.y_nhwc = v >> 1;
        /* 0: no NHWC algorithm fits the cap with the copies (a batch that cannot be chunked under 1 MiB) */
        const size_t bytes = OPV(h, 1, conv_workspace, &sh, SF_CONV_PASS_BOTH);
        if (bytes == 0) continue;
        float *xp = malloc(4 * io->x.n + 4), *dyp = malloc(4 * io->dy.n + 4);
        if (sh.x_nhwc) permute(x, xp, sh.n, sh.cin, hw, true);
        else memcpy(xp, x, 4 * io->x.n);
        if (sh.y_nhwc) permute(dy, dyp, sh.n, sh.cout, ohw, true);
        else memcpy(dyp, dy, 4 * io->dy.n);
        op_ten lx = op_out(h, OP_ACTV, io->x.n), ldy = op_out(h, OP_ACTV, io->dy.n), ly = op_out(h, OP_ACTV, io->y.n);
        op_ten ldx = op_out(h, OP_ACTV, io->dx.n), ldw = op_out(h, OP_F32, io->dw.n), ldb = op_out(h, OP_F32, io->db.n);
        op_put_side(h, &lx, 1, xp);
        op_put_side(h, &ldy, 1, dyp);
        op_ws ws = op_ws_alloc(h, 1, bytes);
        OP(h, 1, conv_forward, &sh, OP_P(lx, 1), OP_P(io->w, 1), io->bias ? OP_P(io->b, 1) : NULL, OP_P(ly, 1), ws.p);
        OP(h, 1, conv_backward, &sh, OP_P(lx, 1), OP_P(io->w, 1), OP_P(ldy, 1), OP_P(ldx, 1), OP_P(ldw, 1),
           io->bias ? OP_P(ldb, 1) : NULL, ws.p);
        op_ws_free(h, 1, &ws, "conv in NHWC");
        char saved[sizeof h->what];
        memcpy(saved, h->what, sizeof saved);
        snprintf(h->what, sizeof h->what, "%.150s, x %s, y %s", saved, sh.x_nhwc ? "NHWC" : "NCHW",
                 sh.y_nhwc ? "NHWC" : "NCHW");
        float *gy = op_get(h, &ly, 1), *gdx = op_get(h, &ldx, 1), *gdw = op_get(h, &ldw, 1), *gdb = op_get(h, &ldb, 1);
        float *back = malloc(4 * (io->x.n > io->y.n ? io->x.n : io->y.n) + 4);
        if (sh.y_nhwc) permute(gy, back, sh.n, sh.cout, ohw, false);
        else memcpy(back, gy, 4 * io->y.n);
        op_cmp_host(h, "y", back, &io->y, io->out_tol);
        if (sh.x_nhwc) permute(gdx, back, sh.n, sh.cin, hw, false);
        else memcpy(back, gdx, 4 * io->dx.n);
        op_cmp_host(h, "dx", back, &io->dx, io->out_tol);
        op_cmp_host(h, "dw", gdw, &io->dw, io->dw_tol);
        if (io->bias) op_cmp_host(h, "db", gdb, &io->db, io->db_tol);
        memcpy(h->what, saved, sizeof saved);
        free(xp), free(dyp), free(gy), free(gdx), free(gdw), free(gdb), free(back);
        op_free(h, &lx), op_free(h, &ldy), op_free(h, &ly), op_free(h, &ldx), op_free(h, &ldw), op_free(h, &ldb);
    }
    free(x), free(dy);
}

/* conv_workspace, conv_forward and conv_backward on NCHW tensors (c->n images of c->C × c->h × c->w, c->cout filters
 * of c->k², c->stride, c->pad, c->bias; OP_SPIKE_X: x of 0/1 values at density 0.3, marked binary), each pass with
 * the workspace it states and a guard behind it; then NHWC layouts where the tested backend takes them. No plain
 * formulation (im2col + SGEMM). Bounds: 1e-5 in fp32 (1e-6 for spikes on exact parts), 1e-3 in tf32; in 16 bits y,
 * dx and dW the output bound (cuDNN writes dW in 16 bits), db 1e-5. */
static void conv_check(op_harness *h, const op_case *c)
{
    conv_io io = {.sh = conv_shape(c), .bias = c->bias != 0};
    const sf_conv_shape *sh = &io.sh;
    const size_t nx = (size_t)(sh->n * sh->cin * sh->h * sh->w), ny = (size_t)(sh->n * sh->cout * sh->oh * sh->ow);
    const size_t nw = (size_t)(sh->cout * sh->cin * sh->k * sh->k);
    const double fp32 = sh->x_binary && h->exact_parts ? 1e-6 : 1e-5;
    io.out_tol = (op_tol){0.0, fp32, 1e-3, OP_BF16_ACT, OP_FP16_ACT};
    io.dw_tol = io.out_tol;
    io.db_tol = (op_tol){0.0, fp32, 1e-3, 1e-5, 1e-5};
    if (sh->x_binary) {
        float *hx = op_host_spikes(sh->n * sh->cin, (int64_t)sh->h * sh->w, 0.3, false, 41);
        io.x = op_in(h, OP_ACTV, nx, hx);
        free(hx);
    } else {
        io.x = op_randn(h, OP_ACTV, nx, 0.0f, 1.0f, 41);
    }
    io.w = op_randn(h, OP_ACTV, nw, 0.0f, 0.2f, 42), io.b = op_randn(h, OP_F32, (size_t)sh->cout, 0.0f, 0.2f, 43);
    io.dy = op_randn(h, OP_ACTV, ny, 0.0f, 1.0f, 44), io.y = op_out(h, OP_ACTV, ny), io.dx = op_out(h, OP_ACTV, nx);
    io.dw = op_out(h, OP_F32, nw), io.db = op_out(h, OP_F32, (size_t)sh->cout);
    OP_SIDES(s)
    {
        op_ws f = op_ws_alloc(h, s, OPV(h, s, conv_workspace, sh, SF_CONV_PASS_FORWARD));
        op_ws b = op_ws_alloc(h, s, OPV(h, s, conv_workspace, sh, SF_CONV_PASS_BACKWARD));
        OP(h, s, conv_forward, sh, OP_P(io.x, s), OP_P(io.w, s), io.bias ? OP_P(io.b, s) : NULL, OP_P(io.y, s), f.p);
        OP(h, s, conv_backward, sh, OP_P(io.x, s), OP_P(io.w, s), OP_P(io.dy, s), OP_P(io.dx, s), OP_P(io.dw, s),
           io.bias ? OP_P(io.db, s) : NULL, b.p);
        op_ws_free(h, s, &f, "forward");
        op_ws_free(h, s, &b, "backward");
    }
    op_cmp(h, "y", &io.y, io.out_tol);
    op_cmp(h, "dx", &io.dx, io.out_tol);
    op_cmp(h, "dw", &io.dw, io.dw_tol);
    if (io.bias) op_cmp(h, "db", &io.db, io.db_tol);
    if (h->nhwc_layouts) conv_layouts(h, &io);
    op_ten *all[] = {&io.x, &io.w, &io.b, &io.dy, &io.y, &io.dx, &io.dw, &io.db};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) op_free(h, all[i]);
}

static void run_conv(op_harness *h, const op_case *c, int v)
{
    snprintf(h->what, sizeof h->what, "conv n=%lld %dx%dx%d -> %d k=%d s=%d p=%d bias=%d%s", (long long)c->n, c->C,
             c->h, c->w, c->cout, c->k, c->stride, c->pad, c->bias, c->flags & OP_SPIKE_X ? ", spikes" : "");
    conv_check(h, c);
}

OP_FAMILY(op_conv, "conv", run_conv, SF_BACKEND_OP_conv_workspace, SF_BACKEND_OP_conv_forward,
          SF_BACKEND_OP_conv_backward);

/* conv_lean on the tested side, where it has it: for each pass with a measured choice of less workspace, that
 * choice needs less than the pass states now, and once taken conv_workspace states it; the convolution then meets
 * the reference as conv's. Rows give shapes no other row uses (the choice holds for every later layer of the
 * shape). */
static void run_conv_lean(op_harness *h, const op_case *c, int v)
{
    if (!sf_backend_supports(h->be[1], SF_BACKEND_OP_conv_lean)) return;
    const sf_conv_shape sh = conv_shape(c);
    snprintf(h->what, sizeof h->what, "conv_lean n=%lld %dx%dx%d -> %d k=%d", (long long)c->n, c->C, c->h, c->w,
             c->cout, c->k);
    const sf_conv_pass passes[] = {SF_CONV_PASS_FORWARD, SF_CONV_PASS_BACKWARD};
    int taken = 0;
    for (int k = 0; k < 2; k++) {
        const size_t now = OPV(h, 1, conv_workspace, &sh, passes[k]);
        sf_conv_lean q;
        if (!OPV(h, 1, conv_lean, &sh, passes[k], false, &q)) continue;
        CHECK(q.ws < now, "%s: the leaner choice of pass %d needs %zu bytes, the current one %zu", h->what, k, q.ws,
              now);
        sf_conv_lean q2;
        CHECK(OPV(h, 1, conv_lean, &sh, passes[k], true, &q2) && q2.ws == q.ws, "%s: pass %d: the choice was not taken",
              h->what, k);
        CHECK(OPV(h, 1, conv_workspace, &sh, passes[k]) == q.ws, "%s: pass %d states %zu bytes after taking %zu",
              h->what, k, OPV(h, 1, conv_workspace, &sh, passes[k]), q.ws);
        taken++;
    }
    printf("%s: %d of 2 passes had a leaner choice\n", h->what, taken);
    conv_check(h, c);
}

OP_FAMILY(op_conv_lean, "conv_lean", run_conv_lean, SF_BACKEND_OP_conv_lean);

/* conv_choices and conv_set_choice on the tested side, where it has them: the choices of every shape seen so far,
 * given back line by line, leave the text and each pass's workspace as they were, and the convolution then meets
 * the reference as conv's; a line that is not one, or names an algorithm cuDNN has not, is refused by name. */
static void run_conv_choices(op_harness *h, const op_case *c, int v)
{
    if (!sf_backend_supports(h->be[1], SF_BACKEND_OP_conv_choices)) return;
    const sf_conv_shape sh = conv_shape(c);
    snprintf(h->what, sizeof h->what, "conv_choices n=%lld %dx%dx%d -> %d k=%d s=%d%s", (long long)c->n, c->C, c->h,
             c->w, c->cout, c->k, c->stride, c->flags & OP_SPIKE_X ? ", spikes" : "");
    const size_t ws[2] = {OPV(h, 1, conv_workspace, &sh, SF_CONV_PASS_FORWARD),
                          OPV(h, 1, conv_workspace, &sh, SF_CONV_PASS_BACKWARD)};
    const size_t len = OPV(h, 1, conv_choices, NULL, 0);
    char *text = malloc(len + 1), *again = malloc(len + 1), *line = malloc(len + 1);
    CHECK(text && again && line && len > 0, "%s: %zu bytes of choices", h->what, len);
    if (!text || !again || !line || !len) exit(tu_finish("op_harness"));
    CHECK(OPV(h, 1, conv_choices, text, len + 1) == len && strlen(text) == len, "%s: the text's length", h->what);
    for (const char *at = text; *at; at += strcspn(at, "\n") + 1) {
        const size_t n = strcspn(at, "\n");
        memcpy(line, at, n);
        line[n] = 0;
        OP(h, 1, conv_set_choice, line);
    }
    CHECK(OPV(h, 1, conv_choices, again, len + 1) == len && strcmp(text, again) == 0, "%s: the choices given back "
          "read back otherwise:\n%s\nagainst\n%s", h->what, again, text);
    CHECK(OPV(h, 1, conv_workspace, &sh, SF_CONV_PASS_FORWARD) == ws[0] &&
              OPV(h, 1, conv_workspace, &sh, SF_CONV_PASS_BACKWARD) == ws[1],
          "%s: the workspace changed with its own choices", h->what);
    sf_conv_lean q;
    CHECK(!OPV(h, 1, conv_lean, &sh, SF_CONV_PASS_BOTH, false, &q), "%s: a recorded choice offered a leaner one",
          h->what);
    const char *bad[] = {"conv 6 5 11", "conv 6 5 11 9 7 3 1 1 11 9 0 0 0 0 0 99 0 6 0 0 0 6 0 0 0 6"};
    for (int i = 0; i < 2; i++) {
        const sf_status st = OPV(h, 1, conv_set_choice, bad[i]);
        CHECK(st == SF_ERR_FORMAT && strstr(sf_last_error(), "recorded convolution choice"),
              "%s: the bad line '%s' gave %d: %s", h->what, bad[i], (int)st, sf_last_error());
    }
    printf("%s: %zu bytes of choices given back\n", h->what, len);
    free(text);
    free(again);
    free(line);
    conv_check(h, c);
}

OP_FAMILY(op_conv_choices, "conv_choices", run_conv_choices, SF_BACKEND_OP_conv_choices, SF_BACKEND_OP_conv_set_choice);

/* ---------------------------------------------------------------- pools, dropout, element-wise */

/* avgpool and maxpool forward and backward over c->n planes of c->h × c->w (window c->k, c->stride, c->pad), NCHW,
 * or NHWC images of c->C channels where a row sets it; every other input a spike (many exact ties, which the
 * first-maximum rule must break alike). No plain formulation. Bounds: max-pool values and argmax exact; the rest
 * 1e-6 and 16-bit. */
static void run_pool(op_harness *h, const op_case *c, int v)
{
    const sf_pool_shape sh = {.n = c->n,
                              .h = c->h,
                              .w = c->w,
                              .k = c->k,
                              .stride = c->stride,
                              .oh = (c->h + 2 * c->pad - c->k) / c->stride + 1,
                              .ow = (c->w + 2 * c->pad - c->k) / c->stride + 1,
                              .pad = c->pad,
                              .c = c->C};
    const size_t nx = (size_t)(sh.n * sh.h * sh.w), ny = (size_t)(sh.n * sh.oh * sh.ow);
    snprintf(h->what, sizeof h->what, "pool n=%lld %dx%d k=%d s=%d pad=%d %s%d", (long long)c->n, c->h, c->w, c->k,
             c->stride, c->pad, c->C ? "NHWC c=" : "NCHW", c->C);
    float *hx = op_host_randn(nx, 0.0f, 1.0f, 51);
    for (size_t i = 0; i < nx; i += 2) hx[i] = hx[i] > 0.0f;
    op_ten x = op_in(h, OP_ACTV, nx, hx), dy = op_randn(h, OP_ACTV, ny, 0.0f, 1.0f, 52);
    op_ten y = op_out(h, OP_ACTV, ny), dx = op_out(h, OP_ACTV, nx), ym = op_out(h, OP_ACTV, ny);
    op_ten am = op_out(h, OP_RAW, ny), dxm = op_out(h, OP_ACTV, nx);
    free(hx);
    const bool max = c->k <= 16; /* the argmax is one byte; an average takes any window (a global pool) */
    OP_SIDES(s)
    {
        OP(h, s, avgpool_forward, &sh, OP_P(x, s), OP_P(y, s));
        OP(h, s, avgpool_backward, &sh, OP_P(dy, s), OP_P(dx, s));
        if (max) {
            OP(h, s, maxpool_forward, &sh, OP_P(x, s), OP_P(ym, s), OP_U8(am, s));
            OP(h, s, maxpool_backward, &sh, OP_U8(am, s), OP_P(dy, s), OP_P(dxm, s));
        }
    }
    op_cmp(h, "avgpool y", &y, OP_TOL_ACT(1e-6));
    op_cmp(h, "avgpool dx", &dx, OP_TOL_ACT(1e-6));
    if (max) {
        op_cmp(h, "maxpool y", &ym, OP_TOL_EXACT);
        op_cmp_raw(h, "maxpool argmax", &am);
        op_cmp(h, "maxpool dx", &dxm, OP_TOL_ACT(1e-6));
    }
    op_free(h, &x), op_free(h, &dy), op_free(h, &y), op_free(h, &dx), op_free(h, &ym), op_free(h, &am);
    op_free(h, &dxm);
}

OP_FAMILY(op_pool, "pool", run_pool, SF_BACKEND_OP_avgpool_forward, SF_BACKEND_OP_avgpool_backward,
          SF_BACKEND_OP_maxpool_forward, SF_BACKEND_OP_maxpool_backward);

/* dropout_forward and _backward over c->T steps of c->n values, p = 0.3. Plain: the mask drawn on the host
 * (sf_dropout_keep), applied as x·mask/(1 - p). Bounds: exact; in 16 bits the output bound. */
static void run_dropout(op_harness *h, const op_case *c, int v)
{
    const int64_t T = c->T, n = c->n;
    const size_t m = (size_t)(T * n);
    const float p = 0.3f, scale = 1.0f / (1.0f - p);
    snprintf(h->what, sizeof h->what, "dropout T=%lld n=%lld", (long long)T, (long long)n);
    op_ten x = op_randn(h, OP_ACTV, m, 0.0f, 1.0f, 61), dy = op_randn(h, OP_ACTV, m, 0.0f, 1.0f, 62);
    op_ten y = op_out(h, OP_ACTV, m), dx = op_out(h, OP_ACTV, m);
    OP_SIDES(s)
    {
        if (!op_plain(h, s, SF_BACKEND_OP_dropout_forward)) {
            OP(h, s, dropout_forward, T, n, p, 7, 11, OP_P(x, s), OP_P(y, s));
            OP(h, s, dropout_backward, T, n, p, 7, 11, OP_P(dy, s), OP_P(dx, s));
            continue;
        }
        float *hx = op_get(h, &x, s), *hd = op_get(h, &dy, s);
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < n; i++) {
                const float k = sf_dropout_keep(7, 11, (uint64_t)i, p) ? scale : 0.0f;
                hx[t * n + i] *= k, hd[t * n + i] *= k;
            }
        op_put_side(h, &y, s, hx), op_put_side(h, &dx, s, hd);
        free(hx), free(hd);
    }
    op_cmp(h, "forward", &y, OP_TOL_ACT(0.0));
    op_cmp(h, "backward", &dx, OP_TOL_ACT(0.0));
    op_free(h, &x), op_free(h, &dy), op_free(h, &y), op_free(h, &dx);
}

OP_FAMILY(op_dropout, "dropout", run_dropout, SF_BACKEND_OP_dropout_forward, SF_BACKEND_OP_dropout_backward);

/* add, axpy (alpha 0.37), act_to_u8 and u8_to_act over c->n values (spikes for the conversions). No plain
 * formulation. Bounds: add and the conversions exact, axpy 1e-6; in 16 bits add and axpy the output bound. */
static void run_elementwise(op_harness *h, const op_case *c, int v)
{
    const size_t m = (size_t)c->n;
    snprintf(h->what, sizeof h->what, "element-wise n=%zu", m);
    op_ten a = op_randn(h, OP_ACTV, m, 0.0f, 1.0f, 61), b = op_randn(h, OP_ACTV, m, 0.0f, 1.0f, 62);
    op_ten sum = op_out(h, OP_ACTV, m), u8 = op_out(h, OP_RAW, m), back = op_out(h, OP_ACTV, m);
    float *hs = malloc(4 * m + 4);
    for (size_t i = 0; i < m; i++) hs[i] = (float)(i % 3 == 0);
    op_ten sp = op_in(h, OP_ACTV, m, hs);
    free(hs);
    OP_SIDES(s)
    {
        OP(h, s, add, (int64_t)m, OP_P(a, s), OP_P(b, s), OP_P(sum, s));
        OP(h, s, axpy, (int64_t)m, 0.37f, OP_P(a, s), OP_P(b, s));
        OP(h, s, act_to_u8, (int64_t)m, OP_P(sp, s), OP_U8(u8, s));
        OP(h, s, u8_to_act, (int64_t)m, OP_U8(u8, s), OP_P(back, s));
    }
    op_cmp(h, "add", &sum, OP_TOL_ACT(0.0));
    op_cmp(h, "axpy", &b, OP_TOL_ACT(1e-6));
    op_cmp_raw(h, "act_to_u8", &u8);
    op_cmp(h, "u8_to_act", &back, OP_TOL_EXACT);
    op_free(h, &a), op_free(h, &b), op_free(h, &sum), op_free(h, &u8), op_free(h, &back), op_free(h, &sp);
}

OP_FAMILY(op_elementwise, "elementwise", run_elementwise, SF_BACKEND_OP_add, SF_BACKEND_OP_axpy,
          SF_BACKEND_OP_act_to_u8, SF_BACKEND_OP_u8_to_act);

/* connect_forward and connect_backward, AND (variant 0) and IAND (1), over c->n values: spikes a and b (40% and 60%
 * ones), a normal dy; the backward again wanting one gradient (the other and the input it reads NULL), which must
 * equal the pair's. No plain formulation. Exact: products of 0/1 and ±1 with dy. */
static void run_connect(op_harness *h, const op_case *c, int v)
{
    const sf_connect cn = v == 0 ? SF_CONNECT_AND : SF_CONNECT_IAND;
    const size_t m = (size_t)c->n;
    snprintf(h->what, sizeof h->what, "connect %s n=%zu", sf_connect_name(cn), m);
    float *ha = op_host_spikes(1, (int64_t)m, 0.4, false, 64), *hb = op_host_spikes(1, (int64_t)m, 0.6, false, 65);
    op_ten a = op_in(h, OP_ACTV, m, ha), b = op_in(h, OP_ACTV, m, hb), dy = op_randn(h, OP_ACTV, m, 0.0f, 1.0f, 66);
    free(ha), free(hb);
    op_ten y = op_out(h, OP_ACTV, m), da = op_out(h, OP_ACTV, m), db = op_out(h, OP_ACTV, m);
    op_ten da_only = op_out(h, OP_ACTV, m), db_only = op_out(h, OP_ACTV, m);
    OP_SIDES(s)
    {
        OP(h, s, connect_forward, cn, (int64_t)m, OP_P(a, s), OP_P(b, s), OP_P(y, s));
        OP(h, s, connect_backward, cn, (int64_t)m, OP_P(a, s), OP_P(b, s), OP_P(dy, s), OP_P(da, s), OP_P(db, s));
        OP(h, s, connect_backward, cn, (int64_t)m, NULL, OP_P(b, s), OP_P(dy, s), OP_P(da_only, s), NULL);
        OP(h, s, connect_backward, cn, (int64_t)m, OP_P(a, s), NULL, OP_P(dy, s), NULL, OP_P(db_only, s));
        op_same(h, s, "da alone", &da, &da_only);
        op_same(h, s, "db alone", &db, &db_only);
    }
    op_cmp(h, "forward", &y, OP_TOL_EXACT);
    op_cmp(h, "da", &da, OP_TOL_EXACT);
    op_cmp(h, "db", &db, OP_TOL_EXACT);
    op_free(h, &a), op_free(h, &b), op_free(h, &dy), op_free(h, &y), op_free(h, &da), op_free(h, &db);
    op_free(h, &da_only), op_free(h, &db_only);
}

OP_FAMILY(op_connect, "connect", run_connect, SF_BACKEND_OP_connect_forward, SF_BACKEND_OP_connect_backward);

/* check_finite over c->n finite values (the flag stays 0), and over values with a NaN and with an Inf (it is set).
 * Exact. */
static void run_check_finite(op_harness *h, const op_case *c, int v)
{
    snprintf(h->what, sizeof h->what, "check_finite n=%lld", (long long)c->n);
    const float nan3[3] = {1.0f, NAN, 2.0f}, inf2[2] = {INFINITY, 0.0f};
    op_ten x = op_randn(h, OP_F32, (size_t)c->n, 0.0f, 1.0f, 63), bad = op_in(h, OP_F32, 3, nan3);
    op_ten inf = op_in(h, OP_F32, 2, inf2), flags = op_in(h, OP_F32, 3, (float[]){0.0f, 0.0f, 0.0f});
    OP_SIDES(s)
    {
        OP(h, s, check_finite, c->n, OP_P(x, s), OP_P(flags, s));
        OP(h, s, check_finite, 3, OP_P(bad, s), OP_P(flags, s) + 1);
        OP(h, s, check_finite, 2, OP_P(inf, s), OP_P(flags, s) + 2);
    }
    op_cmp(h, "flags", &flags, OP_TOL_EXACT);
    float *got = op_get(h, &flags, 1);
    CHECK(got[0] == 0.0f && got[1] == 1.0f && got[2] == 1.0f, "%s: flags %g (finite), %g (NaN), %g (Inf)", h->what,
          got[0], got[1], got[2]);
    free(got);
    op_free(h, &x), op_free(h, &bad), op_free(h, &inf), op_free(h, &flags);
}

OP_FAMILY(op_check_finite, "check_finite", run_check_finite, SF_BACKEND_OP_check_finite);

/* ---------------------------------------------------------------- readout, losses, optimizers */

/* leaky_forward and _backward over [c->T, c->B·K] (K = c->n; a 0.9, c 0.1); softmax_xent in variants 0–3 (per step
 * or not, label smoothing 0.1 or none) and mse_rate in variant 4, labels (b·7 + 3) mod K. No plain formulation.
 * Bounds: the readout 1e-6, the loss gradient 1e-5 (mse: 1e-6), in 16 bits the output bound; the mean logits and
 * the loss 1e-6; the correct count exact. */
static void run_readout(op_harness *h, const op_case *c, int v)
{
    const int64_t T = c->T, B = c->B;
    const int32_t K = (int32_t)c->n;
    const size_t m = (size_t)(T * B * K);
    const int per_step = v & 1;
    const float eps = v & 2 ? 0.1f : 0.0f;
    snprintf(h->what, sizeof h->what, "readout T=%lld B=%lld K=%d %s", (long long)T, (long long)B, K,
             v < 4 ? "softmax_xent" : "mse_rate");
    int32_t *lab = malloc(4 * (size_t)B);
    for (int64_t b = 0; b < B; b++) lab[b] = (int32_t)((b * 7 + 3) % K);
    op_ten labels = op_in(h, OP_RAW, 4 * (size_t)B, lab);
    free(lab);
    op_ten o = op_randn(h, OP_ACTV, m, v < 4 ? 0.0f : 0.3f, v < 4 ? 1.0f : 0.4f, 71);
    op_ten g = op_out(h, OP_ACTV, m), lm = op_out(h, OP_F32, (size_t)(B * K)), st = op_out(h, OP_F32, 2);
    if (v == 0) { /* the leaky readout once per row */
        op_ten r = op_out(h, OP_ACTV, m), dr = op_randn(h, OP_ACTV, m, 0.0f, 1.0f, 72), doo = op_out(h, OP_ACTV, m);
        OP_SIDES(s)
        {
            OP(h, s, leaky_forward, T, B * K, 0.9f, 0.1f, OP_P(o, s), OP_P(r, s));
            OP(h, s, leaky_backward, T, B * K, 0.9f, 0.1f, OP_P(dr, s), OP_P(doo, s));
        }
        op_cmp(h, "leaky forward", &r, OP_TOL_ACT(1e-6));
        op_cmp(h, "leaky backward", &doo, OP_TOL_ACT(1e-6));
        op_free(h, &r), op_free(h, &dr), op_free(h, &doo);
    }
    snprintf(h->what, sizeof h->what, "%s T=%lld B=%lld K=%d per_step=%d eps=%g", v < 4 ? "softmax_xent" : "mse_rate",
             (long long)T, (long long)B, K, per_step, (double)eps);
    OP_SIDES(s)
    {
        if (v < 4)
            OP(h, s, softmax_xent, T, B, K, per_step, eps, OP_P(o, s), OP_I32(labels, s), OP_P(g, s), OP_P(lm, s),
               OP_P(st, s));
        else OP(h, s, mse_rate, T, B, K, OP_P(o, s), OP_I32(labels, s), OP_P(g, s), OP_P(lm, s), OP_P(st, s));
    }
    op_cmp(h, "dr", &g, OP_TOL_ACT(v < 4 ? 1e-5 : 1e-6));
    op_cmp(h, "mean logits", &lm, OP_TOL_F32(1e-6));
    const op_ten loss = {OP_F32, 1, {st.p[0], st.p[1]}}, correct = {OP_F32, 1, {OP_P(st, 0) + 1, OP_P(st, 1) + 1}};
    op_cmp(h, "loss", &loss, OP_TOL_F32(1e-6));
    op_cmp(h, "correct", &correct, OP_TOL_EXACT);
    op_free(h, &labels), op_free(h, &o), op_free(h, &g), op_free(h, &lm), op_free(h, &st);
}

OP_FAMILY(op_readout, "readout", run_readout, SF_BACKEND_OP_leaky_forward, SF_BACKEND_OP_leaky_backward,
          SF_BACKEND_OP_softmax_xent, SF_BACKEND_OP_mse_rate);

/* Three steps of sgd_step (variants 0, 1: nesterov) or adam_step (2, 3: decoupled) over c->n parameters. No plain
 * formulation. Bound: 1e-6. */
static void run_optim(op_harness *h, const op_case *c, int v)
{
    const size_t n = (size_t)c->n;
    snprintf(h->what, sizeof h->what, "%s variant %d, 3 steps of %zu parameters", v < 2 ? "sgd" : "adam", v, n);
    op_ten p = op_randn(h, OP_F32, n, 0.0f, 1.0f, 81), buf = op_out(h, OP_F32, n);
    op_ten m = op_randn(h, OP_F32, n, 0.0f, 0.0f, 0), q = op_randn(h, OP_F32, n, 0.0f, 0.0f, 0);
    for (int64_t step = 1; step <= 3; step++) {
        op_ten g = op_randn(h, OP_F32, n, 0.0f, 1.0f, 90 + (uint64_t)step);
        OP_SIDES(s)
        {
            if (v < 2) OP(h, s, sgd_step, (int64_t)n, 0.1f, 0.9f, v, 5e-4f, step, OP_P(p, s), OP_P(g, s), OP_P(buf, s));
            else
                OP(h, s, adam_step, (int64_t)n, 1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f, v - 2, step, OP_P(p, s), OP_P(g, s),
                   OP_P(m, s), OP_P(q, s));
        }
        op_free(h, &g);
    }
    op_cmp(h, "parameters", &p, OP_TOL_F32(1e-6));
    op_free(h, &p), op_free(h, &buf), op_free(h, &m), op_free(h, &q);
}

OP_FAMILY(op_optim, "optim", run_optim, SF_BACKEND_OP_sgd_step, SF_BACKEND_OP_adam_step);

/* ---------------------------------------------------------------- storage types */

/* convert fp32 → the tested side's 16-bit type → itself (a copy) → fp32 over c->n values (ties between neighbours,
 * subnormals, overflow, signed zero, infinities, then random values over 40 binades), and scale by a factor read
 * from backend memory, in the 16-bit type and in float. Plain: rounding to nearest even on the host. Exact. */
static void run_convert(op_harness *h, const op_case *c, int v)
{
    if (!sf_backend_supports(h->be[1], SF_BACKEND_OP_convert) || h->act == SF_SCALAR_F32) return;
    static const float special[] = {1.0f + 0x1p-8f,  1.0f + 3 * 0x1p-8f,
                                    1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f,
                                    0x1p-20f,        0x1p-24f,
                                    0x1p-25f,        3 * 0x1p-26f,
                                    0x1p-130f,       0x1p-134f,
                                    65504.0f,        65519.0f,
                                    65520.0f,        3.4e38f,
                                    -0.0f,           INFINITY,
                                    -INFINITY,       -2.5f,
                                    1e-3f,           123456.0f};
    const size_t ns = sizeof special / sizeof special[0], n = (size_t)c->n;
    snprintf(h->what, sizeof h->what, "convert and scale, %zu values", n);
    float *x = op_host_randn(n, 0.0f, 1.0f, 5), *want = malloc(4 * n), *scaled = malloc(4 * n);
    for (size_t i = 0; i < n; i++) x[i] *= ldexpf(1.0f, (int)(i % 40) - 20);
    memcpy(x, special, sizeof special);
    const float f = 0.375f;
    op_ten src = op_in(h, OP_F32, n, x), mid = op_out(h, OP_RAW, 2 * n), mid2 = op_out(h, OP_RAW, 2 * n);
    op_ten back = op_out(h, OP_F32, n), back16 = op_out(h, OP_F32, n - ns), factor = op_in(h, OP_F32, 1, &f);
    const op_ten src_tail = {OP_F32, n - ns, {OP_P(src, 0) + ns, OP_P(src, 1) + ns}};
    /* side 0: the host's rounding */
    for (size_t i = 0; i < n; i++) want[i] = op_round(h, x[i]);
    op_put_side(h, &back, 0, want);
    for (size_t i = ns; i < n; i++) scaled[i - ns] = op_round(h, want[i] * f);
    op_put_side(h, &back16, 0, scaled);
    for (size_t i = ns; i < n; i++) scaled[i - ns] = x[i] * f;
    op_put_side(h, &src_tail, 0, scaled);
    /* side 1 */
    OP(h, 1, convert, (int64_t)n, SF_SCALAR_F32, OP_P(src, 1), h->act, mid.p[1]);
    OP(h, 1, convert, (int64_t)n, h->act, mid.p[1], h->act, mid2.p[1]);
    OP(h, 1, convert, (int64_t)n, h->act, mid2.p[1], SF_SCALAR_F32, OP_P(back, 1));
    op_cmp(h, "rounded to 16 bits and back", &back, OP_TOL_EXACT);
    const size_t es = sf_scalar_size(h->act);
    OP(h, 1, scale, (int64_t)(n - ns), h->act, OP_P(factor, 1), (char *)mid.p[1] + es * ns);
    OP(h, 1, convert, (int64_t)(n - ns), h->act, (char *)mid.p[1] + es * ns, SF_SCALAR_F32, OP_P(back16, 1));
    op_cmp(h, "scale (16-bit)", &back16, OP_TOL_EXACT);
    OP(h, 1, scale, (int64_t)(n - ns), SF_SCALAR_F32, OP_P(factor, 1), OP_P(src, 1) + ns);
    op_cmp(h, "scale (float)", &src_tail, OP_TOL_EXACT);
    free(x), free(want), free(scaled);
    op_free(h, &src), op_free(h, &mid), op_free(h, &mid2), op_free(h, &back), op_free(h, &back16);
    op_free(h, &factor);
}

OP_FAMILY(op_convert, "convert", run_convert, SF_BACKEND_OP_convert, SF_BACKEND_OP_scale);

/* ---------------------------------------------------------------- compact spikes, event-driven linear */

/* spikes_compact and spikes_expand over c->rows rows of c->n spikes at the density of op_density:
 * the compact form with lists, the count and the flag (0); the bits alone; values that are not spikes (1000, -1)
 * set the flag; the expansion of the bits. Plain: packing and expanding on the host. Exact. */
static void run_spikes(op_harness *h, const op_case *c, int v)
{
    const int64_t rows = c->rows, n = c->n;
    const size_t total = (size_t)(rows * n);
    double density;
    bool one;
    op_density(c, v, &density, &one);
    snprintf(h->what, sizeof h->what, "spikes rows=%lld n=%lld density %.2f%s", (long long)rows, (long long)n, density,
             one ? " (one per row)" : "");
    float *hs = op_host_spikes(rows, n, density, one, 91 + (uint64_t)n);
    op_ten x = op_in(h, OP_ACTV, total, hs), back = op_out(h, OP_ACTV, total);
    for (size_t i = 0; i < total; i++) hs[i] = hs[i] != 0.0f ? 1000.0f : -1.0f;
    op_ten notspikes = op_in(h, OP_ACTV, total, hs);
    op_ten count = op_in(h, OP_F32, 1, (float[]){0.0f}), flags = op_in(h, OP_F32, 2, (float[]){0.0f, 0.0f});
    op_spk full = op_spk_out(h, rows, n, true), alone = op_spk_out(h, rows, n, false),
           other = op_spk_out(h, rows, n, true);
    OP_SIDES(s)
    {
        if (op_plain(h, s, SF_BACKEND_OP_spikes_compact)) {
            op_pack_side0(h, &x, &full, true);
            op_pack_side0(h, &x, &alone, false);
            float *hx = op_get(h, &x, s);
            float k = 0.0f;
            for (size_t i = 0; i < total; i++) k += hx[i];
            op_put_side(h, &count, s, &k);
            op_put_side(h, &flags, s, (float[]){0.0f, 1.0f});
            op_put_side(h, &back, s, hx);
            free(hx);
            continue;
        }
        const sf_spikes f = op_spk_at(&full, s, true), o = op_spk_at(&other, s, true);
        OP(h, s, spikes_compact, rows, n, OP_P(x, s), &f, OP_P(count, s), OP_P(flags, s));
        OP(h, s, spikes_compact, rows, n, OP_P(x, s), &(sf_spikes){OP_U32(alone.bits, s), NULL, NULL}, NULL, NULL);
        OP(h, s, spikes_compact, rows, n, OP_P(notspikes, s), &o, NULL, OP_P(flags, s) + 1);
        OP(h, s, spikes_expand, rows, n, OP_U32(full.bits, s), OP_P(back, s));
    }
    op_cmp_spk(h, "compact", &full, true);
    op_cmp_raw(h, "bits alone", &alone.bits);
    op_cmp(h, "count", &count, OP_TOL_EXACT);
    op_cmp(h, "flags (spikes, not spikes)", &flags, OP_TOL_EXACT);
    op_cmp(h, "expanded", &back, OP_TOL_EXACT);
    free(hs);
    op_free(h, &x), op_free(h, &back), op_free(h, &notspikes), op_free(h, &count), op_free(h, &flags);
    op_spk_free(h, &full), op_spk_free(h, &alone), op_spk_free(h, &other);
}

OP_FAMILY(op_spikes, "spikes", run_spikes, SF_BACKEND_OP_spikes_compact, SF_BACKEND_OP_spikes_expand);

/* spike_linear_workspace, _forward and _backward over c->rows rows of c->in spikes at the density of op_density →
 * c->out: y from the lists; dW, db and the dense dx from a dense dy; then a dy with 80% zeros and
 * its mask: the masked dx and dW. Plain: the dense linear ops on the spikes as floats. Bounds: y and the masked dx
 * side 0's float sums rounded once (exact in fp32), dW exact, db 1e-6, the dense dx 1e-5 and 16-bit; tuned against
 * plain 1e-6. */
static void run_spike_linear(op_harness *h, const op_case *c, int v)
{
    const int64_t rows = c->rows;
    const size_t nx = (size_t)(rows * c->in), ny = (size_t)(rows * c->out), nw = (size_t)c->out * c->in;
    double density;
    bool one;
    op_density(c, v, &density, &one);
    snprintf(h->what, sizeof h->what, "spike linear %lldx%dx%d density %.2f%s", (long long)rows, c->in, c->out, density,
             one ? " (one per row)" : "");
    float *hx = op_host_spikes(rows, c->in, density, one, 92 + (uint64_t)c->in);
    op_ten x = op_in(h, OP_ACTV, nx, hx), w = op_randn(h, OP_ACTV, nw, 0.0f, 0.3f, 93);
    op_ten b = op_randn(h, OP_F32, (size_t)c->out, 0.1f, 0.2f, 94), dy = op_randn(h, OP_ACTV, ny, 0.0f, 1.0f, 95);
    op_ten y = op_out(h, OP_ACTV, ny), dx = op_out(h, OP_ACTV, nx), dw = op_out(h, OP_F32, nw);
    op_ten db = op_out(h, OP_F32, (size_t)c->out);
    op_spk cx = op_spk_out(h, rows, c->in, true), mask = op_spk_out(h, rows, c->out, false);
    free(hx);
    op_ws ws[2];
    bool plain[2];
    OP_SIDES(s)
    {
        plain[s] = op_plain(h, s, SF_BACKEND_OP_spike_linear_forward);
        ws[s] = op_ws_alloc(h, s, OPV(h, s, spike_linear_workspace, rows, c->in, c->out));
        const sf_spikes xs = op_spk_at(&cx, s, true);
        OP(h, s, spikes_compact, rows, c->in, OP_P(x, s), &xs, NULL, NULL);
        if (plain[s]) {
            OP(h, s, linear_forward, rows, c->in, c->out, OP_P(x, s), OP_P(w, s), OP_P(b, s), OP_P(y, s));
            OP(h, s, linear_backward, rows, c->in, c->out, OP_P(x, s), OP_P(w, s), OP_P(dy, s), OP_P(dx, s),
               OP_P(dw, s), OP_P(db, s));
        } else {
            OP(h, s, spike_linear_forward, rows, c->in, c->out, &xs, OP_P(w, s), OP_P(b, s), OP_P(y, s), ws[s].p);
            OP(h, s, spike_linear_backward, rows, c->in, c->out, OP_U32(cx.bits, s), OP_P(w, s), OP_P(dy, s), NULL,
               OP_P(dx, s), OP_P(dw, s), OP_P(db, s), ws[s].p);
        }
    }
    const op_tol tuned = {1e-6, 0.0, 0.0, 0.0, 0.0};
    op_cmp_spk(h, "compact x", &cx, true);
    if (h->cpu_mode) op_cmp(h, "y", &y, tuned);
    else op_cmp_rounded(h, "y", &y);
    op_cmp(h, "dw", &dw, tuned);
    op_cmp(h, "db", &db, (op_tol){1e-6, 1e-6, 1e-6, 1e-6, 1e-6});
    op_cmp(h, "dense dx", &dx, (op_tol){1e-6, 1e-5, 1e-5, OP_BF16_ACT, OP_FP16_ACT});
    /* a gradient with zeros: the dx summed over its nonzero entries */
    float *hdy = op_get(h, &dy, 0), *ind = malloc(4 * ny + 4);
    for (size_t i = 0; i < ny; i++) {
        if (sf_uniform(96, 1, i) < 0.8) hdy[i] = 0.0f;
        ind[i] = hdy[i] != 0.0f;
    }
    op_put(h, &dy, hdy);
    op_ten nonzero = op_in(h, OP_ACTV, ny, ind);
    free(hdy), free(ind);
    OP_SIDES(s)
    {
        const sf_spikes ms = op_spk_at(&mask, s, false);
        OP(h, s, spikes_compact, rows, c->out, OP_P(nonzero, s), &ms, NULL, NULL);
        if (plain[s])
            OP(h, s, linear_backward, rows, c->in, c->out, OP_P(x, s), OP_P(w, s), OP_P(dy, s), OP_P(dx, s),
               OP_P(dw, s), NULL);
        else
            OP(h, s, spike_linear_backward, rows, c->in, c->out, OP_U32(cx.bits, s), OP_P(w, s), OP_P(dy, s), &ms,
               OP_P(dx, s), OP_P(dw, s), NULL, ws[s].p);
        op_ws_free(h, s, &ws[s], "event-driven linear");
    }
    op_cmp_spk(h, "mask", &mask, false);
    if (h->cpu_mode) op_cmp(h, "masked dx", &dx, tuned);
    else op_cmp_rounded(h, "masked dx", &dx);
    op_cmp(h, "masked dw", &dw, tuned);
    op_ten *all[] = {&x, &w, &b, &dy, &y, &dx, &dw, &db, &nonzero};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) op_free(h, all[i]);
    op_spk_free(h, &cx), op_spk_free(h, &mask);
}

OP_FAMILY(op_spike_linear, "spike_linear", run_spike_linear, SF_BACKEND_OP_spike_linear_workspace,
          SF_BACKEND_OP_spike_linear_forward, SF_BACKEND_OP_spike_linear_backward);

/* ---------------------------------------------------------------- recorded graphs */

/* graph_begin, graph_end, graph_launch and graph_free on the tested side, where it has them: axpy (y += 0.5·x over
 * c->n values) and add (z = x + y) recorded once and launched twice; side 0 runs the ops twice. Bounds: 1e-6 and
 * 16-bit. */
static void run_graph(op_harness *h, const op_case *c, int v)
{
    if (!sf_backend_supports(h->be[1], SF_BACKEND_OP_graph_begin)) return;
    const size_t n = (size_t)c->n;
    snprintf(h->what, sizeof h->what, "graph of axpy and add over %zu values, launched twice", n);
    op_ten x = op_randn(h, OP_ACTV, n, 0.0f, 1.0f, 97), y = op_randn(h, OP_ACTV, n, 0.0f, 1.0f, 98);
    op_ten z = op_out(h, OP_ACTV, n);
    for (int k = 0; k < 2; k++) {
        OP(h, 0, axpy, (int64_t)n, 0.5f, OP_P(x, 0), OP_P(y, 0));
        OP(h, 0, add, (int64_t)n, OP_P(x, 0), OP_P(y, 0), OP_P(z, 0));
    }
    void *graph = NULL;
    OP0(h, 1, graph_begin);
    OP(h, 1, axpy, (int64_t)n, 0.5f, OP_P(x, 1), OP_P(y, 1));
    OP(h, 1, add, (int64_t)n, OP_P(x, 1), OP_P(y, 1), OP_P(z, 1));
    OP(h, 1, graph_end, &graph);
    CHECK(graph != NULL, "%s: nothing recorded", h->what);
    if (graph) {
        OP(h, 1, graph_launch, graph);
        OP(h, 1, graph_launch, graph);
    }
    OPV(h, 1, graph_free, graph);
    op_cmp(h, "y", &y, OP_TOL_ACT(1e-6));
    op_cmp(h, "z", &z, OP_TOL_ACT(1e-6));
    op_free(h, &x), op_free(h, &y), op_free(h, &z);
}

OP_FAMILY(op_graph, "graph", run_graph, SF_BACKEND_OP_graph_begin, SF_BACKEND_OP_graph_end, SF_BACKEND_OP_graph_launch,
          SF_BACKEND_OP_graph_free);
