"""Batches of a Data's rows, as Synkhronos takes them: None (every row), an int n (the first n),
a slice, or an array of row indices. A selection is a range (its rows are a view of the Data)
or an int64 array of rows (a copy); each rank's share is a linspace part of it."""
import numpy as np

from . import _synk
from ._agree import error


def select(batch, rows):
    """The rows `batch` picks out of `rows`, checked: a range or an int64 array."""
    if batch is None:
        return range(rows)
    if isinstance(batch, (int, np.integer)) and not isinstance(batch, bool):
        if not 0 <= batch <= rows:
            raise error(_synk.InvalidArgument,
                        "batch %d is out of range: an int takes the first n rows, 0 to %d here"
                        % (batch, rows))
        return range(int(batch))
    if isinstance(batch, slice):
        return range(*batch.indices(rows))
    if isinstance(batch, range):  # its numbers are rows, as an index array's (no negatives)
        if batch and not (0 <= min(batch[0], batch[-1]) and max(batch[0], batch[-1]) < rows):
            raise error(_synk.InvalidArgument, "batch: %r goes outside the rows, 0 to %d here"
                        % (batch, rows - 1))
        return batch if batch else range(0)
    indices = np.asarray(batch)
    if indices.ndim != 1 or (indices.size and indices.dtype.kind not in "iu"):
        raise error(_synk.InvalidArgument,
                    "batch: give None, an int, a slice or a 1-d array of row indices, not %r"
                    % (batch,))
    if indices.dtype.kind == "u" and indices.size and indices.max() > np.uint64(2**63 - 1):
        raise error(_synk.InvalidArgument, "batch: index %d is out of range for %d rows"
                    % (indices.max(), rows))
    indices = indices.astype(np.int64, copy=False)
    bad = np.flatnonzero((indices < 0) | (indices >= rows))
    if bad.size:
        raise error(_synk.InvalidArgument,
                    "batch: index %d (at position %d) is out of range for %d rows"
                    % (indices[bad[0]], bad[0], rows))
    return indices


def share(selection, rank, size):
    """Rank `rank`'s linspace share of the selection: positions [r*n/size, (r+1)*n/size)."""
    n = len(selection)
    return selection[n * rank // size:n * (rank + 1) // size]


def rows_of(view, selection):
    """The selected rows of an array: a view for a range, a copy for indices."""
    if isinstance(selection, range):
        if not selection:
            return view[:0]
        stop = selection[-1] + (1 if selection.step > 0 else -1)
        return view[selection.start:stop if stop >= 0 else None:selection.step]
    return view[selection]
