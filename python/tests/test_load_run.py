"""test_load_run.py — spikefuse.torch.load_run: short runs of `spikefuse train` (the CLI named by $SPIKEFUSE_CLI, on
the synthetic dataset, so no files are needed) loaded as torch modules give the C engine's logits on the same
inputs (within 1e-5), fused and unfused, and bad paths or layers without a counterpart give clear errors."""
import os
import shutil
import subprocess
import tempfile
import unittest
from unittest import mock

import torch

import spikefuse
from spikefuse import _net
from spikefuse.torch import BNLIF, LIF, load_run, run

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


@unittest.skipUnless(CLI and os.path.exists(CLI), "no spikefuse CLI (ctest sets SPIKEFUSE_CLI)")
class TestLoadRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sf_load_run_")
        cls.runs = {}
        for name, text in (("conv", CONV_NET), ("mlp", MLP)):
            cfg = os.path.join(cls.tmp, name + ".ini")
            with open(cfg, "w") as f:
                f.write(text)
            out = os.path.join(cls.tmp, name)
            subprocess.run([CLI, "train", cfg, "--out", out], check=True, capture_output=True,
                           env=dict(os.environ, OMP_NUM_THREADS="2"))
            cls.runs[name] = out

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
        for name, fuse in (("conv", True), ("conv", False), ("mlp", True)):
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
                fused = [m for m in model.modules() if isinstance(m, BNLIF)]
                self.assertEqual(len(fused), 1 if fuse else 0)  # conv: layer 5's BN feeds an add, not fused

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
        with self.assertRaisesRegex(ValueError, r"\[T, B, 2, 8, 8\]"):
            model(torch.zeros(T, 2, 1, 8, 8))


if __name__ == "__main__":
    unittest.main()
