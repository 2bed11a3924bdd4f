"""What a StableHLO module someone sent may hold, checked before anything of it runs.

    stablehlo_checks.check_module(exported, "step.stablehlo")   # or a BundleError

Loading a module runs no Python code from it, but a module can name native code: a
`stablehlo.custom_call` calls whatever the process has registered under its target name
(a Python callback's `xla_ffi_python_cpu_callback` with a made-up index reads memory it
should not), and jax checks the targets only when exporting. So `check_module` scans the
module's StableHLO text and refuses a custom call off `ALLOWED_CUSTOM_CALLS` (or one
whose target cannot be read), a host transfer, effects, disabled safety checks, a vjp,
more than one device or shardings; then it bounds the module's loops and arrays
(`speechkit.stablehlo_bounds`). Each refusal is a `BundleError` naming the file and what
it found. The export folders' readers call it (`speechkit.export_read`).
"""

from __future__ import annotations

import re

from jax import export as jax_export

from speechkit import bundle as bundle_lib
from speechkit import stablehlo_bounds

ALLOWED_CUSTOM_CALLS = frozenset({"shape_assertion"})
"""The custom-call targets a module may hold: what the project's own exports contain.
Exporting both tasks' forward and step (the tests' tiny models and the default-size
ones, every MultiQT fusion and set of modalities, AF-KWS at precision "highest" and
"default") for cpu and cuda (AF-KWS also for tpu) gives only `shape_assertion`, jax's
check of the symbolic sizes, which shape refinement consumes before XLA compiles.
tests/speechkit/test_export_hostile.py exports the test models again and checks that
this is all they hold."""
HOST_OPS = ("infeed", "outfeed", "send", "recv")
"""StableHLO ops that move data to or from the host; no export of the project has one."""
# A custom call as MLIR prints it: `stablehlo.custom_call @target(...)` (the target
# quoted when it is not a plain identifier), or in the generic form
# `"stablehlo.custom_call"(...) <{call_target_name = "target", ...}>`.
_CUSTOM_CALL = "custom_call"
_PRETTY_CALL = re.compile(r'custom_call\s+@(?:"((?:[^"\\]|\\.)*)"|([\w.$-]+))')
_GENERIC_CALL = re.compile(r'custom_call"')
_TARGET_ATTRIBUTE = re.compile(r'call_target_name\s*=\s*"((?:[^"\\]|\\.)*)"')
_HOST_OP = re.compile(r"\bstablehlo\.(" + "|".join(HOST_OPS) + r")\b")


def check_module(exported: jax_export.Exported, where) -> None:
    """Refuses (a `BundleError` naming `where` and what it found) a module that could do
    more than compute on its arguments: a custom call whose target is not in
    `ALLOWED_CUSTOM_CALLS` (native code called by name) or whose target cannot be read,
    a host transfer op (`HOST_OPS`), effects, disabled safety checks, a vjp (another
    module inside), more than one device, or shardings. It reads the module's StableHLO
    text (`Exported.mlir_module`); nothing is compiled or run."""
    try:
        text = exported.mlir_module()
    except Exception as err:  # an unreadable StableHLO artifact
        raise bundle_lib.BundleError(
            f"{where}: its StableHLO cannot be read ({type(err).__name__}: {err})"
        ) from None
    for target in custom_call_targets(text, where):
        if target not in ALLOWED_CUSTOM_CALLS:
            raise bundle_lib.BundleError(
                f"{where}: stablehlo.custom_call @{target}: refused, not an allowed call "
                f"target (allowed: {', '.join(sorted(ALLOWED_CUSTOM_CALLS))}); a custom call "
                "runs native code by name, so this module is not run"
            )
    host = _HOST_OP.search(text)
    if host:
        raise bundle_lib.BundleError(
            f"{where}: {host.group(0)}: refused (a host transfer; no export of this project "
            "has one)"
        )
    refused = {
        "ordered_effects": exported.ordered_effects,
        "unordered_effects": exported.unordered_effects,
        "disabled_safety_checks": exported.disabled_safety_checks,
        "in_shardings": [s for s in exported.in_shardings_hlo if s is not None],
        "out_shardings": [s for s in exported.out_shardings_hlo if s is not None],
    }
    for name, found in refused.items():
        if found:
            raise bundle_lib.BundleError(
                f"{where}: {name}: {list(found)}; refused (no export of this project has any)"
            )
    if exported.nr_devices != 1:
        raise bundle_lib.BundleError(
            f"{where}: nr_devices: {exported.nr_devices}; refused (exports run on one device)"
        )
    if exported.has_vjp():
        raise bundle_lib.BundleError(
            f"{where}: holds a vjp module; refused (exports have none; it would run unchecked)"
        )
    stablehlo_bounds.check_bounds(exported, text, where)


def custom_call_targets(text: str, where) -> list[str]:
    """The target of every custom call in a module's StableHLO text, in order (generic
    form ones after the pretty ones); a `BundleError` naming `where` when a mention of
    `custom_call` is not a call whose target can be read (so that no form of one slips
    through unread)."""
    pretty = [quoted or plain for quoted, plain in _PRETTY_CALL.findall(text)]
    generic = len(_GENERIC_CALL.findall(text))
    named = _TARGET_ATTRIBUTE.findall(text)
    rest = _TARGET_ATTRIBUTE.sub("", _GENERIC_CALL.sub("", _PRETTY_CALL.sub("", text)))
    if _CUSTOM_CALL in rest or len(named) < generic:
        raise bundle_lib.BundleError(
            f"{where}: a custom_call whose target cannot be read; refused (a custom call "
            "runs native code by name)"
        )
    return pretty + named
