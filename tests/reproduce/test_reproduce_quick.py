"""``reproduce tarnawski2020 --quick`` on two small workloads (the full run is documented)."""

from __future__ import annotations

import argparse
import csv
from pathlib import Path
from typing import Any

import pytest

from dnnpart.cli.reproduce_cmd import add_parser, cmd_reproduce
from dnnpart.reproduce import reproduce_tarnawski2020
from dnnpart.reproduce.records import Cell
from dnnpart.reproduce.tables import Row, Table, to_csv, to_markdown

SMALL = ["layer-bert24-inference", "layer-bert24-training"]
# methods kept for speed; the IP columns are left out of --quick
METHODS = ["dp", "dpl", "expert", "local-search", "pipedream", "metis", "scotch", "greedy",
           "maxload-dp"]


@pytest.fixture(scope="module")
def report(workloads_dir: Path, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    out = tmp_path_factory.mktemp("repro")
    lines: list[str] = []
    result = reproduce_tarnawski2020(workloads_dir, out, quick=True, only=SMALL, methods=METHODS,
                                     figure=False, notify=lines.append)
    return result, out, lines


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_writes_every_table(report: Any) -> None:
    result, out, lines = report
    assert result.workloads == SMALL
    for name in ("table1", "table2", "table3", "table4", "report"):
        assert (out / f"{name}.md").is_file()
    assert any("pipedream" in line for line in lines)  # progress per workload and method


def test_table1_sits_beside_the_published_figures(report: Any) -> None:
    _, out, _ = report
    rows = {(r["workload"], r["column"]): r for r in _rows(out / "table1.csv")}
    for workload, dp in (("layer-bert24-inference", 17.79), ("layer-bert24-training", 41.75)):
        for column in ("dp", "pipedream"):
            row = rows[(workload, column)]
            assert float(row["published"]) == dp
            assert abs(float(row["relative_difference"])) < 0.01
        assert rows[(workload, "expert")]["ours"]
    markdown = (out / "table1.md").read_text()
    assert "17.79 · paper 17.79" in markdown


def test_table2_is_relative_to_the_dp(report: Any) -> None:
    _, out, _ = report
    rows = {(r["workload"], r["column"]): r for r in _rows(out / "table2.csv")}
    assert float(rows[("layer-bert24-inference", "dp")]["ours"]) == pytest.approx(1.0)
    expert = rows[("layer-bert24-inference", "expert")]
    assert float(expert["ours"]) == pytest.approx(17.79 / 20.08, rel=0.01)


def test_table4_covers_the_inference_graph_only(report: Any) -> None:
    _, out, _ = report
    rows = _rows(out / "table4.csv")
    assert {r["workload"] for r in rows} == {"layer-bert24-inference"}
    greedy = next(r for r in rows if r["column"] == "greedy")
    assert float(greedy["ours"]) > 0 and greedy["note"] == ""


def test_a_missing_method_is_recorded_not_fatal(tmp_path: Path, workloads_dir: Path) -> None:
    result = reproduce_tarnawski2020(workloads_dir, tmp_path, only=["layer-bert24-inference"],
                                     methods=["ipn"], figure=False, time_limit=5)
    cell = result.tables["table1"].cell("layer-bert24-inference", "ipn")
    assert cell is not None
    assert cell.value is not None or cell.note  # a figure, or the reason there is none


def test_cli_command(tmp_path: Path, workloads_dir: Path) -> None:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["reproduce", "tarnawski2020", "--workloads", str(workloads_dir),
                              "--out", str(tmp_path), "--quick", "--only", "layer-bert24-inference",
                              "--methods", "dp", "pipedream", "--no-figure"])

    class Out:
        def __init__(self) -> None:
            self.notes: list[str] = []
            self.printed: list[str] = []

        def note(self, message: str) -> None:
            self.notes.append(message)

        def print(self, *items: Any) -> None:
            self.printed.append(" ".join(map(str, items)))

    out = Out()
    assert cmd_reproduce(args, out) == 0
    assert (tmp_path / "table1.csv").is_file()
    assert any(p.endswith("report.md") for p in out.printed)


def test_cli_without_workloads_is_a_usage_error(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["reproduce", "tarnawski2020", "--workloads", str(tmp_path)])
    with pytest.raises(ValueError, match="no paper-1 workloads"):
        cmd_reproduce(args, object())


def test_markdown_cell_says_why_a_value_is_missing() -> None:
    t = Table(name="t", title="T", columns={"a": "A"})
    t.add(Row(key="w", label="W", group="g"), "a", Cell(value=None, note="not available"), 3.0)
    assert "— (not available) · paper 3.00" in to_markdown(t)
    assert to_csv(t).splitlines()[1].endswith("not available")


def test_unknown_methods_are_refused_before_any_run(tmp_path: Path) -> None:
    # issue 13: a typo used to give empty tables and exit 0
    with pytest.raises(ValueError, match="--methods: unknown column or method 'no-such-method'"):
        reproduce_tarnawski2020(tmp_path, tmp_path / "out", methods=["dp", "no-such-method"],
                                figure=False)
