"""imagenet_resnets.py — writes the 224² ImageNet ResNet configs of examples/: SEW-ResNet-18/34/50 (Fang et al. 2021,
connect ADD) and the plain Spiking ResNet-18/34/50 in SpikingJelly's layouts (sew_resnet.py, spiking_resnet.py), as
`python3 examples/imagenet_resnets.py examples`. The configs are what the repository ships; this script is how they
were written, kept so that a change to one reaches all six alike."""
import os
import sys

STAGES = {18: ("basic", (2, 2, 2, 2)), 34: ("basic", (3, 4, 6, 3)), 50: ("bottleneck", (3, 4, 6, 3))}
WIDTHS = (64, 128, 256, 512)


class Net:
    def __init__(self):
        self.lines, self.n = [], 0

    def layer(self, section, note="", **keys):
        """Appends a layer section; returns its layer number."""
        self.lines.append(f"\n[{section}]  ; layer {self.n}{'  ' + note if note else ''}")
        self.lines += [f"{k} = {v}" for k, v in keys.items()]
        self.n += 1
        return self.n - 1

    def conv(self, filters, size, stride=1, src=None, note=""):
        keys = {"from": src} if src is not None and src != self.n - 1 else {}
        keys.update(filters=filters, size=size)
        if stride != 1:
            keys["stride"] = stride
        if size > 1:
            keys["pad"] = size // 2
        keys["bias"] = "off"
        return self.layer("conv", note, **keys)

    def conv_bn(self, filters, size, stride=1, src=None, note=""):
        self.conv(filters, size, stride, src, note)
        return self.layer("bn")

    def conv_bn_if(self, filters, size, stride=1, src=None, note=""):
        self.conv_bn(filters, size, stride, src, note)
        return self.layer("lif")


def branch(net, kind, x, planes, stride, sew):
    """The residual branch from layer x: the spikes A (SEW), or the last BN's output (plain)."""
    if kind == "basic":
        net.conv_bn_if(planes, 3, stride, src=x, note="branch")
        last = (planes, 3, 1)
    else:
        net.conv_bn_if(planes, 1, 1, src=x, note="branch")
        net.conv_bn_if(planes, 3, stride)
        last = (planes * 4, 1, 1)
    return net.conv_bn_if(*last) if sew else net.conv_bn(*last)


def block(net, kind, x, planes, stride, downsample, sew):
    """One block from layer x; returns its output layer."""
    out_planes = planes * (4 if kind == "bottleneck" else 1)
    if sew:
        # SEW: the shortcut is x, or SEW's downsample conv 1x1 -> BN -> IF; out = g(A, S) with A the branch's spikes
        # (the layer before [add]) and S the shortcut (`from`)
        shortcut = net.conv_bn_if(out_planes, 1, stride, src=x, note="downsample shortcut") if downsample else x
        branch(net, kind, x, planes, stride, sew)
        return net.layer("add", "g(A, S)", **{"from": shortcut, "connect": "add"})
    # plain: the branch's BN output plus x or the downsample conv 1x1 -> BN, then the neuron
    a = branch(net, kind, x, planes, stride, sew)
    shortcut = net.conv_bn(out_planes, 1, stride, src=x, note="downsample shortcut") if downsample else x
    net.layer("add", **{"from": shortcut if shortcut != net.n - 1 else a})
    return net.layer("lif")


def network(depth, sew):
    kind, counts = STAGES[depth]
    net = Net()
    net.conv_bn_if(64, 7, 2, note="stem: 224 -> 112")
    x = net.layer("maxpool", "112 -> 56", size=3, stride=2, pad=1)
    in_planes = 64
    for stage, (planes, count) in enumerate(zip(WIDTHS, counts)):
        for i in range(count):
            stride = 2 if stage > 0 and i == 0 else 1
            out_planes = planes * (4 if kind == "bottleneck" else 1)
            x = block(net, kind, x, planes, stride, stride != 1 or in_planes != out_planes, sew)
            in_planes = out_planes
    net.layer("avgpool", "7x7 -> 1x1 at 224", size="global")
    net.layer("flatten")
    net.layer("linear", out=1000)
    return net


HEADER = """# {name}.ini — {title} on ImageNet at 224x224
# (dataset = imagefolder: data_dir/train/<class>/*.JPEG and data_dir/val/), in
# {layout}
# Stem: conv 7x7 s2 pad 3 -> BN -> IF -> max-pool 3 s2 pad 1 (224 -> 56); stages of {counts} {kind} blocks
# ({widths}; stride 2 from the second stage on: 56 -> 7);
# global average pool (7x7 at 224; `size = global` takes any image_size), FC 1000, mean over T, cross-entropy.
# Convs have no bias. IF neurons (SEW's ImageNet neuron; `neuron = lif` with `tau = 2` for the LIF), threshold 1,
# hard reset to 0, detach_reset, ATan surrogate alpha = 2 (SpikingJelly's ATan default).
# Layer numbers are in the comments; `from` names layers by number. The recipe (SGD, momentum 0.9, lr 0.1, cosine,
# T = 4, 32 images a step) is a starting point, not a result measured here; examples/imagenet_resnets.py wrote this
# file.
[train]
dataset = imagefolder
data_dir = data/imagenet
classes = 1000
image_size = 224
epochs = 320
batch = 32
timesteps = 4
encoding = direct
optimizer = sgd
lr = 0.1
momentum = 0.9
schedule = cosine
seed = 0
log_every = 100

[neuron]
neuron = if
v_threshold = 1
v_reset = 0
reset = hard
detach_reset = on
surrogate = atan
alpha = 2"""

SEW_LAYOUT = """# SpikingJelly's sew_resnet layout with cnf = ADD: each block's branch ends in its own IF, and the
# block's output is g(A, S) = A + S ([add] connect = add: A the branch's spikes, S the block's input or, where the shape
# changes, SEW's shortcut conv 1x1 -> BN -> IF). `connect = and` or `iand` ((1 - A)·S) gives the other SEW
# variants."""
PLAIN_LAYOUT = """# SpikingJelly's spiking_resnet layout: each block's branch ends in a BN, plus the block's input or
# (conv 1x1 -> BN) of it where the shape changes, then the IF."""


def write(folder, depth, sew):
    kind, counts = STAGES[depth]
    name = f"imagenet_{'sew_' if sew else 'spiking_'}resnet{depth}"
    text = HEADER.format(
        name=name, title=f"SEW-ResNet-{depth} (connect ADD)" if sew else f"Spiking ResNet-{depth}",
        layout=(SEW_LAYOUT if sew else PLAIN_LAYOUT).lstrip("# "), counts=", ".join(map(str, counts)),
        kind=kind, widths="64, 128, 256, 512 channels" + ("" if kind == "basic" else " inside, 4x that out"))
    net = network(depth, sew)
    text += "\n" + "\n".join(net.lines) + "\n\n[readout]\ntype = mean\nloss = ce_mean\n"
    with open(os.path.join(folder, name + ".ini"), "w") as f:
        f.write(text)


def main():
    for depth in (18, 34, 50):
        for sew in (True, False):
            write(sys.argv[1], depth, sew)


if __name__ == "__main__":
    main()
