"""Self-contained HTML pages: one file, our own CSS and JS embedded, data as JSON, no network.

The pages are drawn by the scripts in assets/ from a JSON blob that the Python side computes
(the figures come from gilprof.analysis, never recomputed in JS); the HTML around them already
holds the answer as text, so a page read without scripts still says what matters.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any
from xml.sax.saxutils import escape

ASSETS = ("page.css", "flame.js", "page.js")


def asset(name: str) -> str:
    """A JS/CSS file shipped with this package (our own code, embedded at render time)."""
    return (resources.files("gilprof.renderers.html") / "assets" / name).read_text("utf-8")


def script_json(data: Any) -> str:
    """JSON safe inside <script>: no `<` at all, so nothing in it can close or open an element."""
    return json.dumps(data, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


def esc(text: object) -> str:
    return escape(str(text), {'"': "&quot;"})


def pct(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{100 * value:.{digits}f}%"


def page(title: str, body: str, data: dict[str, Any]) -> str:
    """The whole document: `body` is trusted HTML built with esc(); `data` goes to the scripts."""
    css = asset("page.css")
    js = asset("flame.js") + "\n" + asset("page.js")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # Nothing may be fetched at view time: the policy makes a stray URL fail loudly.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
        f"<title>{esc(title)}</title><style>{css}</style></head><body>\n{body}\n"
        f'<div id="tooltip" hidden></div>'
        f'<script type="application/json" id="page-data">{script_json(data)}</script>'
        f"<script>{js}\ngilprofPage();</script></body></html>\n"
    )


def table(headers: list[str], rows: list[list[str]], cls: str = "") -> str:
    """An HTML table; cells are trusted HTML (escape with esc())."""
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
