"""The links of a topology: one :class:`Link`, and :class:`LinkTable`, a compact list of them.

A complete topology of 1,448 devices has about a million links; as Python objects they take
about 150 bytes and 2 us each to build. :class:`LinkTable` keeps them as arrays (24 bytes a
link plus a shared label) and creates a :class:`Link` only when one is asked for, so building,
routing and counting a topology never touch a million objects; iterating, indexing and
slicing it still give :class:`Link` objects (``cluster.links`` is a table).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np
import numpy.typing as npt

from dnnpart.errors import UsageError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """One undirected physical link of a topology (``docs/topologies.md``).

    Parameters
    ----------
    a, b : indices of the two devices it joins (``a != b``).
    bandwidth : bytes/s, finite and > 0.
    latency : seconds, >= 0.
    kind : free label shown by ``dnnpart cluster show`` (e.g. ``"nvlink2"``, ``"pcie3"``).

    Examples
    --------
    >>> Link(a=0, b=1, bandwidth=25e9).latency
    0.0
    """

    a: int
    b: int
    bandwidth: float
    latency: float = 0.0
    kind: str = ""

    def __post_init__(self) -> None:
        if self.a == self.b or self.a < 0 or self.b < 0:
            raise UsageError(f"link {self.a}-{self.b}: must join two distinct devices")
        if not (math.isfinite(self.bandwidth) and self.bandwidth > 0):
            raise UsageError(f"link {self.a}-{self.b}: bandwidth must be a finite number > 0, "
                             f"got {self.bandwidth}")
        if not (math.isfinite(self.latency) and self.latency >= 0):
            raise UsageError(f"link {self.a}-{self.b}: latency must be a finite number >= 0, "
                             f"got {self.latency}")


def _ints(x: npt.ArrayLike) -> IntArray:
    arr: IntArray = np.array(x, dtype=np.int64).reshape(-1)  # a copy: the table owns it
    arr.flags.writeable = False
    return arr


def _floats(x: npt.ArrayLike) -> FloatArray:
    arr: FloatArray = np.array(x, dtype=np.float64).reshape(-1)
    arr.flags.writeable = False
    return arr


class LinkTable(Sequence[Link]):
    """Links held as arrays; a :class:`Link` is created for each one read.

    Parameters
    ----------
    a, b : ``(m,)`` device indices of each link's two ends.
    bandwidth, latency : ``(m,)`` bytes/s and seconds.
    kind : ``(m,)`` index into ``labels`` of each link's label (``None``: all ``labels[0]``).
    labels : the distinct labels (default ``("",)``).

    The values are checked as :class:`Link` checks them, the first bad link named.

    Examples
    --------
    >>> t = LinkTable([0, 1], [1, 2], [2.0, 1.0], [0.0, 0.0], kind=[0, 1], labels=("x", "y"))
    >>> len(t), t[1], [x.a for x in t[:1]]
    (2, Link(a=1, b=2, bandwidth=1.0, latency=0.0, kind='y'), [0])
    """

    __slots__ = ("a", "b", "bandwidth", "kind", "labels", "latency")

    def __init__(self, a: npt.ArrayLike, b: npt.ArrayLike, bandwidth: npt.ArrayLike,
                 latency: npt.ArrayLike, *, kind: npt.ArrayLike | None = None,
                 labels: Sequence[str] = ("",)) -> None:
        self.a = _ints(a)
        self.b = _ints(b)
        self.bandwidth = _floats(bandwidth)
        self.latency = _floats(latency)
        m = self.a.size
        self.kind = _ints(np.zeros(m, np.int64) if kind is None else kind)
        self.labels: tuple[str, ...] = tuple(str(x) for x in labels) or ("",)
        if not (self.b.size == self.bandwidth.size == self.latency.size == self.kind.size == m):
            raise UsageError("links: a, b, bandwidth, latency and kind need one entry per link")
        self._check()

    def _check(self) -> None:
        a, b, bw, lat = self.a, self.b, self.bandwidth, self.latency
        bad = (a == b) | (a < 0) | (b < 0) | ~(np.isfinite(bw) & (bw > 0)) \
            | ~(np.isfinite(lat) & (lat >= 0))
        if self.kind.size and (self.kind.min() < 0 or self.kind.max() >= len(self.labels)):
            raise UsageError(f"links: kind must index the {len(self.labels)} labels")
        if bad.any():
            self._make(int(np.argmax(bad)))  # raises Link's message

    @classmethod
    def of(cls, links: Iterable[Link]) -> LinkTable:
        """A table of ``links`` (a table is returned as it is).

        Examples
        --------
        >>> LinkTable.of([Link(a=0, b=1, bandwidth=2.0, kind="nv")])[0].kind
        'nv'
        """
        if isinstance(links, LinkTable):
            return links
        items = list(links)
        for x in items:
            if not isinstance(x, Link):
                raise UsageError(f"links: expected Link objects, got {type(x).__name__}")
        labels: dict[str, int] = {}
        kinds = [labels.setdefault(x.kind, len(labels)) for x in items]
        return cls([x.a for x in items], [x.b for x in items], [x.bandwidth for x in items],
                   [x.latency for x in items], kind=kinds, labels=tuple(labels) or ("",))

    def _make(self, k: int) -> Link:
        return Link(a=int(self.a[k]), b=int(self.b[k]), bandwidth=float(self.bandwidth[k]),
                    latency=float(self.latency[k]), kind=self.labels[int(self.kind[k])])

    def __len__(self) -> int:
        return int(self.a.size)

    @overload
    def __getitem__(self, k: int) -> Link: ...

    @overload
    def __getitem__(self, k: slice) -> LinkTable: ...

    def __getitem__(self, k: int | slice) -> Link | LinkTable:
        if isinstance(k, slice):
            return LinkTable(self.a[k], self.b[k], self.bandwidth[k], self.latency[k],
                             kind=self.kind[k], labels=self.labels)
        m = len(self)
        i = k.__index__()
        if not -m <= i < m:
            raise IndexError("link index out of range")
        return self._make(i % m)

    def __iter__(self) -> Iterator[Link]:
        for k in range(len(self)):
            yield self._make(k)

    def __eq__(self, other: object) -> bool:
        """Equal to another table or sequence of the same links in the same order."""
        if isinstance(other, LinkTable):
            return (len(self) == len(other) and bool(np.array_equal(self.a, other.a))
                    and bool(np.array_equal(self.b, other.b))
                    and bool(np.array_equal(self.bandwidth, other.bandwidth))
                    and bool(np.array_equal(self.latency, other.latency))
                    and [self.labels[i] for i in self.kind.tolist()]
                    == [other.labels[i] for i in other.kind.tolist()])
        if isinstance(other, (tuple, list)):
            return len(self) == len(other) and all(x == y for x, y in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable-looking sequence: not hashable

    def __repr__(self) -> str:
        return f"LinkTable({len(self):,} links)"

    def max_end(self) -> int:
        """The largest device index a link names (-1 without links)."""
        return -1 if not len(self) else int(max(self.a.max(), self.b.max()))
