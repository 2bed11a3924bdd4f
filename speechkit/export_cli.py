"""The command line of both tasks' exports (`python -m cskws_jax.export`, `python -m
multiqt_jax.export`; `stj-export` picks the task):

    PROG BUNDLE OUT_DIR [--block-outputs 5] [--platforms cpu,cuda]

`main` exports the bundle folder with the task's `export_bundle` into OUT_DIR
(`speechkit.export.export_folder`) and prints each file written. Exit status: 0
written; 2 a bad bundle or bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from speechkit import compilation, onnx_export
from speechkit.export import export_folder
from speechkit.export_format import MANIFEST, SUFFIX

PLATFORMS = ("cpu", "cuda", "rocm", "tpu")  # what jax.export lowers for
MAX_BLOCK_OUTPUTS = 6000  # a minute of 10 ms outputs: longer is no longer a stream


def _platforms(text: str) -> list[str]:
    """argparse type of --platforms: known, distinct platform names."""
    names = text.split(",")
    unknown = [name for name in names if name not in PLATFORMS]
    if unknown or len(set(names)) != len(names) or not text:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected distinct names of {', '.join(PLATFORMS)}, comma-separated"
        )
    return names


def _block_outputs(text: str) -> int:
    """argparse type of --block-outputs: an integer in [1, MAX_BLOCK_OUTPUTS]."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_BLOCK_OUTPUTS:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected an integer in [1, {MAX_BLOCK_OUTPUTS}]"
        )
    return value


def main(
    argv,
    *,
    prog: str,
    what: str,
    export_bundle: Callable[..., tuple[dict, dict, dict]],
    default_block_outputs: int = 5,
) -> int:
    """The command line `prog BUNDLE OUT_DIR [--block-outputs N] [--platforms cpu,cuda]`
    of a task's export: `export_bundle(bundle, block_outputs, platforms)` ->
    ({name: module}, export.json payload, {name: ONNX module}), written with
    `write_folder`. `what` names
    the bundle's model in the help. Returns the exit status (2: a bad bundle)."""
    parse = argparse.ArgumentParser(
        prog=prog,
        description=f"Export {what} bundle's offline forward and streaming step as serialized "
        f"StableHLO (forward{SUFFIX}, step{SUFFIX}) with {MANIFEST} (labels, front end, "
        "decoding, block size): a folder a streaming client runs without the bundle; the "
        "same modules and the front end as ONNX (onnxruntime: --backend onnx).",
        epilog=f"Example: {prog} outputs/reproduce/cskws/afkws/bundle exported/ "
        "(stj-export BUNDLE OUT_DIR picks the task). Exit status: 0 written; 2 a bad bundle "
        "or bad arguments.",
    )
    parse.add_argument("bundle", help="bundle folder")
    parse.add_argument("out_dir", help=f"folder for the modules and {MANIFEST}")
    parse.add_argument(
        "--block-outputs",
        type=_block_outputs,
        default=default_block_outputs,
        help=f"output frames per step (default {default_block_outputs})",
    )
    parse.add_argument(
        "--platforms",
        type=_platforms,
        default=None,
        help=f"comma-separated, of {', '.join(PLATFORMS)} (default: this machine's)",
    )
    args = parse.parse_args(argv)
    platforms = args.platforms
    if Path(args.out_dir).exists() and not Path(args.out_dir).is_dir():
        print(f"error: {args.out_dir}: exists and is not a folder", file=sys.stderr)
        return 2
    compilation.enable_cache()
    try:
        paths, (modules, payload, onnx_modules) = export_folder(
            export_bundle, args.bundle, args.out_dir, args.block_outputs, platforms
        )
    except ValueError as err:  # BundleError included
        print(f"error: {err}", file=sys.stderr)
        return 2
    except NotImplementedError as err:  # a primitive the ONNX lowering does not know
        print(f"error: ONNX export: {err}", file=sys.stderr)
        return 2
    for path in paths:
        if path.suffix == SUFFIX:
            exported = modules[path.stem]
            print(f"{path}: {len(exported.in_avals)} inputs -> {len(exported.out_avals)} outputs")
        elif path.suffix == onnx_export.SUFFIX:
            graph = onnx_modules[path.stem].graph
            print(f"{path}: {len(graph.input)} inputs -> {len(graph.output)} outputs (ONNX)")
        else:
            print(f"{path}: {payload['task']}, {len(payload['labels'])} labels")
    return 0
