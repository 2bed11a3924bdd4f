"""What the fuzz tests do to a JSON document: one value swapped for another type, a key
removed, a huge, non-finite, negative or deeply nested value, a 5000-digit integer; and
the check both fuzzers make of a reader (tests/speechkit/test_json_fuzz.py,
test_array_fuzz.py)."""

from __future__ import annotations

import json
import math
import threading

from hypothesis import strategies as st

from speechkit import errors

REPLACEMENTS = st.one_of(
    st.sampled_from(
        [None, True, "", "x" * 1000, [], {}, 0, -1, 1e300, -1e300, 10**400, 2**63, 0.5]
    ),
    st.sampled_from([math.nan, math.inf, -math.inf, [[1]], [{}], ["a", "a"]]),
    st.integers(-(10**6), 10**9),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["deep", "digits"]),
)


def paths(node, prefix=()):
    """Every (path to a value) in a JSON tree, containers included."""
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from paths(value, (*prefix, index))


def mutated(tree, path, replacement, remove: bool):
    """A copy of `tree` with the value at `path` replaced (or, in an object, removed)."""
    tree = json.loads(json.dumps(tree))
    if not path:
        return replacement
    parent = tree
    for step in path[:-1]:
        parent = parent[step]
    if remove and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = replacement
    return tree


def dumps(tree) -> str:
    """`tree` as JSON text, "deep" as a list nested far beyond what any reader should
    recurse into and "digits" as an integer beyond Python's int-from-text limit."""
    text = json.dumps(tree, allow_nan=True)
    text = text.replace('"deep"', "[" * 100_000 + "]" * 100_000)
    return text.replace('"digits"', "9" * 5000)


def draw_mutation(data, tree) -> str:
    """One mutation of `tree` drawn from `data` (hypothesis), as JSON text."""
    path = data.draw(st.sampled_from(list(paths(tree))), label="path")
    replacement = data.draw(REPLACEMENTS, label="replacement")
    remove = data.draw(st.booleans(), label="remove")
    return dumps(mutated(tree, path, replacement, remove))


def reads_or_names_the_error(read, seconds: float = 30) -> None:
    """read() in a thread (pytest-timeout owns SIGALRM): it must end within `seconds`,
    returning or raising an InvalidInput; any other exception is re-raised."""
    outcome = []

    def run():
        try:
            read()
            outcome.append(None)
        except BaseException as err:  # noqa: BLE001 - handed to the test thread
            outcome.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"no answer within {seconds} s"
    if outcome[0] is not None and not isinstance(outcome[0], errors.InvalidInput):
        raise outcome[0]
