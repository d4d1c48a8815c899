"""seed_nets.py — the networks of workloads W6 and W7 (docs/notebook/perf.md) in PyTorch, layer for layer as
bench/seed_nets.h adds them (its comment says what they are), for seed_torch.py's baselines. A Net takes the spiking
neuron as a factory of modules over [T, B, ...]; every other layer runs over T·B images at once (BN statistics over
(T, B, H, W), as SpikingJelly's multi-step layers and Liang et al.)."""
import torch.nn as nn


class Net(nn.Module):
    """Layers in the order bench/seed_nets.h adds them; each node reads earlier tensors by index (0: the input)."""

    def __init__(self, neuron, div, image):
        super().__init__()
        self.neuron, self.div = neuron, div
        self.mods = nn.ModuleList()
        self.nodes = []  # (kind, module index or -1, input tensor ids)
        self.shapes = [(3, image, image)]
        self.vectors = set()  # tensors that are [T, B, features] (after flatten): their BN is BatchNorm1d

    def width(self, w):
        return max(w // self.div, 1)

    def node(self, kind, module, ins, shape):
        if module is not None:
            self.mods.append(module)
        self.nodes.append((kind, len(self.mods) - 1 if module is not None else -1, ins))
        self.shapes.append(shape)
        if kind == "flat" or ins[0] in self.vectors:
            self.vectors.add(len(self.shapes) - 1)
        return len(self.shapes) - 1

    def conv(self, src, cout, k, stride, bias):
        c, h, w = self.shapes[src]
        cout = self.width(cout)
        m = nn.Conv2d(c, cout, k, stride, k // 2, bias=bool(bias))
        return self.node("layer", m, [src], (cout, (h + 2 * (k // 2) - k) // stride + 1,
                                             (w + 2 * (k // 2) - k) // stride + 1))

    def bn(self, src):
        c = self.shapes[src][0]
        return self.node("layer", nn.BatchNorm1d(c) if src in self.vectors else nn.BatchNorm2d(c), [src],
                         self.shapes[src])

    def lif(self, src):
        return self.node("lif", self.neuron(), [src], self.shapes[src])

    def bn_lif(self, src, bn):
        return self.lif(self.bn(src) if bn else src)

    def pool(self, src, kind, k, stride, pad):
        c, h, w = self.shapes[src]
        m = nn.MaxPool2d(k, stride, pad) if kind == "max" else nn.AvgPool2d(k, stride, pad)
        return self.node("layer", m, [src], (c, (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1))

    def flatten(self, src):
        c, h, w = self.shapes[src]
        return self.node("flat", None, [src], (c * h * w, 1, 1))

    def linear(self, src, out):
        return self.node("layer", nn.Linear(self.shapes[src][0], out), [src], (out, 1, 1))

    def add(self, a, b):
        return self.node("add", None, [a, b], self.shapes[a])

    def head(self, src, classes):
        k = self.shapes[src][1]
        self.linear(self.flatten(self.pool(src, "avg", k, k, 0)), classes)

    def forward(self, x):
        vals = [x]
        for kind, mi, ins in self.nodes:
            a = vals[ins[0]]
            if kind == "lif":
                y = self.mods[mi](a)
            elif kind == "add":
                y = a + vals[ins[1]]
            elif kind == "flat":
                y = a.flatten(2)
            else:  # a layer over T·B images at once
                y = self.mods[mi](a.flatten(0, 1)).unflatten(0, a.shape[:2])
            vals.append(y)
        return vals[-1]


def vgg(n, bn, ch, st):
    t = n.conv(0, ch[0], 3, st[0], 1)
    for c, s in zip(ch[1:], st[1:]):
        t = n.conv(n.bn_lif(t, bn), c, 3, s, 1)
    t = n.linear(n.flatten(n.bn_lif(t, bn)), n.width(1024))
    t = n.linear(n.bn_lif(t, bn), n.width(512))
    n.linear(n.bn_lif(t, bn), 10)


def small(n, bn):
    vgg(n, bn, [128, 256, 512], [2, 2, 2])


def medium(n, bn):
    vgg(n, bn, [128, 128, 128, 256, 256, 512, 512], [1, 1, 2, 1, 2, 1, 2])


def large(n, bn):
    vgg(n, bn, [128, 128, 128, 256, 256, 256, 512, 512, 512], [1, 1, 2, 1, 1, 2, 1, 1, 2])


def alexnet(n, bn):
    ch, st = [64, 128, 256, 256, 384, 256, 256], [2, 2, 2, 2, 1, 1, 2]
    t = n.conv(0, ch[0], 3, st[0], 1)
    for c, s in zip(ch[1:], st[1:]):
        t = n.conv(n.bn_lif(t, bn), c, 3, s, 1)
    t = n.linear(n.flatten(n.bn_lif(t, bn)), n.width(4096))
    t = n.linear(n.bn_lif(t, bn), n.width(4096))
    n.linear(n.lif(t), 1000)


def resnet34_liang(n, bn):
    r = n.bn(n.conv(0, 64, 7, 2, 0))
    for width, blocks in zip([64, 128, 256, 512], [3, 4, 6, 3]):
        for i in range(blocks):
            a = n.lif(r)
            y = n.bn(n.conv(a, width, 3, 2 if i == 0 else 1, 0))
            y = n.bn(n.conv(n.lif(y), width, 3, 1, 0))
            r = n.add(y, n.bn(n.conv(a, width, 1, 2, 0)) if i == 0 else r)
    n.head(n.lif(r), 1000)


def sj_resnet(n, blocks):
    x = n.pool(n.lif(n.bn(n.conv(0, 64, 7, 2, 0))), "max", 3, 2, 1)
    for s, (width, count) in enumerate(zip([64, 128, 256, 512], blocks)):
        for i in range(count):
            stride = 2 if s > 0 and i == 0 else 1
            y = n.lif(n.bn(n.conv(x, width, 3, stride, 0)))
            y = n.bn(n.conv(y, width, 3, 1, 0))
            x = n.lif(n.add(y, n.bn(n.conv(x, width, 1, 2, 0)) if s > 0 and i == 0 else x))
    n.head(x, 10)


# name: (workload, build, bn, image, batch, T) — bench/seed_nets.h's sb_nets
NETS = {
    "small": ("W6", small, 1, 32, 64, [2, 4, 6, 8, 10]),
    "small_nobn": ("W6", small, 0, 32, 64, [2, 4, 6, 8, 10]),
    "medium": ("W6", medium, 1, 32, 64, [2, 4, 6, 8, 10]),
    "medium_nobn": ("W6", medium, 0, 32, 64, [2, 4, 6, 8, 10]),
    "large": ("W6", large, 1, 32, 64, [2, 4, 6, 8, 10]),
    "large_nobn": ("W6", large, 0, 32, 64, [2, 4, 6, 8, 10]),
    "alexnet": ("W6", alexnet, 1, 224, 16, [6]),
    "resnet34": ("W6", resnet34_liang, 1, 224, 16, [6]),
    "sj_resnet18": ("W7", lambda n, bn: sj_resnet(n, [2, 2, 2, 2]), 1, 32, 64, [4, 8, 16, 32]),
    "sj_resnet34": ("W7", lambda n, bn: sj_resnet(n, [3, 4, 6, 3]), 1, 32, 64, [4, 8, 16, 32]),
}
