/* test_gpu_lean_plan.c — memory = lean plans what the recorded convolution choices say (issue 46): a conv net whose
 * convolutions' workspace sets the peak is compiled once (timing its convolutions; the plan may trade time for
 * workspace, conv_lean), its choices read (sf_net_conv_choices), and a second net on a backend of its own is given
 * them line by line (sf_net_set_conv_choice) before it compiles: it must plan the same memory to the byte, read back
 * the same choices, and peak at the same bytes over a training step. deterministic = on times nothing, so two fresh
 * compiles plan alike too. Also: a line that is not a choice is refused by name. For comparison, a third fresh
 * compile that times again reports whether its plan differs (information only: it may or may not). */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

enum { T = 2, B = 32, C_IN = 3, HW = 64, K = 10 };

static void add(sf_net *net, sf_layer_kind kind, int32_t n, int32_t stride)
{
    sf_layer_desc d;
    sf_layer_default_desc(kind, &d);
    if (kind == SF_LAYER_CONV2D) d.out_channels = n, d.kernel = 3, d.padding = 1, d.stride = stride;
    if (kind == SF_LAYER_LINEAR) d.out_features = n;
    CHECK_OK(sf_net_add(net, &d, NULL));
}

/* The net, created (not compiled) with every line of `choices` (NULL: none) given to its backend, then compiled. */
static sf_net *make(int deterministic, const char *choices)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.device = (sf_device){SF_DEVICE_CUDA, 0};
    p.memory = SF_MEMORY_LEAN;
    p.cuda.deterministic = deterministic;
    p.in_channels = C_IN, p.in_height = HW, p.in_width = HW;
    p.seed = 9;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&p, &net));
    if (!net) exit(tu_finish("test_gpu_lean_plan"));
    add(net, SF_LAYER_CONV2D, 64, 1);
    add(net, SF_LAYER_LIF, 0, 0);
    add(net, SF_LAYER_CONV2D, 128, 2);
    add(net, SF_LAYER_LIF, 0, 0);
    add(net, SF_LAYER_CONV2D, 256, 2);
    add(net, SF_LAYER_LIF, 0, 0);
    add(net, SF_LAYER_CONV2D, 256, 1);
    add(net, SF_LAYER_LIF, 0, 0);
    add(net, SF_LAYER_FLATTEN, 0, 0);
    add(net, SF_LAYER_LINEAR, K, 0);
    for (const char *at = choices; at && *at; at += strcspn(at, "\n") + (at[strcspn(at, "\n")] != 0)) {
        char line[512];
        const size_t n = strcspn(at, "\n");
        CHECK(n < sizeof line, "a choice line of %zu bytes", n);
        if (n >= sizeof line) break;
        memcpy(line, at, n);
        line[n] = 0;
        CHECK_OK(sf_net_set_conv_choice(net, line));
    }
    CHECK_OK(sf_net_compile(net, T, B));
    sf_optim_params o;
    sf_optim_default_params(&o);
    CHECK_OK(sf_net_set_optimizer(net, &o));
    return net;
}

static char *choices_of(const sf_net *net)
{
    size_t len = 0;
    CHECK_OK(sf_net_conv_choices(net, NULL, 0, &len));
    char *text = malloc(len + 1);
    if (!text) exit(tu_finish("test_gpu_lean_plan"));
    CHECK_OK(sf_net_conv_choices(net, text, len + 1, &len));
    return text;
}

/* One training step on a fixed batch; the net's peak bytes after it. */
static size_t step_peak(sf_net *net)
{
    static float x[T * B * C_IN * HW * HW];
    int32_t labels[B];
    tu_randn(x, T * B * C_IN * HW * HW, 0.5f, 1.0f, 77);
    for (int b = 0; b < B; b++) labels[b] = b % K;
    sf_step_result r;
    CHECK_OK(sf_net_train_step(net, x, labels, &r));
    return sf_net_peak_bytes(net);
}

static void compare(const char *what, sf_net *a, sf_net *b, int must)
{
    sf_memory_plan pa, pb;
    CHECK_OK(sf_net_memory_plan(a, &pa));
    CHECK_OK(sf_net_memory_plan(b, &pb));
    char *ca = choices_of(a), *cb = choices_of(b);
    const size_t peak_a = step_peak(a), peak_b = step_peak(b);
    const int same = memcmp(&pa, &pb, sizeof pa) == 0 && strcmp(ca, cb) == 0 && peak_a == peak_b;
    printf("%s: plans %.1f and %.1f MiB (workspace %.1f, %.1f), peaks %.1f and %.1f MiB, choices %s\n", what,
           pa.total / 1048576.0, pb.total / 1048576.0, pa.workspace / 1048576.0, pb.workspace / 1048576.0,
           peak_a / 1048576.0, peak_b / 1048576.0, strcmp(ca, cb) == 0 ? "the same" : "differ");
    if (must) CHECK(same, "%s: the plans, choices or peaks differ;\nchoices:\n%s\nagainst:\n%s", what, ca, cb);
    free(ca);
    free(cb);
}

int main(void)
{
    sf_net *a = make(0, NULL);
    char *recorded = choices_of(a);
    CHECK(strncmp(recorded, "conv ", 5) == 0, "the timed net recorded no convolution choices: '%.80s'", recorded);
    printf("recorded choices:\n%s", recorded);
    sf_net *b = make(0, recorded);
    compare("timed, then given its choices", a, b, 1);

    const sf_status st = sf_net_set_conv_choice(b, "conv 64 3 64");
    CHECK(st == SF_ERR_FORMAT && strstr(sf_last_error(), "recorded convolution choice"), "a bad line: %s, %s",
          sf_status_str(st), sf_last_error());

    sf_net *c = make(0, NULL);
    compare("timed twice (information only)", a, c, 0);
    sf_net_free(a);
    sf_net_free(b);
    sf_net_free(c);

    a = make(1, NULL);
    b = make(1, NULL);
    compare("deterministic, two fresh compiles", a, b, 1);
    sf_net_free(a);
    sf_net_free(b);
    free(recorded);
    return tu_finish("test_gpu_lean_plan");
}
