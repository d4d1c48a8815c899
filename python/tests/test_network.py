"""test_network.py — spikefuse.torch.Network, a whole engine network as one torch module, on the CPU: its output and
gradients bit for bit those of the engine's own step on the same input and output gradient; a module tree run by
torch with the same weights (fuse) within 1e-5; parameters and batch norm statistics shared with the engine
(optimizers, state_dict, clipping), train/eval/no_grad, the input's gradient; 20 optimizer steps equal to the
CLI trainer's; config files and checkpoints; DDP on 2 ranks (gloo); and the errors."""
import copy
import ctypes
import io
import os
import pickle
import socket
import subprocess
import sys
import tempfile
import unittest

import torch

from spikefuse import _engine
from spikefuse.torch.network import Network, layer
from spikefuse.torch.run import encode
from test_fuse import close

CLI = os.environ.get("SPIKEFUSE_CLI", "")
HERE = os.path.dirname(os.path.abspath(__file__))


def conv_layers():
    return [layer("conv2d", out_channels=4, padding=1), layer("batchnorm"), layer("lif", v_threshold=0.5),
            layer("maxpool2d", kernel=2), layer("conv2d", out_channels=4, padding=1, bias=0),
            layer("plif", tau=3.0, surrogate="atan"), layer("avgpool2d", kernel=2), layer("flatten"),
            layer("dropout", dropout_p=0.25), layer("linear", out_features=5)]


def sample(T=3, B=4, shape=(2, 8, 8), seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand((T, B) + shape, generator=g) * 2


def host_engine_step(descs, x, labels, memory):
    """The engine's own split training step on host memory: (output, the gradient its loss seeded, {name: grad},
    {name: buffer})."""
    e = _engine.Engine.from_layers(descs, x.shape[2:], "cpu", "fp32", memory, 0, False)
    f = e._f
    e.compile(x.shape[0], x.shape[1], False)
    x = x.contiguous()
    lab = labels.to(torch.int32).contiguous()
    result = (ctypes.c_ubyte * 64)()
    _lib_check(f["forward_host"](e._h, x.data_ptr(), 1), "sf_net_forward")
    _lib_check(f["loss"](e._h, lab.data_ptr(), result), "sf_net_loss")
    n_out = x.shape[0] * x.shape[1] * 5
    dy = torch.empty(n_out)
    _lib_check(f["output_grad"](e._h, dy.data_ptr()), "sf_net_read_output_grad")
    _lib_check(f["backward_host"](e._h), "sf_net_backward")
    y = torch.empty(n_out)
    _lib_check(f["read_activation"](e._h, len(descs), y.data_ptr()), "sf_net_read_activation")
    grads = {n: _copy(e, _engine.ROLE_GRAD, i, s) for i, (n, s) in enumerate(e.tensor_infos(_engine.ROLE_PARAM))}
    bufs = {n: _copy(e, _engine.ROLE_BUFFER, i, s) for i, (n, s) in enumerate(e.tensor_infos(_engine.ROLE_BUFFER))}
    shape = (x.shape[0], x.shape[1], 5)
    return y.view(shape), dy.view(shape), grads, bufs


def _lib_check(status, what):
    from spikefuse import _lib
    _lib.check(status, what)


def _copy(e, role, i, shape):
    n = 1
    for s in shape:
        n *= s
    return torch.frombuffer((ctypes.c_float * n).from_address(e.tensor_ptr(role, i)), dtype=torch.float32).clone()


class TestAgainstEngine(unittest.TestCase):
    def test_bitwise_engine_step(self):
        """Output, parameter gradients and BN statistics equal the engine's own step (same seed, same input, the
        output gradient its loss seeded), in every memory mode, with and without the input's gradient."""
        x, labels = sample(), torch.tensor([0, 1, 2, 4])
        for memory in _engine.MEMORY_MODES:
            y_ref, dy, grads, bufs = host_engine_step(conv_layers(), x, labels, memory)
            for want_dx in (False, True):
                with self.subTest(memory=memory, input_grad=want_dx):
                    net = Network(conv_layers(), input_shape=(2, 8, 8), memory=memory)
                    xin = x.clone().requires_grad_(want_dx)
                    y = net(xin)
                    self.assertTrue(torch.equal(y, y_ref))
                    y.backward(dy)
                    for name, p in net.named_parameters():
                        self.assertTrue(torch.equal(p.grad.flatten(), grads[name]), name)
                    for name, b in net.named_buffers():
                        self.assertTrue(torch.equal(b.flatten(), bufs[name]), name)
                    self.assertEqual(xin.grad is not None, want_dx)
                    if want_dx:
                        self.assertGreater(xin.grad.abs().sum().item(), 0)

    def test_input_grad_finite_differences(self):
        """A net linear in its input (conv, avg-pool, linear): <dx, v> equals the derivative of <dy, y> along v."""
        net = Network([layer("conv2d", out_channels=3, padding=1), layer("avgpool2d", kernel=2),
                       layer("flatten"), layer("linear", out_features=4)], input_shape=(2, 6, 6))
        x = sample(2, 3, (2, 6, 6)).requires_grad_()
        g = torch.Generator().manual_seed(4)
        dy, v = torch.randn(2, 3, 4, generator=g), torch.randn(x.shape, generator=g)
        (net(x) * dy).sum().backward()
        with torch.no_grad():
            eps = 1e-2
            numeric = ((net(x + eps * v) * dy).sum() - (net(x - eps * v) * dy).sum()).item() / (2 * eps)
        analytic = (x.grad * v).sum().item()
        self.assertLess(abs(numeric - analytic), 1e-3 * abs(analytic))


class TestModule(unittest.TestCase):
    def test_names_and_shared_memory(self):
        net = Network(conv_layers(), input_shape=(2, 8, 8))
        self.assertEqual([n for n, _ in net.named_parameters()],
                         ["0.weight", "0.bias", "1.weight", "1.bias", "4.weight", "5.w", "9.weight", "9.bias"])
        self.assertEqual(list(net.state_dict()), ["0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean",
                                                  "1.running_var", "4.weight", "5.w", "9.weight", "9.bias"])
        x = sample()
        net.eval()
        before = net(x)
        with torch.no_grad():
            getattr(net, "9").bias.add_(1.0)  # in place: the engine computes with it
        self.assertTrue(torch.allclose(net(x), before + 1.0, atol=1e-6))

    def test_gradients_accumulate_and_outlive_the_next_backward(self):
        """Two backwards without zero_grad sum their gradients; a gradient kept from one backward is not
        changed by the next (each backward hands out its own copy of the engine's gradients)."""
        net = Network([layer("linear", out_features=6), layer("lif"), layer("linear", out_features=3)],
                      input_shape=(5,), seed=2)
        for p in net.parameters():  # a frozen weight takes no gradient
            p.requires_grad_(p is not net._params[2])
        xs = [sample(4, 3, (5,), seed=s) for s in (1, 2)]
        alone = []
        for x in xs:
            net.zero_grad(set_to_none=True)
            net(x).square().sum().backward()
            alone.append({n: p.grad.clone() for n, p in net.named_parameters() if p.requires_grad})
        self.assertIsNone(net._params[2].grad)
        net.zero_grad(set_to_none=True)
        net(xs[0]).square().sum().backward()
        net(xs[1]).square().sum().backward()
        for n, p in net.named_parameters():
            if p.requires_grad:
                torch.testing.assert_close(p.grad, alone[0][n] + alone[1][n], rtol=1e-6, atol=1e-6, msg=n)
        net.zero_grad(set_to_none=True)
        net(xs[0]).square().sum().backward()
        kept = [p.grad for p in net._params if p.requires_grad]
        net.zero_grad(set_to_none=True)
        net(xs[1]).square().sum().backward()
        for g, (n, want) in zip(kept, alone[0].items()):
            self.assertTrue(torch.equal(g, want), n)

    def test_optimizer_state_dict_and_save(self):
        torch.manual_seed(0)
        net = Network(conv_layers(), input_shape=(2, 8, 8), seed=3)
        opt = torch.optim.Adam(net.parameters(), lr=1e-2)
        sched = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
        x, labels = sample(), torch.tensor([0, 1, 2, 4])
        w0 = getattr(net, "0").weight.detach().clone()
        for _ in range(3):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x).mean(0), labels).backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 0.5)
            opt.step()
            sched.step()
        self.assertFalse(torch.equal(getattr(net, "0").weight, w0))
        buf = io.BytesIO()
        torch.save(net.state_dict(), buf)
        other = Network(conv_layers(), input_shape=(2, 8, 8), seed=9)
        buf.seek(0)
        other.load_state_dict(torch.load(buf))
        net.eval(), other.eval()
        self.assertTrue(torch.equal(net(x), other(x)))

    def test_modes(self):
        net = Network(conv_layers(), input_shape=(2, 8, 8))
        x = sample()
        mean = getattr(net, "1").running_mean
        with torch.no_grad():
            net(x)  # training mode without autograd: batch statistics, running ones updated
        moved = mean.clone()
        self.assertGreater(moved.abs().sum().item(), 0)
        net.eval()
        a, b = net(x), net(x)
        self.assertTrue(torch.equal(a, b))  # no dropout, running statistics
        self.assertTrue(torch.equal(mean, moved))
        self.assertFalse(a.requires_grad)

    def test_smaller_eval_batch_keeps_the_plan(self):
        """An evaluation batch smaller than the plan's runs in it (padded): the same outputs as those samples in a
        full batch, and no new plan."""
        net = Network(conv_layers(), input_shape=(2, 8, 8)).eval()
        x = sample()
        full = net(x)
        part = net(x[:, :3])
        self.assertEqual(net._engine.compiled_for, (3, 4))
        self.assertTrue(torch.equal(part, full[:, :3]))

    def test_deepcopy(self):
        """copy.deepcopy makes a second engine network with the same state (not a second owner of the first's);
        pickling says what to do instead."""
        net = Network(conv_layers(), input_shape=(2, 8, 8))
        with torch.no_grad():
            net(sample())  # running statistics moved
        twin = copy.deepcopy(net)
        self.assertIsNot(twin._engine, net._engine)
        for (n, a), b in zip(net.state_dict().items(), twin.state_dict().values()):
            self.assertTrue(torch.equal(a, b), n)
            self.assertNotEqual(a.data_ptr(), b.data_ptr())
        net.eval(), twin.eval()
        self.assertTrue(torch.equal(net(sample()), twin(sample())))
        with self.assertRaisesRegex(TypeError, "state_dict"):
            pickle.dumps(net)

    def test_errors(self):
        net = Network(conv_layers(), input_shape=(2, 8, 8))
        with self.assertRaisesRegex(ValueError, "T is missing"):
            net(torch.rand(4, 2, 8, 8))
        with self.assertRaisesRegex(ValueError, "float32"):
            net(sample().double())
        with self.assertRaisesRegex(RuntimeError, "constructor options"):
            net.double()
        y1 = net(sample())
        net(sample())
        with self.assertRaisesRegex(RuntimeError, "before the next forward"):
            y1.sum().backward()
        y = net(sample())
        y.sum().backward(retain_graph=True)
        with self.assertRaisesRegex(RuntimeError, "ran already"):
            y.sum().backward()
        with self.assertRaisesRegex(ValueError, "layer 1 \\(linear\\)"):
            Network([layer("conv2d", out_channels=2), layer("linear", out_features=3)], input_shape=(1, 4, 4))
        with self.assertRaisesRegex(ValueError, "tau"):
            layer("lif", tau=0.5)
        with self.assertRaisesRegex(ValueError, "input_shape"):
            Network(conv_layers())


def _cuda_ok():
    from spikefuse import _lib
    return torch.cuda.is_available() and _lib.cuda_device_count() > 0


@unittest.skipUnless(_cuda_ok(), "no CUDA device for torch and the library")
class TestCuda(unittest.TestCase):
    """The same network on the GPU (fp32, no TF32) as on the CPU within 1e-4; bf16's weight copy follows the
    optimizer; the work is ordered with torch's current stream (a side stream here)."""

    def test_as_on_the_cpu(self):
        x, labels = sample(), torch.tensor([0, 1, 2, 4])
        nets = {d: Network(conv_layers()[:8] + [layer("linear", out_features=5)], input_shape=(2, 8, 8), device=d)
                for d in ("cpu", "cuda")}
        out = {}
        for d, net in nets.items():
            xin = x.detach().to(d).requires_grad_()  # a leaf on each device
            y = net(xin)
            torch.nn.functional.cross_entropy(y.mean(0), labels.to(d)).backward()
            out[d] = dict(output=y.detach(), input_grad=xin.grad, **{n: p.grad for n, p in net.named_parameters()})
        for name, b in out["cpu"].items():  # close(): 0.bias, before a batch norm, is zero but for rounding
            tol = 2e-4 if name.endswith(".w") else 1e-4  # a PLIF's w: one sum whose terms cancel (test_fuse.py)
            close(self, out["cuda"][name].cpu(), b, name, tol)

    def test_bf16_weights_follow_the_optimizer(self):
        x = sample().cuda()
        net = Network(conv_layers(), input_shape=(2, 8, 8), device="cuda", precision="bf16")
        opt = torch.optim.SGD(net.parameters(), lr=0.5)
        torch.nn.functional.cross_entropy(net(x).mean(0), torch.tensor([0, 1, 2, 4], device="cuda")).backward()
        opt.step()
        fresh = Network(conv_layers(), input_shape=(2, 8, 8), device="cuda", precision="bf16", seed=7)
        fresh.load_state_dict(net.state_dict())
        net.eval(), fresh.eval()
        after, expected = net(x), fresh(x)  # fresh made its bf16 copy from the updated weights at its first forward
        scale = expected.abs().max().item()
        self.assertLess((after - expected).abs().max().item(), 1e-2 * scale)

    def test_side_stream(self):
        net = Network(conv_layers(), input_shape=(2, 8, 8), device="cuda").eval()
        x = sample().cuda()
        ref = net(x)
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            x2 = x * 1.0  # produced on the side stream: the engine must wait for it
            y = net(x2)
            z = y * 1.0  # read on the side stream: it must wait for the engine
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(z, ref))


def make_idx(tmp, n):
    data = os.path.join(tmp, "data")
    subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "tests", "cli", "make_idx.py"), data, "--train",
                    str(n), "--test", "16"], check=True)
    return data


def read_idx(path):
    with open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return torch.frombuffer(bytearray(raw[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


TRAIN_20 = """[train]
dataset = fashion-mnist
epochs = 20
batch = 16
timesteps = 2
augment = off
optimizer = {optimizer}
lr = {lr}
momentum = 0.9
seed = 3
log_every = 0
[conv]
filters = 4
size = 3
pad = 1
bias = off
[bn]
[lif]
[maxpool]
size = 2
[flatten]
[linear]
out = 10
"""


@unittest.skipUnless(CLI and os.path.exists(CLI), "no spikefuse CLI (ctest sets SPIKEFUSE_CLI)")
class TestAgainstCli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sf_network_")
        cls.data = make_idx(cls.tmp, 16)  # one batch: each epoch is one step on the same 16 images

    def run_cli(self, name, text):
        cfg = os.path.join(self.tmp, name + ".ini")
        with open(cfg, "w") as f:
            f.write(text)
        out = os.path.join(self.tmp, name)
        subprocess.run([CLI, "train", cfg, "--out", out, "--set", f"train.data_dir={self.data}"], check=True,
                       capture_output=True, env=dict(os.environ, OMP_NUM_THREADS="2"))
        return cfg, out

    def test_twenty_steps_as_the_cli(self):
        """20 steps of torch's optimizer on a Network built from the config equal 20 of the CLI's (its
        last.safetensors): SGD with momentum and Adam."""
        images = read_idx(os.path.join(self.data, "train-images-idx3-ubyte")).unsqueeze(1)
        labels = read_idx(os.path.join(self.data, "train-labels-idx1-ubyte")).long()
        for optimizer, lr in (("sgd", 0.05), ("adam", 0.002)):
            with self.subTest(optimizer=optimizer):
                cfg, run_dir = self.run_cli(optimizer, TRAIN_20.format(optimizer=optimizer, lr=lr))
                net = Network(cfg)
                trained = Network(os.path.join(run_dir, "last.safetensors"))
                x = encode(images, _net_encoding(run_dir), 2)
                opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9) if optimizer == "sgd" else \
                    torch.optim.Adam(net.parameters(), lr=lr)
                for _ in range(20):
                    opt.zero_grad()
                    torch.nn.functional.cross_entropy(net(x).mean(0), labels).backward()
                    opt.step()
                ref = trained.state_dict()
                for name, t in net.state_dict().items():
                    err = ((t - ref[name]).abs().max() / ref[name].abs().max().clamp_min(1e-12)).item()
                    self.assertLess(err, 1e-4, f"{optimizer}: {name}")

    def test_checkpoint_as_load_run(self):
        """A Network from a run directory answers as load_run's module (the T-mean of its output)."""
        from spikefuse.torch import load_run
        _, run_dir = self.run_cli("ckpt", TRAIN_20.format(optimizer="adam", lr=0.002).replace("epochs = 20",
                                                                                              "epochs = 2"))
        images = read_idx(os.path.join(self.data, "t10k-images-idx3-ubyte")).unsqueeze(1)
        ref = load_run(run_dir)
        x = ref.encode(images)
        net = Network(run_dir).eval()
        self.assertLess((net(x).mean(0) - ref(x)).abs().max().item(), 1e-5)
        self.assertEqual(set(net.state_dict()), set(ref.state_dict()) - {k for k in ref.state_dict()
                                                                        if k.endswith("num_batches_tracked")})


def _net_encoding(run_dir):
    from spikefuse import _net
    return _net.input_encoding(os.path.join(run_dir, "last.safetensors"))


class TestDistributed(unittest.TestCase):
    def test_ddp_two_ranks_gloo(self):
        """ddp_check.py --network: 2 ranks (gloo on the CPU) give one process's gradients. The ranks are started
        here with torch's env:// variables (Debian's torch.distributed.run fails on Python 3.11)."""
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "ddp_check.py"), "--network"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env=dict(os.environ, OMP_NUM_THREADS="1", RANK=str(r), LOCAL_RANK=str(r),
                                           WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)))
                 for r in range(2)]
        outs = [p.communicate(timeout=300)[0] for p in procs]
        for r, (p, out) in enumerate(zip(procs, outs)):
            self.assertEqual(p.returncode, 0, f"rank {r}: {out[-2000:]}")
        self.assertIn("(Network)", outs[0])
        self.assertIn(": ok", outs[0])


if __name__ == "__main__":
    unittest.main()
