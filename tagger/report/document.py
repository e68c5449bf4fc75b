"""The report's document: headings, paragraphs, lists, code, tables and figures written as Markdown
(``report.md``, figures linked), and the same Markdown rendered to one self-contained HTML page by
markdown-it-py (``report.html``, figures embedded as base64 PNG so the file stands alone)."""
from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from typing import Any, Callable, Sequence

from markdown_it import MarkdownIt

_NUMBER = re.compile(r"^[-+]?[\d,.]+( ± [\d,.]+)?$|^–$")


class Doc:
    """Blocks appended by the report sections, rendered by :meth:`markdown` and :meth:`html`."""

    def __init__(self) -> None:
        self.blocks: list[tuple[str, Any]] = []

    def h(self, level: int, text: str) -> None:
        self.blocks.append(("h", (level, text)))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def bullets(self, items: Sequence[str]) -> None:
        if items:
            self.blocks.append(("ul", list(items)))

    def code(self, text: str) -> None:
        self.blocks.append(("code", text))

    def table(self, header: Sequence[str], rows: Sequence[Sequence[Any]], caption: str) -> None:
        self.blocks.append(("table", ([str(h) for h in header], [[str(c) for c in r] for r in rows], caption)))

    def figure(self, path: Path, caption: str) -> None:
        self.blocks.append(("figure", (path, caption)))

    def markdown(self, image_src: Callable[[Path], str] = lambda path: path.name) -> str:
        """The document as Markdown; ``image_src`` gives each figure's link (default: its file name)."""
        out = []
        for kind, v in self.blocks:
            if kind == "h":
                out.append(f"{'#' * v[0]} {v[1]}")
            elif kind == "p":
                out.append(v)
            elif kind == "ul":
                out.append("\n".join(f"- {i}" for i in v))
            elif kind == "code":
                out.append(f"```\n{v}\n```")
            elif kind == "table":
                header, rows, caption = v
                cell = lambda c: c.replace("|", "\\|").replace("\n", " ")  # noqa: E731
                lines = [f"*{caption}*", "", "| " + " | ".join(map(cell, header)) + " |",
                         "|" + "|".join("---" for _ in header) + "|"]
                lines += ["| " + " | ".join(map(cell, r)) + " |" for r in rows]
                out.append("\n".join(lines))
            elif kind == "figure":
                path, caption = v
                out.append(f"![{path.stem}]({image_src(path)})\n\n*{caption}*")
        return "\n\n".join(out) + "\n"

    def html(self, title: str) -> str:
        """One HTML page rendered from :meth:`markdown`, with every figure inlined as a data URI."""
        body = _markdown_renderer().render(self.markdown(image_src=_data_uri))
        return _HTML.format(title=html.escape(title), body=body)


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


def _markdown_renderer() -> MarkdownIt:
    """CommonMark plus tables; raw HTML in the text is escaped. Numeric cells (``92.10 ± 0.31``) get
    class ``num`` so that they never wrap."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")

    def td_open(renderer, tokens, idx, options, env):
        if _NUMBER.match(tokens[idx + 1].content.strip()):
            tokens[idx].attrJoin("class", "num")
        return renderer.renderToken(tokens, idx, options, env)

    md.add_render_rule("td_open", td_open)
    return md


_HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; color: #222; }}
table {{ border-collapse: collapse; margin: 0 0 1em 0; font-size: 0.9em; display: block; overflow-x: auto; }}
p:has(+ table) {{ font-size: 0.9em; margin: 1.2em 0 0.3em 0; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }}
td.num {{ white-space: nowrap; }}
td code {{ overflow-wrap: break-word; }}
th {{ background: #f3f3f3; }}
tbody tr:nth-child(even) {{ background: #fafafa; }}
img {{ max-width: 100%; border: 1px solid #ddd; margin-top: 1.5em; }}
p:has(> img) + p {{ font-size: 0.9em; margin-top: 0.4em; }}
code {{ background: #f3f3f3; padding: 0 0.2em; }}
pre {{ background: #f3f3f3; padding: 0.6em; overflow-x: auto; }}
</style></head>
<body>
{body}
</body></html>
"""
