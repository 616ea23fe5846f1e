"""Round trips and malformed files for the native graph format (dnnpart.io.native)."""

from __future__ import annotations

import math
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dnnpart.errors import FormatError
from dnnpart.graph import Graph, GraphBuilder, build_graph
from dnnpart.io import native
from dnnpart.io.native import FORMAT_VERSION, load_graph, save_graph
from dnnpart.testing import random_problem

ARRAY_FIELDS = (
    "succ_ptr", "succ_idx", "pred_ptr", "pred_idx", "pred_edge", "edge_cost", "edge_bytes",
    "compute_time", "memory_bytes", "is_backward", "color_class", "layer_id", "original_ids",
)


def random_dag(seed: int = 0, n: int = 60, *, with_op_types: bool = True) -> Graph:
    """Random DAG given in shuffled order with sparse ids, unicode names and unknown bytes."""
    rng = np.random.default_rng(seed)
    ids = rng.choice(10 * n, size=n, replace=False)
    pairs = {(int(u), int(v)) for u, v in rng.integers(0, n, size=(4 * n, 2)) if u < v}
    src, dst = np.array(sorted(pairs)).T
    order = rng.permutation(len(src))
    times = rng.random((n, 2)) * 5
    times[rng.random(n) < 0.2, 1] = math.inf
    edge_bytes = rng.random(len(src)) * 1e6
    edge_bytes[rng.random(len(src)) < 0.3] = math.nan
    names = [f"op{i}" for i in range(n)]
    names[1], names[2], names[3] = "conv/ß→γ", "", "lone\udc80surrogate"
    return build_graph(
        ids, ids[src[order]], ids[dst[order]],
        compute_time=times, edge_cost=rng.random(len(src)), edge_bytes=edge_bytes[order],
        memory_bytes=rng.random(n) * 1e9, layer_id=rng.integers(-1, 5, n), names=names,
        op_types=[("Conv", "Relu", "MatMul")[i % 3] for i in range(n)] if with_op_types else None,
    )


def assert_same_graph(a: Graph, b: Graph) -> None:
    for field in ARRAY_FIELDS:
        x, y = getattr(a, field), getattr(b, field)
        assert x.dtype == y.dtype, field
        np.testing.assert_array_equal(x, y, err_msg=field)
    assert a.names == b.names
    assert a.op_types == b.op_types
    assert a.device_kinds == b.device_kinds


def rewrite(path: Path, **changes: Any) -> None:
    """Rewrite an archive with members replaced (a value) or removed (``None``)."""
    with np.load(path, allow_pickle=False) as archive:
        members = {name: archive[name] for name in archive.files}
    for name, value in changes.items():
        if value is None:
            members.pop(name, None)
        else:
            members[name] = value
    with open(path, "wb") as fh:
        np.savez(fh, **members)


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    path = tmp_path / "graph.dnnpart"
    save_graph(random_dag(), path)
    return path


# -- round trips --------------------------------------------------------------------------


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("with_op_types", [True, False])
def test_round_trip_is_exact(tmp_path: Path, compress: bool, with_op_types: bool) -> None:
    graph = random_dag(seed=3, with_op_types=with_op_types)
    path = tmp_path / "g.bin"
    save_graph(graph, path, compress=compress)
    loaded = load_graph(path)
    assert_same_graph(graph, loaded)
    assert (loaded.op_types is None) == (not with_op_types)
    assert loaded.names[3] == "lone\udc80surrogate"


def test_training_graph_with_colour_classes(tmp_path: Path) -> None:
    graph = random_problem(np.random.default_rng(5), n_nodes=12, training=True).graph
    assert graph.is_training and (graph.color_class >= 0).any()
    save_graph(graph, tmp_path / "train.dnnpart")
    loaded = load_graph(tmp_path / "train.dnnpart")
    assert_same_graph(graph, loaded)
    assert loaded.is_training


def test_other_device_kinds_and_edgeless_graph(tmp_path: Path) -> None:
    graph = build_graph([7], [], [], compute_time=[[1.0, 2.0, math.inf]], edge_cost=[],
                        device_kinds=("cpu", "gpu", "tpu"))
    save_graph(graph, tmp_path / "one")
    loaded = load_graph(tmp_path / "one")
    assert_same_graph(graph, loaded)
    assert loaded.n_edges == 0 and loaded.device_kinds == ("cpu", "gpu", "tpu")


def test_builder_graph_round_trips(tmp_path: Path) -> None:
    b = GraphBuilder()
    b.add_node(1, cpu_time=4.0, acc_time=1.0, name="conv1", op_type="Conv")
    b.add_node(2, cpu_time=4.0, name="relu1", op_type="Relu", is_backward=True, color_class=0)
    b.add_edge(1, 2, cost=0.25, n_bytes=1024)
    graph = b.build()
    save_graph(graph, tmp_path / "b")
    assert_same_graph(graph, load_graph(tmp_path / "b"))


def test_written_as_given_without_leftovers(tmp_path: Path) -> None:
    path = tmp_path / "plain-name"
    save_graph(random_dag(), path)
    save_graph(random_dag(seed=1), path)  # overwrite in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain-name"]
    assert_same_graph(random_dag(seed=1), load_graph(path))


def test_failed_write_keeps_old_file_and_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "g"
    save_graph(random_dag(), path)
    before = path.read_bytes()

    def broken_savez(fh: Any, **arrays: Any) -> None:
        fh.write(b"PK\x03\x04 half an archive")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", broken_savez)
    with pytest.raises(OSError, match="disk full"):
        save_graph(random_dag(seed=2), path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g"]


def test_file_needs_no_pickle(saved: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with np.load(saved, allow_pickle=False) as archive:
        assert all(archive[name].dtype != object for name in archive.files)
    seen: list[Any] = []
    real_load = np.load

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs.get("allow_pickle"))
        return real_load(*args, **kwargs)

    monkeypatch.setattr(np, "load", spy)
    load_graph(saved)
    assert seen == [False]


# -- malformed files ----------------------------------------------------------------------


def test_missing_file_is_a_format_error_naming_it(tmp_path: Path) -> None:
    # issue 13: one clean error naming the path (was FileNotFoundError, a traceback in the CLI)
    with pytest.raises(FormatError, match="nope: no such file"):
        load_graph(tmp_path / "nope")


@pytest.mark.parametrize(
    "content",
    [b"", b"not a zip at all\n" * 10, b'{"nodes": []}', bytes(range(256)) * 4],
    ids=["empty", "text", "json", "binary"],
)
def test_corrupt_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.dnnpart"
    path.write_bytes(content)
    with pytest.raises(FormatError, match=r"bad\.dnnpart: not a dnnpart graph file") as info:
        load_graph(path)
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_single_npy_file(tmp_path: Path) -> None:
    path = tmp_path / "a.npy"
    np.save(path, np.arange(3))
    with pytest.raises(FormatError, match=r"a\.npy: not a dnnpart graph file \(a single"):
        load_graph(path)


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.9, 0.999])
def test_truncated_file(saved: Path, keep: float) -> None:
    data = saved.read_bytes()
    saved.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(FormatError, match=r"graph\.dnnpart"):
        load_graph(saved)


@pytest.mark.parametrize("compress", [False, True])
def test_damaged_member_bytes(tmp_path: Path, compress: bool) -> None:
    path = tmp_path / "g"
    save_graph(random_dag(n=400), path, compress=compress)
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("edge_cost.npy")
    data = bytearray(path.read_bytes())
    middle = info.header_offset + 100 + info.compress_size // 2
    data[middle : middle + 8] = bytes(8 * [0xAB])
    path.write_bytes(bytes(data))
    with pytest.raises(FormatError, match=r"g: edge_cost: unreadable"):
        load_graph(path)


def test_pickled_member_is_refused(saved: Path) -> None:
    rewrite(saved, names_blob=np.array([{"evil": 1}], dtype=object))
    with pytest.raises(FormatError, match="names_blob: unreadable"):
        load_graph(saved)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"format": None}, "format: missing marker"),
        ({"format": np.array("other.format")}, "format: expected 'dnnpart.graph', got 'other"),
        ({"format": np.array(7)}, "format: expected 'dnnpart.graph', got 7"),
        ({"version": None}, "version: missing"),
        (
            {"version": np.array(FORMAT_VERSION + 1)},
            r"version: this dnnpart reads versions 1, 2, got 3 \(written by a newer",
        ),
        ({"version": np.array(0)}, "version: this dnnpart reads versions 1, 2, got 0$"),
        ({"version": np.array("1")}, "version: expected an integer, got '1'"),
    ],
)
def test_wrong_markers(saved: Path, changes: dict[str, Any], message: str) -> None:
    rewrite(saved, **changes)
    with pytest.raises(FormatError, match=f"graph.dnnpart: {message}"):
        load_graph(saved)


@pytest.mark.parametrize("member", [*native._REQUIRED, "device_kinds"])
def test_missing_array(saved: Path, member: str) -> None:
    rewrite(saved, **{member: None})
    with pytest.raises(FormatError, match=f"graph.dnnpart: missing array.s. {member}"):
        load_graph(saved)


def test_op_types_halves_come_together(saved: Path) -> None:
    rewrite(saved, op_types_offsets=None)
    with pytest.raises(FormatError, match="op_types_offsets: missing"):
        load_graph(saved)


@pytest.mark.parametrize(
    ("member", "transform", "message"),
    [
        ("edge_cost", lambda a: a[:-1], r"edge_cost: expected shape \(\d+,\) \(m\), got"),
        ("memory_bytes", lambda a: a.reshape(1, -1), r"memory_bytes: expected shape \(60,\) \(n\)"),
        ("compute_time", lambda a: a[:, :1], r"compute_time: expected shape \(60, 2\) \(n, k\)"),
        ("names_offsets", lambda a: a[:-1], r"names_offsets: expected shape \(61,\)"),
        ("succ_idx", lambda a: a.astype(np.int64), "succ_idx: expected dtype int32, got int64"),
        ("is_backward", lambda a: a.astype(np.float64), "is_backward: expected dtype bool"),
        ("device_kinds", lambda a: np.arange(2), "device_kinds: expected a 1-d string array"),
        ("succ_ptr", lambda a: np.zeros((), np.int64), r"succ_ptr: expected shape \(n\+1,\)"),
    ],
)
def test_wrong_dtype_or_shape(saved: Path, member: str, transform: Any, message: str) -> None:
    with np.load(saved) as archive:
        value = transform(archive[member])
    rewrite(saved, **{member: value})
    with pytest.raises(FormatError, match=f"graph.dnnpart: {message}"):
        load_graph(saved)


def test_byte_swapped_arrays_load(saved: Path) -> None:
    with np.load(saved) as archive:
        swapped = archive["edge_cost"].astype(archive["edge_cost"].dtype.newbyteorder())
    rewrite(saved, edge_cost=swapped)
    assert_same_graph(random_dag(), load_graph(saved))


def _edit(path: Path, member: str, edit: Any) -> None:
    with np.load(path) as archive:
        value = archive[member].copy()
    edit(value)
    rewrite(path, **{member: value})


@pytest.mark.parametrize(
    ("member", "edit", "message"),
    [
        ("succ_ptr", lambda a: a.__setitem__(-1, a[-1] - 1), "succ_ptr: must start at 0 and end"),
        ("succ_ptr", lambda a: a.__setitem__(5, a[7] + 1), r"succ_ptr\[\d+\]: offsets must not"),
        ("succ_idx", lambda a: a.__setitem__(0, 10_000), r"succ_idx\[0\]: node 10000 is out of"),
        ("succ_idx", lambda a: a.__setitem__(0, -1), r"succ_idx\[0\]: node -1 is out of range"),
        ("succ_idx", lambda a: a.__setitem__(slice(0, 2), a[1::-1]), r"succ_idx\[1\]: targets"),
        ("succ_idx", lambda a: a.__setitem__(1, a[0]), r"succ_idx\[1\]: targets of a"),
        ("names_offsets", lambda a: a.__setitem__(-1, a[-1] + 3), "names_offsets: must rise"),
        ("names_blob", lambda a: a.__setitem__(0, 0xFF), "names_blob: invalid UTF-8 at byte 0"),
        ("edge_cost", lambda a: a.__setitem__(0, -1.0), "invalid graph: edge_cost must be"),
        ("compute_time", lambda a: a.__setitem__((0, 0), np.nan), "invalid graph: compute_time"),
    ],
)
def test_inconsistent_contents(saved: Path, member: str, edit: Any, message: str) -> None:
    _edit(saved, member, edit)
    with pytest.raises(FormatError, match=f"graph.dnnpart: {message}"):
        load_graph(saved)


def test_backward_edge_is_a_format_error(saved: Path) -> None:
    # Point node 0's first edge back at itself: sorted, in range, but not topological.
    graph = load_graph(saved)
    assert graph.succ_idx[0] > 0
    _edit(saved, "succ_idx", lambda a: a.__setitem__(0, 0))
    with pytest.raises(FormatError, match=r"graph\.dnnpart: invalid graph: edges must point"):
        load_graph(saved)
