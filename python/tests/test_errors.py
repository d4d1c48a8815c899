"""test_errors.py — bad inputs and parameters give clear Python exceptions (never a crash), and the ctypes
binding reports the library's own messages."""
import ctypes
import os
import subprocess
import unittest
from unittest import mock

import torch

import spikefuse
from spikefuse import _lib
from spikefuse.torch import ALIF, BNLIF, LIF, PLIF, _kernels, functional


class TestInputErrors(unittest.TestCase):
    def test_wrong_dtype(self):
        for dtype in (torch.int32, torch.bool, torch.complex64):
            with self.subTest(dtype=dtype), self.assertRaisesRegex(
                    TypeError, f"float32, float16, bfloat16 or \\(on the CPU\\) float64, got {dtype} \\(convert with "
                               "x_seq.float\\(\\)\\)"):
                LIF()(torch.zeros(3, 4, dtype=dtype))

    def test_float64_off_the_cpu(self):
        """float64 runs on the CPU only: elsewhere (CUDA, or here a meta tensor) the message says so."""
        devices = ["meta"] + (["cuda"] if torch.cuda.is_available() else [])
        for device in devices:
            with self.subTest(device=device), self.assertRaisesRegex(
                    TypeError, f"float64 runs on the CPU only .* x_seq is float64 on {device}.*: move it with "
                               "x_seq.cpu\\(\\)"):
                LIF()(torch.zeros(3, 4, dtype=torch.float64, device=device))

    def test_float64_needs_a_float64_module_and_state(self):
        """A float64 input takes float64 parameters (PLIF's w, BNLIF's affine and statistics) and state."""
        with self.assertRaisesRegex(TypeError, "w must be torch.float64 on cpu, got torch.float32 .*\\.double\\(\\)"):
            PLIF()(torch.zeros(3, 4, dtype=torch.float64))
        with self.assertRaisesRegex(ValueError, "weight must be torch.float64 \\[3\\] .*\\.double\\(\\)"):
            BNLIF(3)(torch.zeros(2, 2, 3, 4, dtype=torch.float64))
        m = LIF()
        m(torch.zeros(3, 4))
        with self.assertRaisesRegex(ValueError, "state is torch.float32, but a torch.float64 input keeps it in "
                                                "torch.float64; call reset\\(\\)"):
            m(torch.zeros(3, 4, dtype=torch.float64))
        m.reset()
        m(torch.zeros(3, 4, dtype=torch.float64))

    def test_bad_step_mode(self):
        with self.assertRaisesRegex(ValueError, "spikefuse.torch.LIF: step_mode 'x': expected 's' \\(one step\\) or 'm'"):
            LIF(step_mode="x")
        with self.assertRaisesRegex(ValueError, "spikefuse.torch.ALIF: step_mode 's': expected 'm' \\(multi-step"):
            ALIF().step_mode = "s"

    def test_not_a_tensor(self):
        with self.assertRaisesRegex(TypeError, "torch.Tensor"):
            LIF()([[1.0, 2.0]])

    def test_no_time_steps(self):
        for shape in ((), (0,), (0, 5), (0, 2, 3)):
            with self.subTest(shape=shape), self.assertRaisesRegex(ValueError, "T >= 1"):
                LIF()(torch.zeros(shape))

    def test_unsupported_device(self):
        with self.assertRaisesRegex(ValueError, "only CPU and CUDA"):
            LIF()(torch.zeros(3, 4, device="meta"))

    @unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
    def test_cuda_tensor_without_cuda_build(self):
        """A library without CUDA (or whose CUDA runtime sees no device) refuses CUDA tensors with a message."""
        x = torch.zeros(3, 4, device="cuda")
        if spikefuse.cuda_device_count() == 0:
            with self.assertRaisesRegex(RuntimeError, "no usable CUDA device"):
                LIF()(x)
        with mock.patch.object(_kernels, "_cuda_devices_in_library", return_value=0), \
                mock.patch.dict(_kernels._CUDA_DEVICES, clear=True):
            with self.assertRaisesRegex(RuntimeError, "got a CUDA tensor .* no usable CUDA device .*build:"):
                LIF()(x)


class TestParameterErrors(unittest.TestCase):
    def test_unknown_surrogate(self):
        with self.assertRaisesRegex(ValueError, "'erf' is not one of sigmoid, atan, fast_sigmoid, rect"):
            LIF(surrogate="erf")

    def test_library_checks_reach_python(self):
        cases = [(dict(alpha=0.0), "alpha"), (dict(alpha=-2.0), "alpha"), (dict(tau=0.5), "tau"),
                 (dict(v_threshold=float("nan")), "v_threshold"), (dict(grad_threshold=float("inf")), "grad_thresh")]
        for kw, word in cases:
            with self.subTest(**kw), self.assertRaisesRegex(ValueError, word):
                LIF(**kw)
        with self.assertRaisesRegex(ValueError, "^spikefuse.torch.LIF: LIF tau = 0.5: must be a finite number >= 1$"):
            LIF(tau=0.5)
        with self.assertRaisesRegex(ValueError, "^LIF tau = 0.25: must be a finite number >= 1$"):
            functional.lif(torch.zeros(2, 3), tau=0.25)

    def test_kernel_errors_carry_last_error(self):
        p = _lib.lif_params()
        with self.assertRaisesRegex(ValueError, "sf_lif_forward failed \\(SF_ERR_INVALID\\): LIF shape T=0"):
            _lib.lif_forward(p, 0, 4, 1, 1)
        with self.assertRaisesRegex(ValueError, "NULL"):
            _lib.lif_backward(p, 2, 4, 0, 0, 0)

    def test_params_mapping(self):
        """v_reset=None is the soft reset; a nonzero hard reset shifts threshold and θ_grad (see lif_params)."""
        soft = _lib.lif_params(v_reset=None, v_threshold=1.5)
        self.assertEqual((soft.soft_reset, soft.v_threshold, soft.v_reset), (1, 1.5, 0.0))
        hard = _lib.lif_params(v_reset=-0.5, v_threshold=1.0, grad_threshold=0.25)
        self.assertEqual((hard.soft_reset, hard.v_threshold, hard.v_reset), (0, 1.5, 0.0))
        self.assertEqual((hard.use_grad_threshold, hard.grad_threshold), (1, 0.75))
        self.assertEqual([_lib.lif_params(surrogate=s).alpha for s in _lib.SURROGATES], [4.0, 2.0, 10.0, 1.0])


class TestModule(unittest.TestCase):
    def test_extra_repr(self):
        text = repr(LIF(tau=3.0, v_reset=None, surrogate="atan", grad_threshold=0.5))
        for part in ("tau=3.0", "decay_input=True", "v_threshold=1.0", "v_reset=None", "detach_reset=False",
                     "surrogate='atan'", "alpha=2", "grad_threshold=0.5"):
            self.assertIn(part, text)

    def test_refused_attribute_leaves_the_module_as_it_was(self):
        m = LIF(tau=3.0)
        with self.assertRaisesRegex(ValueError, "^spikefuse.torch.LIF: LIF tau = 0.5: must be a finite number >= 1$"):
            m.tau = 0.5
        self.assertEqual((m.tau, m.lif_params()), (3.0, LIF(tau=3.0).lif_params()))

    def test_changed_attributes_take_effect(self):
        x = torch.full((3, 4), 1.5)
        m = LIF(decay_input=False, keep_state=False)
        self.assertEqual(float(m(x)[0].sum()), 4.0)
        m.v_threshold = 2.0
        self.assertEqual(float(m(x)[0].sum()), 0.0)

    def test_every_linked_library_has_its_package(self):
        """Each library libspikefuse needs, beyond glibc, the compiler's runtimes and CUDA's, has the package that
        a failed load names, and python/README.md lists it."""
        try:
            out = subprocess.run(["objdump", "-p", _lib.LIBRARY_PATH], capture_output=True, text=True).stdout
        except FileNotFoundError:
            self.skipTest("objdump (binutils) is not installed")
        needed = {line.split()[1] for line in out.splitlines() if line.strip().startswith("NEEDED")}
        base = ("libc.so", "libm.so", "ld-linux", "libstdc++", "libgcc_s", "libcu", "libnccl", "libnv")
        ours = {lib for lib in needed if not lib.startswith(base)}
        self.assertTrue(ours, out)
        self.assertEqual(sorted(ours - set(_lib._RUNTIME_PACKAGES)), [])
        readme = open(os.path.join(os.path.dirname(__file__), "..", "README.md")).read()
        for lib in ours - {"libmpi.so.40"}:  # the package's library has no MPI; the CLI's build links it
            self.assertIn(_lib._RUNTIME_PACKAGES[lib], readme, lib)

    def test_missing_runtime_library_names_its_package(self):
        hint = _lib._missing_library_hint("libhdf5_serial.so.103: cannot open shared object file: No such file")
        self.assertEqual(hint, "; install it with `apt-get install libhdf5-103-1` (python/README.md lists every "
                               "package)")
        self.assertIn("CUDA toolkit", _lib._missing_library_hint("libcudnn.so.9: cannot open shared object file"))
        self.assertEqual(_lib._missing_library_hint("something else"), "")

    def test_library_information(self):
        self.assertTrue(spikefuse.version())
        self.assertTrue(spikefuse.build_info())
        self.assertGreaterEqual(spikefuse.cuda_device_count(), 0)
        self.assertEqual(ctypes.sizeof(_lib.LifParams), 68)  # 11 fields of sf_lif_params, grad_cut, the models' 5


if __name__ == "__main__":
    unittest.main()
