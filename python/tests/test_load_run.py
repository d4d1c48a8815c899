"""test_load_run.py — spikefuse.torch.load_run: short runs of `spikefuse train` (the CLI named by $SPIKEFUSE_CLI, on
the synthetic dataset, so no files are needed) loaded as torch modules give the C engine's logits on the same
inputs (within 1e-5), fused and unfused, for every neuron model, under the checkpoint's tensor names; runs on
images (a tiny Fashion-MNIST-shaped set that tests/cli/make_idx.py writes) take the images as the dataset stores them
and encode them as the run did, so they answer as `spikefuse eval` does; to_nir exports them; and bad paths or
layers without a counterpart give clear errors."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import torch

import spikefuse
from spikefuse import _net
from spikefuse.torch import ALIF, BNIF, BNLIF, IF, LIF, PLIF, _kernels, load_run, run

try:
    import nir
except ImportError:
    nir = None

CLI = os.environ.get("SPIKEFUSE_CLI", "")
T, SHAPE = 4, (2, 8, 8)

TRAIN = """[train]
dataset = synthetic
input_shape = 2, 8, 8
classes = 4
samples = 48
input_density = 0.3
epochs = 1
batch = 16
timesteps = 4
optimizer = adam
lr = 0.01
seed = 5
log_every = 0
"""
# Convolutions, batch norm fused into the LIF after it and one that is not (a residual add reads it), both pools,
# dropout, a leaky readout, and LIF layers with the soft reset, a nonzero hard reset and a direct decay. The MLP
# has a recurrent LIF layer ([rlif]).
CONV_NET = TRAIN + """
[neuron]
surrogate = atan
detach_reset = on
[conv]
filters = 6
size = 3
pad = 1
[bn]
[lif]
[maxpool]
size = 2
[conv]
filters = 6
size = 3
pad = 1
bias = off
[bn]
[add]
from = -3
[lif]
reset = soft
[avgpool]
size = 2
[flatten]
[dropout]
p = 0.2
[linear]
out = 12
[lif]
decay = 0.6
decay_input = off
v_reset = -0.2
[linear]
out = 4
[readout]
type = leaky
tau = 3
"""
MLP = TRAIN + """
[flatten]
[linear]
out = 16
[bn]
[lif]
tau = 3
[linear]
out = 12
[rlif]
[linear]
out = 4
"""


# The conv net with other neuron models: an IF layer with hard resets only (so NIR takes it), a PLIF with a w per
# channel after the fused batch norm (which load_run keeps unfused: its fused op takes no w), an ALIF.
MODELS_NET = CONV_NET.replace("[lif]\nreset = soft", "[lif]\nneuron = if").replace(
    "[bn]\n[lif]\n[maxpool]", "[bn]\n[lif]\nneuron = plif\nper_channel = on\n[maxpool]")
ALIF_NET = MLP.replace("[lif]\ntau = 3", "[lif]\nneuron = alif\nbeta = 0.5")


def train(tmp, name, text, *args):
    cfg = os.path.join(tmp, name + ".ini")
    with open(cfg, "w") as f:
        f.write(text)
    out = os.path.join(tmp, name)
    subprocess.run([CLI, "train", cfg, "--out", out, *args], check=True, capture_output=True,
                   env=dict(os.environ, OMP_NUM_THREADS="2"))
    return out


@unittest.skipUnless(CLI and os.path.exists(CLI), "no spikefuse CLI (ctest sets SPIKEFUSE_CLI)")
class TestLoadRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sf_load_run_")
        cls.runs = {name: train(cls.tmp, name, text) for name, text in
                    (("conv", CONV_NET), ("mlp", MLP), ("models", MODELS_NET), ("alif", ALIF_NET))}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def engine_logits(self, ckpt, x):
        net = _net.TrainedNet(ckpt)
        out = torch.empty(x.shape[1], 4)
        net.forward_logits(x.shape[0], x.shape[1], x.data_ptr(), out.data_ptr())
        net.close()
        return out

    def test_same_logits_as_the_engine(self):
        g = torch.Generator().manual_seed(0)
        for name, fuse in (("conv", True), ("conv", False), ("mlp", True), ("models", True), ("models", False),
                           ("alif", True)):
            with self.subTest(run=name, fuse_bn=fuse):
                model = load_run(self.runs[name], fuse_bn=fuse)
                self.assertFalse(model.training)
                self.assertIn("[train]", model.config)
                x = (torch.rand(T, 5, *SHAPE, generator=g) < 0.3).float()
                ref = self.engine_logits(os.path.join(self.runs[name], "best.safetensors"), x)
                with torch.no_grad():
                    got = model(x)
                self.assertEqual(got.shape, (5, 4))
                err = (got - ref).abs().max().item()
                self.assertLessEqual(err, 1e-5, f"logits differ by {err:.3g}")
                self.assertGreater(ref.abs().max().item(), 1e-3, "logits all ~0: the check would be weak")
                fused = [m for m in model.modules() if isinstance(m, (BNLIF, BNIF))]
                # conv: layer 5's BN feeds an add, not fused; models: the PLIF after layer 1's BN is not fused
                self.assertEqual(len(fused), 1 if fuse and name in ("conv", "mlp", "alif") else 0)

    def test_neuron_models(self):
        kinds = lambda name: [type(m) for m in load_run(self.runs[name]).children()
                              if isinstance(m, (LIF, IF, PLIF, ALIF, BNLIF, BNIF))]
        self.assertEqual(kinds("models"), [PLIF, IF, LIF])
        plif = getattr(load_run(self.runs["models"]), "2")
        self.assertEqual(tuple(plif.w.shape), (6,))  # the checkpoint's "2.w", a w per channel
        self.assertEqual(kinds("alif"), [BNLIF])  # batch norm fused with the ALIF: BNLIF runs the ALIF's parameters
        self.assertEqual(_kernels.lif_params_of(getattr(load_run(self.runs["alif"]), "2").lif_params()).model, 3)

    def test_state_dict_names_are_the_checkpoints(self):
        model = load_run(self.runs["conv"])
        names = set(model.state_dict())
        # the checkpoint's names exactly, fused or not
        self.assertEqual(names, {"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var",
                                 "1.num_batches_tracked", "4.weight", "5.weight", "5.bias", "5.running_mean",
                                 "5.running_var", "5.num_batches_tracked", "11.weight", "11.bias", "13.weight",
                                 "13.bias"})
        self.assertEqual(set(load_run(self.runs["conv"], fuse_bn=False).state_dict()), names)
        self.assertIsInstance(getattr(model, "2"), torch.nn.Module)
        self.assertIsInstance(getattr(model, "7"), LIF)
        self.assertIsNone(getattr(model, "7").v_reset)

    def test_fine_tune_step(self):
        """The loaded module trains: gradients reach every parameter."""
        model = load_run(self.runs["conv"]).train()
        x = (torch.rand(T, 3, *SHAPE) < 0.3).float()
        torch.nn.functional.cross_entropy(model(x), torch.tensor([0, 1, 2])).backward()
        for n, p in model.named_parameters():
            self.assertIsNotNone(p.grad, n)

    def test_checkpoint_file_and_last(self):
        last = os.path.join(self.runs["mlp"], "last.safetensors")
        x = (torch.rand(T, 2, *SHAPE) < 0.3).float()
        with torch.no_grad():
            self.assertLessEqual((load_run(last)(x) - self.engine_logits(last, x)).abs().max().item(), 1e-5)

    def test_layer_without_counterpart(self):
        original = run._module_of
        with mock.patch.object(run, "_module_of", lambda d, chw: None if d.kind_name == "avgpool2d"
                               else original(d, chw)):
            with self.assertRaisesRegex(ValueError, r"layer 8 \(avgpool2d\) has no PyTorch equivalent"):
                load_run(self.runs["conv"])

    def test_bad_paths(self):
        with self.assertRaisesRegex(FileNotFoundError, "holds no run"):
            load_run(self.tmp)
        with self.assertRaisesRegex(FileNotFoundError, "does not exist"):
            load_run(os.path.join(self.tmp, "nothing.safetensors"))
        bad = os.path.join(self.tmp, "bad.safetensors")
        with open(bad, "wb") as f:
            f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{}              ")
        with self.assertRaisesRegex(spikefuse.SpikefuseError, "bad.safetensors"):
            load_run(bad)

    def test_wrong_input_shape(self):
        model = load_run(self.runs["mlp"])
        with self.assertRaisesRegex(ValueError, r"must be an encoded input \[T, B, 2, 8, 8\], got \(4, 2, 1, 8, 8\)"):
            model(torch.zeros(T, 2, 1, 8, 8))
        with self.assertRaisesRegex(ValueError, r"trained on synthetic, whose samples are already the T steps"):
            model(torch.zeros(2, 2, 8, 8))  # a synthetic run's samples are spike trains, not images

    @unittest.skipIf(nir is None, "the nir package is not installed (pip install nir)")
    def test_to_nir(self):
        """A loaded run exports to NIR (batch norm folded, residual sum, IF and LIF layers, max pool of spikes,
        leaky readout) and from_nir gives its readout back; what NIR cannot take is named."""
        from spikefuse.torch import from_nir, to_nir
        x = (torch.rand(T, 3, *SHAPE, generator=torch.Generator().manual_seed(1)) < 0.3).float()
        model = load_run(self.runs["models"])
        with torch.no_grad():
            model.eval()
            for m in model.modules():
                if isinstance(m, PLIF):  # NIR's layers share their parameters: one w
                    m.w.fill_(float(m.w.mean()))
            graph = to_nir(model, x)
            kinds = {type(n).__name__ for n in graph.nodes.values()}
            self.assertTrue({"Conv2d", "LIF", "IF", "SumPool2d", "Threshold", "Affine", "LI"} <= kinds, kinds)
            self.assertIn(("4", "7"), graph.edges)  # the residual sum: both summands feed layer 7
            self.assertIn(("3", "7"), graph.edges)
            with tempfile.TemporaryDirectory() as d:
                nir.write(os.path.join(d, "run.nir"), graph)
                back = from_nir(os.path.join(d, "run.nir"))
            _, readout = model(x, return_readout=True)
            self.assertLess((back(x) - readout).abs().max().item(), 1e-5)
        with self.assertRaisesRegex(ValueError, "to_nir: 7 \\(LIF\\): a soft reset"):
            to_nir(load_run(self.runs["conv"]), x)
        with self.assertRaisesRegex(ValueError, "RecurrentLIF"):
            to_nir(load_run(self.runs["mlp"]), x)


def read_idx(path):
    """The array of an IDX file (tests/cli/make_idx.py writes them) as a uint8 tensor."""
    with open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


IMAGES_NET = """[train]
dataset = fashion-mnist
encoding = {encoding}
epochs = 1
batch = 32
timesteps = 4
optimizer = adam
lr = 0.003
log_every = 0
[flatten]
[linear]
out = 32
[lif]
[linear]
out = 10
"""


@unittest.skipUnless(CLI and os.path.exists(CLI), "no spikefuse CLI (ctest sets SPIKEFUSE_CLI)")
class TestImageRuns(unittest.TestCase):
    """A run on images answers images as `spikefuse eval` does: the same correct count and the same firing rate of
    its LIF layer over the test split, which only the same normalised (or latency-encoded) input gives."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sf_load_run_images_")
        data = os.path.join(cls.tmp, "data")
        make_idx = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "cli", "make_idx.py")
        subprocess.run([sys.executable, make_idx, data, "--train", "128", "--test", "96"], check=True)
        cls.images = read_idx(os.path.join(data, "t10k-images-idx3-ubyte")).unsqueeze(1)
        cls.labels = read_idx(os.path.join(data, "t10k-labels-idx1-ubyte")).long()
        cls.runs = {enc: train(cls.tmp, enc, IMAGES_NET.format(encoding=enc), "--set",
                               f"train.data_dir={data}") for enc in ("direct", "latency")}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_as_spikefuse_eval(self):
        for enc, run_dir in self.runs.items():
            with self.subTest(encoding=enc):
                ref = json.loads(subprocess.run([CLI, "eval", run_dir, "--json"], check=True, capture_output=True,
                                                text=True).stdout)
                model = load_run(run_dir)
                spikes = []
                getattr(model, "2").register_forward_hook(lambda m, i, o: spikes.append(o))
                with torch.no_grad():
                    logits = model(self.images)  # uint8 pixels, as the files hold them
                correct = int((logits.argmax(1) == self.labels).sum())
                self.assertEqual(correct, ref["correct"])
                rate = float(torch.cat([s.flatten(1) for s in spikes], 1).mean())
                self.assertAlmostEqual(rate, ref["firing_rates"][0]["rate"], delta=1e-6)
                self.assertTrue(0.01 < rate < 0.99, rate)

    def test_encoding(self):
        model = load_run(self.runs["direct"])
        self.assertEqual(model.encoding, dict(dataset="fashion-mnist", images=True, encoding="direct",
                                              normalize=True, mean=(torch.tensor(0.2860).item(),),
                                              std=(torch.tensor(0.3530).item(),), timesteps=4))
        self.assertIn("fashion-mnist images in [0, 1], direct encoding over T = 4 steps, normalised with mean",
                      repr(model))
        x = self.images[:5].float() / 255
        encoded = model.encode(x)
        self.assertEqual(tuple(encoded.shape), (4, 5, 1, 28, 28))
        self.assertTrue(torch.equal(encoded[2], (x - torch.tensor(0.2860)) / torch.tensor(0.3530)))
        with torch.no_grad():
            self.assertTrue(torch.equal(model(x), model(encoded)))
            self.assertTrue(torch.equal(model(self.images[:5]), model(x)))
        latency = load_run(self.runs["latency"]).encode(torch.tensor([0.0, 0.2, 1.0]).view(3, 1, 1, 1)
                                                        .expand(3, 1, 28, 28), T=5)
        self.assertEqual(latency[:, :, 0, 0, 0].t().tolist(),  # step round(4·(1 − x)); none for black
                         [[0, 0, 0, 0, 0], [0, 0, 0, 1, 0], [1, 0, 0, 0, 0]])


if __name__ == "__main__":
    unittest.main()
