"""What every self-contained HTML page of dnnpart shares: figures as ``data:`` PNGs, escaped
tables, one style sheet, the Gantt of a simulator's timeline (lazy matplotlib; no network).

Examples
--------
>>> html_table(("a", "b"), [("<1>", "2")])
'<table><tr><th>a</th><th>b</th></tr><tr><td>&lt;1&gt;</td><td>2</td></tr></table>'
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["STYLE", "gantt_png", "html_page", "html_table", "png"]

#: The pages' style sheet (inline: a page fetches nothing).
STYLE = ("body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}"
         "th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:13px}"
         "th{background:#f3f3f3}img{max-width:100%}")


def png(fig: Any) -> str:
    """A matplotlib figure as a ``data:image/png`` URI."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def html_table(head: Sequence[str], rows: Sequence[Sequence[str]], *, cls: str = "") -> str:
    """A table, every cell escaped (file text never becomes markup)."""
    attr = f' class="{cls}"' if cls else ""
    return (f"<table{attr}><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
            + "</table>")


def html_page(title: str, body: str, *, style: str = "") -> str:
    """The whole page: ``title`` (escaped) as its title and heading, ``body`` as given."""
    t = html.escape(title)
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{t}</title>"
            f"<style>{STYLE}{style}</style></head><body><h1>{t}</h1>{body}</body></html>")


def gantt_png(plt: Any, tl: Any, *, title: str, phases: bool) -> str:
    """A Gantt of a :class:`~dnnpart.simulate.timeline.Timeline` (milliseconds) as a PNG URI:
    with ``phases`` (a pipeline), forward ``F...`` blue and backward ``B...`` orange; else
    compute blue; anything else (transfers, reductions) grey."""
    colour = ["#F58518" if phases and str(w).startswith("B") else
              "#4C78A8" if (phases and str(w).startswith("F")) or k == "compute" else
              "#999999" for w, k in zip(tl.what, tl.kind, strict=True)]
    fig, ax = plt.subplots(figsize=(9, 0.5 + 0.45 * len(tl.resources)))
    if len(tl.start):
        ax.barh(np.asarray(tl.resource), np.asarray(tl.end) - np.asarray(tl.start), left=tl.start,
                color=colour, edgecolor="white", height=0.8, linewidth=0.3)
    ax.set_yticks(range(len(tl.resources)), labels=list(tl.resources))
    ax.invert_yaxis()
    ax.set_xlabel("ms")
    ax.set_title(title)
    out = png(fig)
    plt.close(fig)
    return out
