"""How a section of docs/results.md is described and rendered. A `Section` is read from
one recorded source: a title, an intro, its tables (each a `Table`: column names and a
function from the source's JSON to rows of cells) and a note that ends in the source line;
`chapter` puts a "## " heading over sections. The specs are in `results_sections`."""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Callable, Iterable, Sequence

from experiments.report.markdown import header, row


def link(path: str) -> str:
    """A repository path as a link from docs/."""
    target = path[len("docs/") :] if path.startswith("docs/") else f"../{path}"
    return f"[{path}]({target})"


def source_line(source: dict) -> str:
    """A provenance entry as the line under its table."""
    return (
        f"Source: {link(source['path'])}; {source['date']}, commit `{source['commit'][:7]}`; "
        f"`{source['command']}`."
    )


def minutes(seconds: float) -> str:
    """Seconds as "3 min 5 s"."""
    whole, rest = divmod(round(seconds), 60)
    return f"{whole} min {rest} s"


def milliseconds(seconds: float) -> str:
    """Seconds as "12.5 ms"."""
    return f"{seconds * 1000:.1f} ms"


class _Templates(string.Formatter):
    """str.format with two more format specs: `minutes` and `ms`, for seconds."""

    def format_field(self, value, spec: str) -> str:
        units = {"minutes": minutes, "ms": milliseconds}
        return units[spec](value) if spec in units else format(value, spec)


@dataclasses.dataclass(frozen=True)
class Table:
    """A Markdown table: `columns` ("a | b") over a row of cells per item of `rows(d)`."""

    columns: str
    rows: Callable[[dict], Iterable[Sequence[str]]]

    def __call__(self, d) -> str:
        return "\n".join([*header(self.columns), *(row(*cells) for cells in self.rows(d))])


@dataclasses.dataclass(frozen=True)
class Section:
    """`title`, `intro`, the table (`columns`, `rows`) and any `more` tables of the source's
    JSON, and `note`, a blank line after each; nothing while `source` is not recorded. The
    texts are str.format templates of `d` (the JSON), `source` (its source line) and what
    `names(d)` adds."""

    source: str
    title: str
    intro: str = ""
    columns: str = ""
    rows: Callable[[dict], Iterable[Sequence[str]]] | None = None
    note: str = "{source}"
    names: Callable[[dict], dict] | None = None
    more: tuple[Callable[[dict], str], ...] = ()

    def __call__(self, provenance: dict, data: dict) -> list[str]:
        if self.source not in data:
            return []
        d = data[self.source]
        names = {"d": d, "source": source_line(provenance["sources"][self.source])}
        names.update(self.names(d) if self.names else {})
        fill = _Templates().vformat
        title, intro, note = (fill(text, (), names) for text in (self.title, self.intro, self.note))
        tables = ([Table(self.columns, self.rows)] if self.columns else []) + list(self.more)
        texts = [title, intro, *(table(d) for table in tables), note]
        return [line for text in texts if text for line in (text, "")]


def chapter(title: str, *sections: Callable) -> Callable[[dict, dict], list[str]]:
    """A "## title" over `sections`, left out when all of them are."""

    def lines(provenance: dict, data: dict) -> list[str]:
        body = [line for section in sections for line in section(provenance, data)]
        return [f"## {title}", "", *body] if body else []

    return lines
