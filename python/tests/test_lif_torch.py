"""test_lif_torch.py — spikefuse.torch.LIF against the float64 PyTorch reference, on the CPU (float32 and float64)
and (if present) CUDA."""
import unittest

import torch

from lif_cases import Float64, LifChecks, make_input, run_spikefuse
import spikefuse


class TestLifCPU(LifChecks, unittest.TestCase):
    device = "cpu"


class TestLifCPUFloat64(Float64, LifChecks, unittest.TestCase):
    pass


@unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
@unittest.skipUnless(spikefuse.cuda_device_count() > 0, "libspikefuse built without CUDA")
class TestLifCUDA(LifChecks, unittest.TestCase):
    device = "cuda"

    def test_cuda_matches_cpu(self):
        x, ds = make_input((32, 4097), True, 21, "cpu")
        s_cpu, dx_cpu = run_spikefuse(x, ds, detach_reset=True)
        s_gpu, dx_gpu = run_spikefuse(x.cuda(), ds.cuda(), detach_reset=True)
        self.assertTrue(torch.equal(s_cpu, s_gpu.cpu()))
        self.assertLess((dx_cpu - dx_gpu.cpu()).abs().max().item(), 1e-5 * max(1.0, dx_cpu.abs().max().item()))

    def test_side_stream(self):
        """The kernels run on the caller's current stream, ordered after the work queued there before them: the
        input is filled (after a long sleep) on a side stream, so a kernel on any other stream would read NaN."""
        x, ds = make_input((16, 1 << 16), True, 22, "cuda")
        s_ref, dx_ref = run_spikefuse(x, ds)
        y = torch.full_like(x, float("nan"))
        torch.cuda.synchronize()
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            torch.cuda._sleep(20_000_000)
            y.copy_(x)
            s, dx = run_spikefuse(y, ds)
        torch.cuda.current_stream().wait_stream(stream)
        self.assertTrue(torch.equal(s, s_ref))
        self.assertTrue(torch.equal(dx, dx_ref))

    @unittest.skipUnless(torch.cuda.device_count() > 1, "one CUDA device")
    def test_second_device(self):
        x, ds = make_input((8, 999), True, 23, "cpu")
        s0, dx0 = run_spikefuse(x.to("cuda:0"), ds.to("cuda:0"))
        s1, dx1 = run_spikefuse(x.to("cuda:1"), ds.to("cuda:1"))
        self.assertEqual(s1.device, torch.device("cuda:1"))
        self.assertTrue(torch.equal(s0.cpu(), s1.cpu()))
        self.assertTrue(torch.equal(dx0.cpu(), dx1.cpu()))


if __name__ == "__main__":
    unittest.main()
