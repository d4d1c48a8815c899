"""Learning-rate schedule fixtures: the learning rate of every epoch under PyTorch's StepLR and CosineAnnealingLR
(float64), for sf_schedule_lr to follow."""
import os
import sys

import torch

from fixture_io import save


def trace(make_scheduler, base_lr, epochs):
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=base_lr)
    sched = make_scheduler(opt)
    lrs = []
    for _ in range(epochs):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return torch.tensor(lrs, dtype=torch.float64)


def main():
    out = sys.argv[1]
    epochs = 12
    save(os.path.join(out, "schedule.safetensors"), {
        "step": trace(lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5), 0.1, epochs),
        "cosine": trace(lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=epochs, eta_min=1e-3), 0.1,
                        epochs),
    })


if __name__ == "__main__":
    main()
