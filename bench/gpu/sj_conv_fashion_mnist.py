"""sj_conv_fashion_mnist.py — runs SpikingJelly's own example script (spikingjelly.activation_based.examples.
conv_fashion_mnist, from the 0.0.0.0.14 wheel, which has the cupy backend) as its README says, on a GPU machine
without network: the Fashion-MNIST files of DATA_DIR (the four .gz files, e.g. Debian's
/usr/share/datasets/fashion-mnist) are unpacked where torchvision looks, so it downloads nothing; the parts of the
script that only log or plot (TensorBoard, matplotlib) get stand-ins where those packages are missing; NumPy >= 1.24
gets back np.int, which that cupy code uses. The script's own output (a line per epoch: test accuracy, images/s)
is left as it is. Usage: python3 sj_conv_fashion_mnist.py DATA_DIR OUT_DIR EPOCHS [extra arguments, e.g. -amp].
With SJ_MATMUL_TF32=1 the script's linear layers run in TF32 too (torch.backends.cuda.matmul.allow_tf32; PyTorch's
default is fp32 matmuls beside TF32 convolutions), as spikefuse's `precision = tf32` runs them. With SJ_CUDNN_BENCH=1
cuDNN's autotuner is on (torch.backends.cudnn.benchmark), the fastest setting an informed user has for this script:
its cupy neurons are kernels torch.compile cannot trace, and the script has no option for it. With SJ_FUSE=PRECISION
(fp32, tf32 or bf16) the script runs with one line added after its `net.to(args.device)`: its network's
conv_fc passed through spikefuse.torch.fuse (a Network in that precision on the same device), the rest of the
script as it is (W12)."""
import gzip
import os
import runpy
import shutil
import sys
import types

import numpy as np

if not hasattr(np, "int"):
    np.int = int


def stand_in(name, **attrs):
    """A module `name` whose attributes are `attrs` (and anything else a no-op), for imports that only log."""
    mod = types.ModuleType(name)
    mod.__getattr__ = lambda attr: attrs.get(attr, lambda *a, **k: None)
    sys.modules[name] = mod
    return mod


class NoWriter:
    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        return lambda *a, **k: None


try:
    from torch.utils.tensorboard import SummaryWriter  # noqa: F401
except Exception:
    stand_in("torch.utils.tensorboard", SummaryWriter=NoWriter)
try:
    import matplotlib.pyplot  # noqa: F401
except Exception:
    stand_in("matplotlib")
    stand_in("matplotlib.pyplot")
try:
    import spikingjelly.visualizing  # noqa: F401
except Exception:
    stand_in("spikingjelly.visualizing")


def unpack(data_dir, root):
    """The four Fashion-MNIST files, unpacked into root/FashionMNIST/raw (torchvision then downloads nothing)."""
    raw = os.path.join(root, "FashionMNIST", "raw")
    os.makedirs(raw, exist_ok=True)
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                 "t10k-labels-idx1-ubyte"):
        src = os.path.join(data_dir, name + ".gz")
        dst = os.path.join(raw, name)
        if not os.path.exists(dst):
            with gzip.open(src, "rb") as f, open(dst, "wb") as g:
                shutil.copyfileobj(f, g)


def main():
    data_dir, out_dir, epochs = sys.argv[1], sys.argv[2], sys.argv[3]
    root = os.path.join(out_dir, "data")
    unpack(data_dir, root)
    sys.argv = ["conv_fashion_mnist", "-T", "4", "-device", "cuda:0", "-b", "128", "-epochs", epochs, "-data-dir", root,
                "-out-dir", os.path.join(out_dir, "logs"), "-cupy", "-opt", "sgd", "-lr", "0.1", "-j", "4",
                *sys.argv[4:]]
    import torch
    if os.environ.get("SJ_MATMUL_TF32") == "1":
        torch.backends.cuda.matmul.allow_tf32 = True
    if os.environ.get("SJ_CUDNN_BENCH") == "1":
        torch.backends.cudnn.benchmark = True
    name = "spikingjelly.activation_based.examples.conv_fashion_mnist"
    if os.environ.get("SJ_FUSE"):
        run_fused(name, os.environ["SJ_FUSE"])
    else:
        runpy.run_module(name, run_name="__main__")


def run_fused(name, precision):
    """Runs the script `name` as __main__ with one line after `net.to(args.device)`: net.conv_fc fused into a
    spikefuse Network of `precision` (the sample gives fuse the shape [T, b, 1, 28, 28] and the device)."""
    import importlib.util
    path = importlib.util.find_spec(name).origin
    with open(path) as f:
        lines = f.read().split("\n")
    at = [i for i, line in enumerate(lines) if line.strip() == "net.to(args.device)"]
    if len(at) != 1:
        raise SystemExit(f"{path}: expected one line `net.to(args.device)`, found {len(at)}: not the script this "
                         "harness knows")
    indent = lines[at[0]][:len(lines[at[0]]) - len(lines[at[0]].lstrip())]
    lines.insert(at[0] + 1, f"{indent}import spikefuse.torch; net.conv_fc = spikefuse.torch.fuse(net.conv_fc, "
                            f"torch.zeros(args.T, args.b, 1, 28, 28, device=args.device), precision={precision!r})")
    code = compile("\n".join(lines), path, "exec")
    exec(code, {"__name__": "__main__", "__file__": path})


if __name__ == "__main__":
    main()
