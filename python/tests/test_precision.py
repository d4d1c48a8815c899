"""test_precision.py — 16-bit inputs (bfloat16, float16) to LIF, given directly and under torch.autocast: the
membrane is fp32, so spikes (exactly 0/1, in the input's dtype) equal those of the fp32 input widened from the
same values, and gradients (in the input's dtype) are the fp32 gradients rounded once (within one unit in the last
place: 16-bit kernels may sum in another order)."""
import unittest

import torch

import spikefuse
from lif_cases import make_input
from spikefuse.torch import LIF

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and spikefuse.cuda_device_count() > 0 else [])


def assert_rounded(test, got, ref):
    """got (16-bit) is ref (fp32) rounded once: within one unit in the last place of its type."""
    ulp = torch.finfo(got.dtype).eps * ref.abs().clamp_min(torch.finfo(got.dtype).tiny)
    bad = int(((got.float() - ref).abs() > ulp).sum())
    test.assertEqual(bad, 0, f"{bad} gradients are not the fp32 ones rounded to {got.dtype}")


def spikes_and_grad(x, ds, **kw):
    xg = x.clone().requires_grad_(True)
    s = LIF(keep_state=False, **kw)(xg)
    s.backward(ds)
    return s, xg.grad


class TestHalfInputs(unittest.TestCase):
    def test_direct(self):
        for device in DEVICES:
            for dtype in (torch.bfloat16, torch.float16):
                for kw in (dict(), dict(v_reset=None, surrogate="atan", detach_reset=True)):
                    with self.subTest(device=device, dtype=dtype, **kw):
                        x, ds = make_input((6, 4, 257), True, 11, device)
                        x, ds = x.to(dtype), ds.to(dtype)
                        s, dx = spikes_and_grad(x, ds, **kw)
                        s32, dx32 = spikes_and_grad(x.float(), ds.float(), **kw)
                        self.assertEqual((s.dtype, dx.dtype), (dtype, dtype))
                        self.assertTrue(bool(((s == 0) | (s == 1)).all()))
                        self.assertTrue(torch.equal(s.float(), s32))
                        assert_rounded(self, dx, dx32)

    def test_chunks_keep_an_fp32_state(self):
        node = LIF()
        x, _ = make_input((4, 3, 9), True, 12, "cpu")
        node(x[:2].to(torch.bfloat16))
        self.assertEqual(node.v.dtype, torch.float32)
        whole = LIF(keep_state=False)(x.to(torch.bfloat16))
        self.assertTrue(torch.equal(node(x[2:].to(torch.bfloat16)), whole[2:]))

    def test_autocast(self):
        """A Linear under autocast hands the LIF a 16-bit tensor: no TypeError, spikes in that dtype."""
        for device in DEVICES:
            dtype = torch.bfloat16
            fc = torch.nn.Linear(8, 16).to(device)
            x = torch.rand(5, 3, 8, device=device) * 3
            with torch.autocast(device, dtype=dtype):
                y = fc(x)
                s = LIF()(y)
            self.assertEqual((y.dtype, s.dtype), (dtype, dtype))
            s.float().sum().backward()
            self.assertEqual(fc.weight.grad.dtype, torch.float32)


if __name__ == "__main__":
    unittest.main()
