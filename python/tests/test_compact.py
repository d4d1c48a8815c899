"""test_compact.py — spikes_saved_as_bytes: the spikes that a convolution or linear layer after LIF/BNLIF saves for
its backward are kept as uint8 (a quarter of the bytes) and the gradients stay exactly the same."""
import unittest

import torch

from spikefuse.torch import BNLIF, LIF, compact, spikes_saved_as_bytes


def net():
    torch.manual_seed(0)
    T = 4
    return torch.nn.Sequential(
        torch.nn.Flatten(0, 1), torch.nn.Conv2d(2, 8, 3, padding=1), torch.nn.Unflatten(0, (T, -1)),
        BNLIF(8, keep_state=False), torch.nn.Flatten(0, 1), torch.nn.Conv2d(8, 8, 3, padding=1),
        torch.nn.Unflatten(0, (T, -1)), BNLIF(8, keep_state=False), torch.nn.Flatten(2),
        torch.nn.Linear(8 * 36, 16), LIF(keep_state=False), torch.nn.Linear(16, 3))


def grads(model, x, compact_spikes):
    model.zero_grad()
    if compact_spikes:
        with spikes_saved_as_bytes():
            out = model(x)
    else:
        out = model(x)
    out.square().sum().backward()
    return [p.grad.clone() for p in model.parameters()]


class TestCompact(unittest.TestCase):
    def test_same_gradients(self):
        x = torch.rand(4, 3, 2, 6, 6) * 3
        model = net()
        for a, b in zip(grads(model, x, False), grads(model, x, True)):
            self.assertTrue(torch.equal(a, b))

    def test_spikes_are_kept_as_bytes(self):
        """The saved tensors' bytes with the packing (its hook composed with a counter)."""
        x = torch.rand(4, 3, 2, 6, 6) * 3
        model = net()
        counts = {}
        for packed in (False, True):
            storages = {}

            def pack(t, packed=packed):
                p = compact._pack(t) if packed else t
                kept = p[0] if isinstance(p, tuple) else p
                st = kept.untyped_storage() if hasattr(kept, "untyped_storage") else kept.storage()
                storages[st.data_ptr()] = st.nbytes()
                return p
            with torch.autograd.graph.saved_tensors_hooks(pack, compact._unpack):
                model(x).sum().backward()
            counts[packed] = sum(storages.values())
        spikes = 4 * 3 * 8 * 36 + 4 * 3 * 8 * 36 + 4 * 3 * 16  # what the second conv and both linears save
        self.assertEqual(counts[False] - counts[True], spikes * 3)  # 3 of their 4 bytes each

    def test_views_and_other_tensors(self):
        s = compact.mark_spikes(torch.tensor([[0.0, 1.0], [1.0, 0.0]]))
        packed = compact._pack(s.flatten())
        self.assertEqual(packed[0].dtype, torch.uint8)
        self.assertTrue(torch.equal(compact._unpack(packed), s.flatten()))
        other = torch.tensor([0.5, 1.0])
        self.assertIs(compact._pack(other), other)


if __name__ == "__main__":
    unittest.main()
