"""Data-parallel training of a NumPy MLP on Fashion-MNIST with synk, the Synkhronos way: the
images are a synk.Data held once per node, and a synk.Function splits each batch across the
ranks and averages the gradients back to every rank, which all take the same step.

Run: PYTHONPATH=build/python build/bin/synkrun -np 2 python3 examples/python/train_mlp.py
"""
import argparse
import gzip
import os
import sys
import time

# One BLAS thread per rank: synkrun starts a rank per core.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import synk  # noqa: E402


def read_idx(path):
    """An IDX file of bytes (gzipped or not) as a NumPy array of its shape; ValueError where the
    file is not one."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[:3] != b"\0\0\x08":
        raise ValueError("%s is not an IDX file of bytes" % path)
    ndim = raw[3]
    if len(raw) < 4 + 4 * ndim:
        raise ValueError("%s is cut short" % path)
    dims = np.frombuffer(raw, ">u4", count=ndim, offset=4).astype(int)
    if len(raw) != 4 + 4 * ndim + int(np.prod(dims)):
        raise ValueError("%s holds %d bytes, not the %d its header says" %
                         (path, len(raw), 4 + 4 * ndim + int(np.prod(dims))))
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_split(directory, split, limit=0):
    """(images as float32 rows in [0, 1], labels as int64) of "train" or "t10k"."""
    images = read_idx(os.path.join(directory, "%s-images-idx3-ubyte.gz" % split))
    labels = read_idx(os.path.join(directory, "%s-labels-idx1-ubyte.gz" % split))
    if limit:
        images, labels = images[:limit], labels[:limit]
    return images.reshape(len(images), -1).astype(np.float32) / 255, labels.astype(np.int64)


class Mlp:
    """inputs -> hidden (ReLU) -> 10 classes (softmax); every parameter in one flat vector, so
    that the gradient is one array to average."""

    def __init__(self, inputs, hidden, seed):
        self.sizes = [(inputs, hidden), (hidden,), (hidden, 10), (10,)]
        self.params = np.zeros(sum(int(np.prod(s)) for s in self.sizes), np.float32)
        w1, _, w2, _ = self.views(self.params)
        rng = np.random.default_rng(seed)
        w1[:] = rng.standard_normal(w1.shape) * np.sqrt(2.0 / inputs)
        w2[:] = rng.standard_normal(w2.shape) * np.sqrt(2.0 / hidden)

    def views(self, flat):
        out, at = [], 0
        for shape in self.sizes:
            n = int(np.prod(shape))
            out.append(flat[at:at + n].reshape(shape))
            at += n
        return out

    def logits(self, params, x):
        w1, b1, w2, b2 = self.views(params)
        hidden = np.maximum(x @ w1 + b1, 0)
        return hidden, hidden @ w2 + b2

    def gradient(self, x, y, params):
        """(mean gradient, mean loss) over the rows x, y."""
        grad = np.zeros_like(params)
        if len(x) == 0:
            return grad, 0.0
        w1, _, w2, _ = self.views(params)
        hidden, z = self.logits(params, x)
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        loss = -np.log(p[np.arange(len(y)), y] + 1e-12).mean()
        dz = p
        dz[np.arange(len(y)), y] -= 1
        dz /= len(y)
        g1, gb1, g2, gb2 = self.views(grad)
        g2[:] = hidden.T @ dz
        gb2[:] = dz.sum(axis=0)
        dh = (dz @ w2.T) * (hidden > 0)
        g1[:] = x.T @ dh
        gb1[:] = dh.sum(axis=0)
        return grad, loss

    def correct(self, x, y, params):
        return np.int64((self.logits(params, x)[1].argmax(axis=1) == y).sum())


def number(kind, low, high=None, low_open=False, high_open=False):
    """An argparse type: a `kind` (int or float) in [low, high], either end open as asked."""
    def parse(text):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError("%r is not a number" % text) from None
        if not np.isfinite(v) or (v <= low if low_open else v < low) or (
                high is not None and (v >= high if high_open else v > high)):
            where = "%s%s, %s%s" % ("(" if low_open else "[", low,
                                    "inf" if high is None else high,
                                    ")" if high_open or high is None else "]")
            raise argparse.ArgumentTypeError("%s is not in %s" % (text, where))
        return v
    return parse


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--epochs", type=number(int, 1), default=5)
    ap.add_argument("--batch", type=number(int, 1), default=256,
                    help="rows per step, over all ranks")
    ap.add_argument("--lr", type=number(float, 0, low_open=True), default=0.1)
    ap.add_argument("--momentum", type=number(float, 0, 1, high_open=True), default=0.9)
    ap.add_argument("--hidden", type=number(int, 1), default=128)
    ap.add_argument("--seed", type=number(int, 0), default=1)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--limit", type=number(int, 0), default=0,
                    help="train on the first N images (0: all)")
    ap.add_argument("--min-accuracy", type=number(float, 0, 1), default=0.0,
                    help="exit 1 if the final test accuracy is below this")
    args = ap.parse_args()

    comm = synk.world()
    master = comm.rank == 0
    train = test = (None, None)
    if master:
        try:
            train = load_split(args.data, "train", args.limit)
            test = load_split(args.data, "t10k")
        except (OSError, EOFError, ValueError) as e:
            # Every rank waits in the Data's collective below: rank 0 exits, and synkrun ends them.
            sys.exit("train_mlp: cannot read Fashion-MNIST under %s (%s); Debian's "
                     "dataset-fashion-mnist installs it" % (args.data, e))
    # Held once per node, read by every rank of it in place.
    x, y = synk.Data(train[0], name="x"), synk.Data(train[1], name="y")
    x_test, y_test = synk.Data(test[0], name="x_test"), synk.Data(test[1], name="y_test")

    model = Mlp(x.shape[1], args.hidden, args.seed)
    # Each rank's share of a batch gives a mean gradient and loss; weighted by its rows, the
    # average over the ranks is the batch's mean exactly, however the batch splits.
    step = synk.Function(model.gradient, collect=["weighted_avg", "weighted_avg"], name="step")
    evaluate = synk.Function(model.correct, collect="sum", name="evaluate")

    if args.batch > len(x):
        if master:
            print("train_mlp: note: --batch %d is more than the %d images: one step of %d"
                  % (args.batch, len(x), len(x)), flush=True)
        args.batch = len(x)
    velocity = np.zeros_like(model.params)
    order_rng = np.random.default_rng(args.seed)  # the same on every rank
    steps = -(-len(x) // args.batch)
    if master:
        print("train_mlp: %d ranks (%s), %d images, %d steps of %d per epoch"
              % (comm.size, comm.backend, len(x), steps, args.batch), flush=True)
    accuracy = 0.0
    for epoch in range(1, args.epochs + 1):
        start, losses = time.perf_counter(), []
        order = order_rng.permutation(len(x))
        for s in range(steps):
            batch = np.sort(order[s * args.batch:(s + 1) * args.batch])
            grad, loss = step(x, y, model.params, batch=batch, to_all=True)
            # SGD with momentum, the rate falling along a cosine to 0 at the last step.
            done = ((epoch - 1) * steps + s) / (args.epochs * steps)
            velocity = args.momentum * velocity + grad
            model.params -= args.lr * 0.5 * (1 + np.cos(np.pi * done)) * velocity
            losses.append(loss)
        accuracy = evaluate(x_test, y_test, model.params, to_all=True) / len(x_test)
        if master:
            print("epoch %d/%d  loss %.4f  test accuracy %.4f  (%.1f s)"
                  % (epoch, args.epochs, np.mean(losses), accuracy, time.perf_counter() - start),
                  flush=True)
    if accuracy < args.min_accuracy:
        if master:
            print("train_mlp: test accuracy %.4f is below %.4f" % (accuracy, args.min_accuracy))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
