# SPDX-License-Identifier: BSD-3-Clause
"""The task of convergence.py and convergence_model.py: the student CNN and
its synthetic data, one definition for both (torch is imported by the
caller's first use)."""


def cnn(seed):
    """Two convolutions, two fully connected layers (38k parameters), from seed."""
    import torch
    import torch.nn as nn

    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10))


def data():
    """(batch, x_eval, y_eval): batch(gen, n) draws n labelled images. Ten
    classes, each a fixed random 16 x 16 pattern (entries of standard deviation
    0.3) under unit Gaussian noise: a task the CNN learns in a few hundred
    steps, with room for the methods to differ on the way. The held-out set is
    512 fixed samples."""
    import torch

    proto = torch.randn(10, 1, 16, 16, generator=torch.Generator().manual_seed(1234)) * 0.3

    def batch(gen, n):
        y = torch.randint(0, 10, (n,), generator=gen)
        return proto[y] + torch.randn(n, 1, 16, 16, generator=gen), y

    x_eval, y_eval = batch(torch.Generator().manual_seed(999), 512)
    return batch, x_eval, y_eval
