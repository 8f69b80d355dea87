"""A tiny training program for test_launch_program.py, started by `sgp launch -- ...` once per
rank: a linear classifier on seeded synthetic data, a few iterations, evaluations at iterations
3 and 6, and the average model evaluated at the end on the same synthetic test set."""

import torch

import sgp.torch


def test_set():
    g = torch.Generator().manual_seed(99)
    x = torch.randn(64, 8, generator=g)
    return x, (x[:, 0] > 0).long() + 2 * (x[:, 1] > 0).long()


def evaluate(model):
    x, y = test_set()
    with torch.no_grad():
        out = model(x)
    return ((out.argmax(1) == y).float().mean().item(),
            torch.nn.functional.cross_entropy(out, y).item())


def main():
    torch.manual_seed(0)
    model = sgp.torch.GossipDataParallel(torch.nn.Linear(8, 4), iterations_per_epoch=6,
                                         batch_size=16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    g = torch.Generator().manual_seed(model.rank)
    for it in range(6):
        x = torch.randn(16, 8, generator=g)
        y = (x[:, 0] > 0).long() + 2 * (x[:, 1] > 0).long()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        model.gossip(loss, lr=0.5)
        if (it + 1) % 3 == 0:
            with model.paused():
                model.evaluated(*evaluate(model))
    model.finish(evaluate)


if __name__ == "__main__":
    main()
