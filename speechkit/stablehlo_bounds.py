"""Bounds on what a StableHLO module someone sent may do, checked before it runs.

    stablehlo_bounds.check_bounds(exported, exported.mlir_module(), "step.stablehlo")

A module is a program: a forged one could loop for ever or ask for more memory than the
machine has. `check_bounds` refuses, statically and before anything is compiled: calls
that recurse; at `REFERENCE_SIZES`, arrays over `MAX_ARRAY_BYTES` or together over
`MAX_VALUES_BYTES`; a `stablehlo.while` whose trip count cannot be read from its form;
and loops that together (nested ones multiplied) run more than `MAX_LOOP_TRIPS` times.
Each refusal is a `BundleError` naming the file, the op or array and the bound. The
bounds and what they do not promise: docs/usage.md, "Export", and docs/speechkit.md,
"stablehlo_bounds".
"""

from __future__ import annotations

import math

import jax
from jax import export as jax_export
from jax.extend import mlir as jax_mlir
from jax.extend.mlir import ir
from jax.interpreters import mlir as jax_lowering

from speechkit import bundle as bundle_lib
from speechkit import checks, onnx_export

MAX_ARRAY_BYTES = 1 << 28
"""Bytes: the largest array a StableHLO module may compute (256 MiB, 67 million float32),
at `REFERENCE_SIZES`. The default-size models' largest is 1.5 MB (a forward over a
minute of audio)."""
MAX_VALUES_BYTES = 1 << 29
"""Bytes: all the arrays a StableHLO module computes together (512 MiB), each counted
once (a loop's body once), at `REFERENCE_SIZES`: a bound on what it holds at any time.
The default-size models' forward over a minute computes about 100 MB, their step 4 MB."""
MAX_LOOP_TRIPS = 1 << 16
"""The most times the loops of a StableHLO module may run, all of them together (nested
ones multiplied), at `REFERENCE_SIZES`. The project's loops (the running mean of the
"cmn" and "pcen" normalisers) run once per input frame: 6000 for a forward over a
minute, at most 6000 for a step (a block is at most a minute,
`speechkit.checks.MAX_CONTEXT_S`); 65,536 leaves room for coarser output strides and a
few more loops."""
REFERENCE_SIZES = onnx_export.REFERENCE_SIZES
"""The symbolic sizes a module's arrays and loops are bounded at (one stream, a minute of
40 ms output frames), as for ONNX modules."""
_REPEATING_LOOP = "stablehlo.while"
_ONCE_REGIONS = frozenset({"stablehlo.case", "stablehlo.if", "func.func", "builtin.module"})
"""Ops whose regions run at most once each time the op runs; the body of any other op
with regions (reduce, sort, scatter, map, ...) runs once per element."""


def check_bounds(exported: jax_export.Exported, text: str, where) -> None:
    """Refuses (a `BundleError` naming `where`, the op or array and the bound) a module
    that could run without end or take more memory than a model needs: calls that
    recurse; an array of more than `MAX_ARRAY_BYTES`; then, at `REFERENCE_SIZES` (the
    module lowered for its first platform and its symbolic sizes refined by jax, as
    calling it does; nothing is compiled or run), arrays whose sizes are still unknown,
    arrays of more than `MAX_ARRAY_BYTES` or together more than `MAX_VALUES_BYTES` (or
    the memory available), a loop whose trip count is not a constant (`_loop_trips`), and
    loops that together run more than `MAX_LOOP_TRIPS` times. `text` is the module's
    StableHLO (`Exported.mlir_module`)."""
    with jax_lowering.make_ir_context():
        module = _parse(text, where)
        _require_no_recursion(module, where)
        _require_array_sizes(module, where, refined=False)
    refined = _refined_at_reference_sizes(exported, where)
    with jax_lowering.make_ir_context():
        module = _parse(refined, where)
        _require_array_sizes(module, where, refined=True)
        trips = _module_trips(module, where)
    if trips > MAX_LOOP_TRIPS:
        raise bundle_lib.BundleError(
            f"{where}: its stablehlo.while loops run {trips} times at {REFERENCE_SIZES}; "
            f"refused (at most {MAX_LOOP_TRIPS}, speechkit.stablehlo_bounds.MAX_LOOP_TRIPS)"
        )


def loop_trips(exported: jax_export.Exported, where) -> int:
    """How many times the loops of a module run at `REFERENCE_SIZES`, nested ones
    multiplied (`refined_loop_trips` of the module lowered and refined there); a
    `BundleError` naming `where` for a loop whose trip count cannot be read."""
    return refined_loop_trips(_refined_at_reference_sizes(exported, where), where)


def refined_loop_trips(refined: str | bytes, where) -> int:
    """How many times the loops of a refined StableHLO module (text or bytecode: one
    public function, every size known) run, nested ones multiplied, a loop's trips read
    from its form (`_loop_trips`)."""
    with jax_lowering.make_ir_context():
        return _module_trips(_parse(refined, where), where)


def _parse(text: str | bytes, where) -> ir.Module:
    """A module's StableHLO (text or bytecode) as MLIR, in the current context."""
    try:
        return ir.Module.parse(text)
    except Exception as err:  # an MLIR parse error
        raise bundle_lib.BundleError(
            f"{where}: its StableHLO cannot be parsed ({type(err).__name__}: {_first_line(err)})"
        ) from None


def _first_line(err: Exception, limit: int = 300) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:limit] if text else ""


def _functions(module: ir.Module) -> dict[str, ir.Operation]:
    """{symbol name: func.func op} of a module's top level."""
    return {
        op.attributes["sym_name"].value: op.operation
        for op in module.body.operations
        if op.operation.name == "func.func"
    }


def _operations(root: ir.Operation):
    """Every operation nested in `root`'s regions, outer before inner (iterative: a
    forged module's nesting does not reach Python's recursion limit)."""
    pending = [root]
    while pending:
        op = pending.pop()
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    yield inner.operation
                    pending.append(inner.operation)


def _callees(op: ir.Operation) -> list[str]:
    """The functions an op names (func.call's callee, a composite's decomposition, a
    custom call's called computations)."""
    names = []
    for name in op.attributes:
        value = op.attributes[name]
        for attribute in list(value) if isinstance(value, ir.ArrayAttr) else [value]:
            if isinstance(attribute, ir.FlatSymbolRefAttr):
                names.append(attribute.value)
    return names


def _require_no_recursion(module: ir.Module, where) -> None:
    """A `BundleError` when a function calls itself, directly or through others (jax's
    exports never do; inlining such calls would not end)."""
    calls = {
        name: {callee for op in _operations(function) for callee in _callees(op)}
        for name, function in _functions(module).items()
    }
    state: dict[str, str] = {}  # name -> "open" while its callees are visited, then "done"
    for start in calls:
        stack = [(start, iter(sorted(calls[start])))]
        state.setdefault(start, "open")
        while stack:
            name, pending = stack[-1]
            callee = next(pending, None)
            if callee is None:
                state[name] = "done"
                stack.pop()
            elif state.get(callee) == "open":
                raise bundle_lib.BundleError(
                    f"{where}: @{name} calls @{callee}, which calls it again (recursion); "
                    "refused (a module's calls must end)"
                )
            elif callee not in state and callee in calls:
                state[callee] = "open"
                stack.append((callee, iter(sorted(calls[callee]))))


def _require_array_sizes(module: ir.Module, where, *, refined: bool) -> None:
    """A `BundleError` for an array of more than `MAX_ARRAY_BYTES`; `refined` (every size
    known at `REFERENCE_SIZES`): also for a value that is not an array of known sizes, or
    arrays of more than `MAX_VALUES_BYTES` (or the memory available) together."""
    total = 0
    for op in _operations(module.operation):
        for value in op.results:
            nbytes = _array_bytes(value.type)
            if nbytes is None:
                if refined:
                    raise bundle_lib.BundleError(
                        f"{where}: {op.name} makes {value.type}, a value of unknown size at "
                        f"{REFERENCE_SIZES}; refused (an array of known sizes expected)"
                    )
                continue
            if nbytes > MAX_ARRAY_BYTES:
                at = f" at {REFERENCE_SIZES}" if refined else ""
                raise bundle_lib.BundleError(
                    f"{where}: {op.name} makes {value.type} ({checks.byte_text(nbytes)}){at}; "
                    f"refused (an array of at most {checks.byte_text(MAX_ARRAY_BYTES)}, "
                    "speechkit.stablehlo_bounds.MAX_ARRAY_BYTES)"
                )
            total += nbytes
    if not refined:
        return
    if total > MAX_VALUES_BYTES:
        raise bundle_lib.BundleError(
            f"{where}: its arrays take {checks.byte_text(total)} together at "
            f"{REFERENCE_SIZES}; refused (at most {checks.byte_text(MAX_VALUES_BYTES)}, "
            "speechkit.stablehlo_bounds.MAX_VALUES_BYTES)"
        )
    try:
        checks.require_memory(str(where), total, f"its arrays at {REFERENCE_SIZES}")
    except ValueError as err:
        raise bundle_lib.BundleError(str(err)) from None


def _array_bytes(value_type: ir.Type) -> int | None:
    """The bytes of an array of type `value_type` whose sizes are all known; None for any
    other type (a size not known, not an array)."""
    if not isinstance(value_type, ir.RankedTensorType) or not value_type.has_static_shape:
        return None
    element = value_type.element_type
    if isinstance(element, ir.ComplexType):
        width = 2 * getattr(element.element_type, "width", 64)
    else:
        width = getattr(element, "width", 128)  # a type of unknown width: the widest
    return math.prod(value_type.shape) * max(1, -(-width // 8))


def _refined_at_reference_sizes(exported: jax_export.Exported, where) -> bytes:
    """The module called with arguments of `REFERENCE_SIZES`, lowered for its first
    platform and shape-refined as jax does before compiling (calls inlined, every size
    known): StableHLO bytecode. Nothing is compiled or run."""
    arguments = [
        jax.ShapeDtypeStruct(
            tuple(_reference_dimension(size, where) for size in aval.shape), aval.dtype
        )
        for aval in exported.in_avals
    ]
    positional, named = jax.tree_util.tree_unflatten(exported.in_tree, arguments)
    try:
        lowered = (
            jax.jit(exported.call)
            .trace(*positional, **named)
            .lower(lowering_platforms=(exported.platforms[0],))
        )
        return jax_mlir.refine_polymorphic_shapes(
            mlir_module=jax_lowering.module_to_bytecode(lowered.compiler_ir()),
            enable_shape_assertions=True,
            validate_static_shapes=True,
            enable_shardy=jax.config.jax_use_shardy_partitioner,
        )
    except Exception as err:  # jax's checks of the shapes, a refinement that fails
        raise bundle_lib.BundleError(
            f"{where}: cannot be lowered at {REFERENCE_SIZES} ({type(err).__name__}: "
            f"{_first_line(err)})"
        ) from None


def _reference_dimension(size, where) -> int:
    """An argument's size at `REFERENCE_SIZES` (a symbolic one parsed, never evaluated)."""
    if isinstance(size, int):
        return size
    return onnx_export.reference_size(str(size), where)


def _module_trips(module: ir.Module, where) -> int:
    """How many times the loops of a refined module run in all, nested ones multiplied
    (`_function_trips` of its public function)."""
    functions = _functions(module)
    public = [
        name
        for name, function in functions.items()
        if "sym_visibility" not in function.attributes
        or function.attributes["sym_visibility"].value == "public"
    ]
    if len(public) != 1:
        raise bundle_lib.BundleError(
            f"{where}: {len(public)} public functions after lowering; expected one (main)"
        )
    return _function_trips(public[0], functions, {}, where)


def _function_trips(name: str, functions: dict, known: dict, where) -> int:
    """How many times the loops in @name (and in the functions it calls) run per call:
    each loop's trips times those of the loops around it. A loop or a call inside the
    body of an op that runs it once per element (reduce, sort, ...) is refused."""
    if name in known:
        return known[name]
    known[name] = 0  # recursion was refused before lowering: this is never read early
    total = 0
    pending = [(op.operation, 1) for op in functions[name].regions[0].blocks[0].operations]
    while pending:
        op, times = pending.pop()
        if op.name == _REPEATING_LOOP:
            times *= _loop_trips(op, where)
            total += times
        for callee in _callees(op):
            if callee in functions:
                total += times * _function_trips(callee, functions, known, where)
        inner = [
            inner.operation
            for region in op.regions
            for block in region.blocks
            for inner in block.operations
        ]
        if op.name not in _ONCE_REGIONS and op.name != _REPEATING_LOOP and inner:
            _require_no_loops(op, inner, functions, known, where)
            continue
        pending.extend((inner_op, times) for inner_op in inner)
    known[name] = total
    return total


def _require_no_loops(op: ir.Operation, inner: list, functions, known, where) -> None:
    """A `BundleError` when the body of `op` (run once per element) holds a loop, or calls
    a function that does."""
    for nested in [*inner, *(deeper for o in inner for deeper in _operations(o))]:
        calls = any(
            _function_trips(callee, functions, known, where)
            for callee in _callees(nested)
            if callee in functions
        )
        if nested.name == _REPEATING_LOOP or calls:
            raise bundle_lib.BundleError(
                f"{where}: a stablehlo.while inside {op.name}'s body, which runs once per "
                "element; refused (a module's loops run a bounded number of times)"
            )


def _loop_trips(loop: ir.Operation, where) -> int:
    """The trip count of a stablehlo.while of the form jax gives a scan or a fori_loop
    at known sizes: a counter that starts at a constant and grows by 1 each trip, while
    `counter < bound` (signed), the bound a constant or a value the loop carries
    unchanged from a constant; its condition holds nothing else. Any other loop is
    refused: whether it ends cannot be read from it."""
    refused = (
        f"{where}: a stablehlo.while whose condition is not `counter < constant` with the "
        "counter starting at a constant and growing by 1; refused (whether it ends cannot "
        "be read from the module)"
    )
    cond, body = (region.blocks[0] for region in loop.regions)
    cond_ops = [op.operation for op in cond.operations]
    if len(cond_ops) != 2 or cond_ops[0].name != "stablehlo.compare":
        raise bundle_lib.BundleError(refused)
    compare, finish = cond_ops
    attributes = compare.attributes
    if (
        list(finish.operands) != [compare.results[0]]
        or str(attributes["comparison_direction"]) != "#stablehlo<comparison_direction LT>"
        or "compare_type" not in attributes
        or str(attributes["compare_type"]) != "#stablehlo<comparison_type SIGNED>"
    ):
        raise bundle_lib.BundleError(refused)
    counter, bound = compare.operands
    if not isinstance(counter, ir.BlockArgument) or counter.owner != cond:
        raise bundle_lib.BundleError(refused)
    index = counter.arg_number
    step = list(body.operations)[-1].operands[index].owner
    if not (
        isinstance(step, ir.Operation | ir.OpView)
        and step.name == "stablehlo.add"
        and body.arguments[index] in list(step.operands)
        and 1 in [_constant(operand) for operand in step.operands]
    ):
        raise bundle_lib.BundleError(refused)
    start, limit = _constant(loop.operands[index]), _loop_constant(loop, bound)
    if start is None or limit is None:
        raise bundle_lib.BundleError(refused)
    return max(0, limit - start)


def _loop_constant(loop: ir.Operation, value: ir.Value) -> int | None:
    """The integer `value` (in the loop's condition) always is: a scalar constant, or a
    value the loop carries unchanged (its body returns its own argument) from a scalar
    constant; else None."""
    cond, body = (region.blocks[0] for region in loop.regions)
    if not isinstance(value, ir.BlockArgument) or value.owner != cond:
        return _constant(value)
    index = value.arg_number
    if list(body.operations)[-1].operands[index] != body.arguments[index]:
        return None
    return _constant(loop.operands[index])


def _constant(value: ir.Value) -> int | None:
    """The integer a scalar `stablehlo.constant` holds, else None."""
    op = value.owner
    if not isinstance(op, ir.Operation | ir.OpView) or op.name != "stablehlo.constant":
        return None
    attribute = op.attributes["value"]
    if not isinstance(attribute, ir.DenseIntElementsAttr) or not attribute.is_splat:
        return None
    if not isinstance(value.type, ir.RankedTensorType) or value.type.rank != 0:
        return None
    return attribute.get_splat_value().value


# -------------------------------------------------------------------------- folders
