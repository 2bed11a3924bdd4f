"""Detection metrics of CS-KWS: 1-D IoU, AP / mAP over IoU thresholds, FRR at an FA budget.

Entry points: `iou_1d`, `detection_scores` (AP per IoU threshold and class, mAP, AP@0.05,
AP@0.75, FRR@k) and `pooled_matches` (every detection's outcome in pooled score order,
for curves). Inputs are padded dicts, times in seconds: detections with start, end,
score, label and valid `[B, D]`; ground truth the same without score, `[B, G]`.

    scores = detection_scores(detections, ground_truth, num_classes=20, total_hours=1.5)
    scores["mAP"], scores["FRR@5"]

Specification, in docs/metrics.md: the definitions in "Detection", how the matching runs
inside `jit` in "How detection is computed", float32 rounding in "Precision and
backends". Labels are not range-checked inside `jit`: `metrics.checked` does that.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from metrics import _validate

DEFAULT_IOU_THRESHOLDS: tuple[float, ...] = tuple(round(0.05 * k, 2) for k in range(1, 20))
DETECTION_FIELDS = ("start", "end", "score", "label", "valid")
GROUND_TRUTH_FIELDS = ("start", "end", "label", "valid")
_FIELD_KINDS = {"start": "float", "end": "float", "score": "float", "label": "int", "valid": "bool"}


def iou_1d(start_a, end_a, start_b, end_b) -> jax.Array:
    """1-D intersection over union of intervals a and b: float32, broadcast (any time unit).

    `inter = max(0, min(end_a, end_b) - max(start_a, start_b))`, `union = (end_a - start_a)
    + (end_b - start_b) - inter`, IoU = inter / union, and 0 where inter is 0 (that covers
    union <= 0, so zero-length segments have IoU 0 with everything). Where inter > 0 the
    union equals `max(end_a, end_b) - min(start_a, start_b)`, one float32 subtraction, and
    the quotient is rounded correctly on every backend (see `_rounded_ratio`).
    """
    start_a, end_a, start_b, end_b = jnp.broadcast_arrays(
        *(jnp.asarray(t, jnp.float32) for t in (start_a, end_a, start_b, end_b))
    )
    inter = jnp.minimum(end_a, end_b) - jnp.maximum(start_a, start_b)
    union = jnp.maximum(end_a, end_b) - jnp.minimum(start_a, start_b)
    return jnp.where(inter > 0, _rounded_ratio(inter, union), 0.0)


def _significand_exponent(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Of float32 x: significand int32 in [2^23, 2^24) and biased exponent int32 (both
    exact for positive normal x, whose exponent is in 1..254)."""
    bits = jax.lax.bitcast_convert_type(x, jnp.int32)
    return (bits & 0x7FFFFF) | 0x800000, bits >> 23


def _rounded_significand(num: jax.Array, den: jax.Array) -> jax.Array:
    """`num * 2^23 / den` rounded to the nearest integer: int32 in [2^23, 2^24].

    num, den: int32 with den in [2^23, 2^24) and num = s or 2 s for an s in [2^23, 2^24),
    num in [den, 2 den). A float division only estimates the result. The remainder
    `num * 2^23 - estimate * den` is exact in wrapping int32 arithmetic (the products wrap,
    but its true value is below 2^31 for any estimate within 127 of the quotient); a
    second estimate brings it within about one `den` of zero, and comparing twice the
    remainder with `den` rounds exactly. The quotient is never exactly halfway (that
    would need an odd factor above 2^24 in num), so there are no ties to break.
    """
    estimate = num.astype(jnp.float32) / den.astype(jnp.float32) * 2.0**23
    significand = estimate.astype(jnp.int32)
    remainder = (num << 23) - significand * den
    step = (remainder.astype(jnp.float32) / den.astype(jnp.float32)).astype(jnp.int32)
    significand, remainder = significand + step, remainder - step * den
    up, down = 2 * remainder > den, 2 * remainder < -den
    return significand + up.astype(jnp.int32) - down.astype(jnp.int32)


def _rounded_ratio(numerator: jax.Array, denominator: jax.Array) -> jax.Array:
    """numerator / denominator rounded to the nearest float32, the same bits on every
    backend (those of IEEE division): float32 [broadcast shape].

    XLA:GPU divides float32 with PTX `div.full`, up to 2 ulp off: an IoU of exactly 7/20
    can come out below float32(0.35). Here a float division only estimates the quotient
    and integer remainders of the significands round it. Applies to positive normal
    operands with a quotient in [2^-103, 2^127); elsewhere (zeros, subnormals, inf, NaN,
    negative values) it is the backend's division.
    """
    x, y = jnp.broadcast_arrays(
        jnp.asarray(numerator, jnp.float32), jnp.asarray(denominator, jnp.float32)
    )
    sig_x, exp_x = _significand_exponent(x)
    sig_y, exp_y = _significand_exponent(y)
    below = (sig_x < sig_y).astype(jnp.int32)  # then take 2 sig_x: the quotient is in [1, 2)
    significand = _rounded_significand(sig_x << below, sig_y)
    exponent = exp_x - exp_y - below  # unbiased exponent of the quotient
    scale_exponent = jnp.clip(exponent + 127 - 23, 1, 254)
    scale = jax.lax.bitcast_convert_type(scale_exponent << 23, jnp.float32)  # 2^(exponent-23)
    exact = significand.astype(jnp.float32) * scale  # a power-of-two scaling: exact
    # Positive normal operands have a biased exponent in 1..254 (negative ones below 0).
    normal = (exp_x >= 1) & (exp_x <= 254) & (exp_y >= 1) & (exp_y <= 254)
    in_range = (exponent >= -103) & (exponent <= 126)
    return jnp.where(normal & in_range, exact, x / y)


def _ordered_sum(values: jax.Array) -> jax.Array:
    """Sum over the last axis of float32 [..., N], one element after another from the
    first: float32 [...]. A reduction's order is the compiler's choice (the same program
    run op by op and under `jit` can differ in the last bit); a scan's is not."""
    step = lambda total, value: (total + value, None)  # noqa: E731
    zero = jnp.zeros(values.shape[:-1], values.dtype)
    return jax.lax.scan(step, zero, jnp.moveaxis(values, -1, 0))[0]


def _check_fields(name: str, fields: Mapping, expected: Sequence[str]) -> tuple[int, int]:
    if not isinstance(fields, Mapping):
        raise TypeError(f"{name}: expected a dict with fields {list(expected)}, got {type(fields)}")
    missing = [f for f in expected if f not in fields]
    if missing:
        raise KeyError(f"{name}: missing field(s) {missing}; expected {list(expected)}")
    shape = _validate.require_same_shape({f"{name}['{f}']": fields[f] for f in expected}, rank=2)
    for field in expected:
        _validate.require_dtype(f"{name}['{field}']", fields[field], _FIELD_KINDS[field])
    return shape


def _evaluated(label, valid, num_classes: int, ignore_classes: tuple[int, ...]) -> jax.Array:
    """Valid entries whose label is a class in range and not ignored; bool like `label`."""
    keep = valid & (label >= 0) & (label < num_classes)
    for ignored in ignore_classes:
        keep &= label != ignored
    return keep


def _cumulative(op, values):
    """Inclusive scan of `op` along axis 0 of values [N, ...] (or a pytree of them, `op`
    taking and giving such pytrees) by `_tree_scan`: a parallel scan, ~3x faster than
    jnp.cumsum or lax.cummax, which lower to a reduce-window, on XLA:CPU."""
    return _tree_scan(op, values)


SCAN_BLOCK_LEVELS = 2  # levels of a scan's tree done on dense columns (blocks of 4 rows)


def _tree_scan(combine, elems):
    """Inclusive scan of `combine(left, right)` along axis 0 of a pytree of [N, ...]
    arrays, with the very combinations of `jax.lax.associative_scan` (the same operands
    in the same order, so float sums come out bit for bit the same; only its -0.0 may
    come out as +0.0 there), its tree's top levels in a loop.

    Why not `associative_scan` itself: it unrolls its tree, every level's strided slices,
    pads and interleaves separate operations on arrays of another length, which XLA:CPU
    compiles one by one: with six scans of 10,240 rows, `detection_scores` took 5-10 s
    to compile on a 2-core CPU for a run of 8 ms (2.5-3 s here, running as fast).

    The tree, level l = 0, 1, ... (stride s = 2^l, groups of 2s rows): the up-sweep, levels
    upwards, sets the last row of each group to combine(its middle row, row s - 1, itself)
    (associative_scan's reduction of adjacent pairs); the down-sweep, levels downwards,
    sets each group's middle row but the first group's to combine(the previous group's
    last row, itself) (the odd elements' prefix joined to the next even element). Rows
    are padded to whole blocks of 2^SCAN_BLOCK_LEVELS first: a row only ever takes rows
    before it, so the padding changes none of the first N. The levels within a block
    work on columns of the rows reshaped into groups (`_sweep_groups`); those above it
    touch only the blocks' last rows, which `_loop_scan` scans with one loop body.
    """
    leaves, tree = jax.tree_util.tree_flatten(elems)
    num = leaves[0].shape[0]
    if num < 2:  # the scan of fewer than 2 rows is its input
        return elems
    block = 2**SCAN_BLOCK_LEVELS
    rows = -(-num // block) * block
    leaves = [jnp.pad(leaf, [(0, rows - num)] + [(0, 0)] * (leaf.ndim - 1)) for leaf in leaves]
    for level in range(SCAN_BLOCK_LEVELS):
        leaves = _sweep_groups(combine, tree, leaves, level, down=False)
    lasts = _loop_scan(combine, tree, [leaf[block - 1 :: block] for leaf in leaves])
    leaves = [
        jnp.concatenate(
            [leaf.reshape(rows // block, block, *leaf.shape[1:])[:, :-1], last[:, None]], axis=1
        ).reshape(leaf.shape)
        for leaf, last in zip(leaves, lasts, strict=True)
    ]
    for level in reversed(range(SCAN_BLOCK_LEVELS)):
        leaves = _sweep_groups(combine, tree, leaves, level, down=True)
    return tree.unflatten([leaf[:num] for leaf in leaves])


def _sweep_groups(combine, tree, leaves: list, level: int, down: bool) -> list:
    """One level of `_tree_scan`'s tree (static `level`) on leaves [R, ...], R a
    multiple of the groups' 2^(level + 1) rows: the up-sweep's or the down-sweep's
    combinations, on the middle and last columns of the rows reshaped into groups."""
    size, middle = 2 ** (level + 1), 2**level - 1
    groups = [leaf.reshape(leaf.shape[0] // size, size, *leaf.shape[1:]) for leaf in leaves]
    if down:  # middle rows take the previous group's last row (the first group keeps its)
        left = [jnp.concatenate([g[:1, -1], g[:-1, -1]]) for g in groups]
        right = [g[:, middle] for g in groups]
        at = middle
    else:  # last rows take their group's middle row
        left, right, at = [g[:, middle] for g in groups], [g[:, -1] for g in groups], size - 1
    joined = jax.tree_util.tree_leaves(combine(tree.unflatten(left), tree.unflatten(right)))
    if down:
        first = jnp.arange(groups[0].shape[0]) == 0
        joined = [
            jnp.where(first.reshape(-1, *([1] * (r.ndim - 1))), r, j)
            for j, r in zip(joined, right, strict=True)
        ]
    return [
        jnp.concatenate([g[:, :at], j[:, None], g[:, at + 1 :]], axis=1).reshape(leaf.shape)
        for g, j, leaf in zip(groups, joined, leaves, strict=True)
    ]


def _shifted(values: jax.Array, shift: jax.Array) -> jax.Array:
    """values [N, ...] moved `shift` (traced int32 in [0, N]) rows later along axis 0:
    row p holds values[p - shift] (wrapped around for p < shift)."""
    num = values.shape[0]
    twice = jnp.concatenate([values, values], axis=0)
    return jax.lax.dynamic_slice_in_dim(twice, num - shift, num, axis=0)


def _loop_scan(combine, tree, leaves: list) -> list:
    """`_tree_scan` of leaves [N, ...] (all levels of its tree) in two loops over the
    floor(log2 N) levels, every level on every row: position p takes combine(x[p - s], x[p])
    where (p + 1) % 2s == 0 (up-sweep) or (p + 1) % 2s == s and p >= 2s (down-sweep)."""
    num = leaves[0].shape[0]
    levels = num.bit_length() - 1 if num else 0  # the tree's levels of >= 2 elements
    if levels == 0:
        return leaves
    position = jnp.arange(num, dtype=jnp.int32)

    def sweep(leaves, level, down: bool):
        stride = jnp.left_shift(jnp.int32(1), level)
        phase = (position + 1) % (2 * stride)
        active = (phase == stride) & (position >= 2 * stride) if down else phase == 0
        left = tree.unflatten([_shifted(leaf, stride) for leaf in leaves])
        joined = jax.tree_util.tree_leaves(combine(left, tree.unflatten(leaves)))
        return [
            jnp.where(active.reshape(-1, *([1] * (leaf.ndim - 1))), new, leaf)
            for new, leaf in zip(joined, leaves, strict=True)
        ]

    top = levels - 1
    leaves = jax.lax.fori_loop(0, levels, lambda i, x: sweep(x, i, down=False), leaves)
    return jax.lax.fori_loop(0, levels, lambda i, x: sweep(x, top - i, down=True), leaves)


class _ScoreOrder(NamedTuple):
    """Flattened detections in descending score order, ties in flat index order,
    not-evaluated ones last."""

    order: jax.Array  # int32 [N]: flat index at each position
    rank: jax.Array  # int32 [N]: position of each flat index (the inverse permutation)


def _score_order(score: jax.Array, evaluated: jax.Array) -> _ScoreOrder:
    """The one floating-point sort of the evaluation; score, evaluated: [N].

    The flat index is a second sort key, so the order of tied scores does not depend on
    the backend honouring `is_stable` (kept: XLA:CPU's stable sort is the faster one here).
    -0.0 becomes +0.0 first so that the two tie (XLA simplifies `x + 0.0` away, so a
    comparison does it).
    """
    key = jnp.where(evaluated, -jnp.where(score == 0, 0.0, score), jnp.inf)
    index = jnp.arange(key.shape[0], dtype=jnp.int32)
    _, order = jax.lax.sort((key, index), num_keys=2, is_stable=True)
    rank = jnp.zeros_like(order).at[order].set(index)
    return _ScoreOrder(order, rank)


def _group_then_score(group: jax.Array, num_groups: int, by_score: _ScoreOrder) -> jax.Array:
    """Flat indices sorted by (group, score position); group: int [N] in [0, num_groups).

    Score positions are unique, so a packed int32 key `group * N + position` orders
    everything without ties: XLA sorts a single int32 array ~6x faster than the
    multi-operand comparator sort, and the index comes back as `key % N`.
    """
    num = by_score.rank.shape[0]
    if num_groups * num < 2**31:
        packed = jax.lax.sort(group.astype(jnp.int32) * num + by_score.rank)
        return by_score.order[packed % num]
    _, _, index = jax.lax.sort((group, by_score.rank, jnp.arange(num, dtype=jnp.int32)), num_keys=2)
    return index


def _match(detections, ground_truth, det_eval, gt_eval, thresholds, by_score, *, with_choice=False):
    """Greedy per-class matching; returns true-positive flags bool [B, D, num_thresholds].

    With `with_choice` (static) it returns `(hits, choice)` instead, choice int32 [B, D,
    num_thresholds]: the index of the ground truth each true positive took, -1 for the rest.

    Within each example, detections are visited in score order (`by_score`); each takes the
    still-unmatched ground truth of its class with the highest IoU (lowest index on ties)
    and is a true positive when that IoU >= the threshold.

    A detection whose best IoU is below the smallest threshold is a false positive at
    every threshold and takes nothing, so only the others ("live" ones) are visited: the
    loop runs for the largest number of live detections in one example, not for D.
    """
    iou = iou_1d(
        detections["start"][:, :, None],
        detections["end"][:, :, None],
        ground_truth["start"][:, None, :],
        ground_truth["end"][:, None, :],
    )
    same_class = detections["label"][:, :, None] == ground_truth["label"][:, None, :]
    candidate = det_eval[:, :, None] & gt_eval[:, None, :] & same_class
    iou = jnp.where(candidate, iou, -1.0)  # [B, D, G]; -1 never reaches a threshold
    num_thresholds, (batch, num_dets, num_gts) = len(thresholds), iou.shape
    if num_gts == 0 or num_dets == 0:  # nothing can match
        hits = jnp.zeros((batch, num_dets, num_thresholds), bool)
        return (hits, jnp.full(hits.shape, -1, jnp.int32)) if with_choice else hits

    live = jnp.max(iou, axis=-1) >= min(thresholds)  # [B, D]
    # Per example: live detections first, each group in score order.
    example = jnp.arange(batch, dtype=jnp.int32)[:, None]
    group = (2 * example + ~live).reshape(-1)
    visit_order = _group_then_score(group, 2 * batch, by_score).reshape(batch, num_dets) % num_dets
    examples = jnp.arange(batch)
    thresholds = jnp.asarray(thresholds, jnp.float32)[:, None]  # [K, 1]
    gt_index = jnp.arange(num_gts)

    def visit(step, state):
        # taken bool [K, B, G]; hits bool [D, K, B] and (with_choice) choice int32
        # [D, K, B], whose row `step` is written here
        taken, hits, *choice = state
        iou_row = iou[examples, visit_order[:, step]]  # [B, G]: each example's next detection
        open_iou = jnp.where(taken, -2.0, iou_row[None])
        # max + first index of the max: lowest index on ties. Two plain reductions; a
        # variadic argmax reduction is several times slower on XLA:CPU.
        best_iou = jnp.max(open_iou, axis=-1, keepdims=True)
        best = jnp.min(jnp.where(open_iou == best_iou, gt_index, num_gts), axis=-1)
        hit = best_iou[..., 0] >= thresholds  # [K, B]
        taken |= hit[..., None] & (gt_index == best[..., None])
        choice = [c.at[step].set(jnp.where(hit, best, -1)) for c in choice]
        return taken, hits.at[step].set(hit), *choice

    state = (
        jnp.zeros((num_thresholds, batch, num_gts), bool),
        jnp.zeros((num_dets, num_thresholds, batch), bool),
        *([jnp.full((num_dets, num_thresholds, batch), -1, jnp.int32)] if with_choice else []),
    )
    _, *by_visit = jax.lax.fori_loop(0, jnp.max(jnp.sum(live, axis=1)), visit, state)
    by_visit = [jnp.transpose(v, (2, 0, 1)) for v in by_visit]  # [B, D, K] in visit order
    rows, positions = jnp.arange(batch)[:, None], jnp.arange(num_dets)
    visit_position = jnp.zeros_like(visit_order).at[rows, visit_order].set(positions)
    outputs = [jnp.take_along_axis(v, visit_position[:, :, None], axis=1) for v in by_visit]
    return tuple(outputs) if with_choice else outputs[0]


def _segmented_scan(op, values, segment_start, reverse=False):
    """Inclusive scan of `op` along axis 0 of values [N, ...], restarting where
    segment_start [N] is True (a reverse scan runs from the end, restarting at ends)."""

    def combine(left, right):
        value_l, start_l = left
        value_r, start_r = right
        return jnp.where(start_r, value_r, op(value_l, value_r)), start_l | start_r

    if reverse:
        segment_start = jnp.roll(segment_start, -1).at[-1].set(True)  # segment ends
        values, segment_start = values[::-1], segment_start[::-1]
    segment_start = jnp.broadcast_to(
        segment_start.reshape(-1, *([1] * (values.ndim - 1))), values.shape
    )
    out, _ = _tree_scan(combine, (values, segment_start))
    return out[::-1] if reverse else out


def _average_precision(hits, label, det_eval, gt_count, num_classes, by_score):
    """All-point interpolated AP per threshold and class, float32 [K, num_classes].

    hits: bool [N, K] flattened true positives; label, det_eval: [N]; gt_count:
    int32 [num_classes]. Classes without ground truth get NaN. Works on [N, K] rows so
    that every reordering gathers contiguous rows.
    """
    num, num_thresholds = hits.shape
    if num == 0:
        return jnp.where(gt_count > 0, 0.0, jnp.nan) * jnp.ones((num_thresholds, 1))
    class_key = jnp.where(det_eval, label, num_classes)
    order = _group_then_score(class_key, num_classes + 1, by_score)
    cls = class_key[order]
    tp = hits[order].astype(jnp.int32)  # [N, K], grouped by class, by score within
    position = jnp.arange(num)
    starts = jnp.concatenate([jnp.array([True]), cls[1:] != cls[:-1]])
    # One scan for both running values (the class's first position, true positives so far)
    segment_first, tp_cumulative = _cumulative(
        lambda a, b: (jnp.maximum(a[0], b[0]), a[1] + b[1]),
        (jnp.where(starts, position, 0), tp),
    )
    rank = (position - segment_first + 1).astype(jnp.float32)
    tp_in_class = tp_cumulative - (tp_cumulative - tp)[segment_first]
    precision = tp_in_class.astype(jnp.float32) / rank[:, None]
    envelope = _segmented_scan(jnp.maximum, precision, starts, reverse=True)
    area = _segmented_scan(jnp.add, jnp.where(tp > 0, envelope, 0.0), starts)
    # The area of a class sits at the last position of its segment (if it has one).
    dets_per_class = jnp.sum(cls[:, None] == jnp.arange(num_classes), axis=0)
    segment_last = jnp.clip(jnp.cumsum(dets_per_class) - 1, 0, num - 1)
    class_area = jnp.where(dets_per_class > 0, area[segment_last].T, 0.0)  # [K, C]
    safe_count = jnp.maximum(gt_count, 1).astype(jnp.float32)
    return jnp.where(gt_count > 0, class_area / safe_count, jnp.nan)


def _false_rejection_rates(hits, score, det_eval, total_gt, total_hours, budgets, by_score):
    """FRR at each false-alarm budget (per hour), float32 [len(budgets)].

    hits: bool [N] true positives at `frr_iou`; the list of evaluated detections is cut
    only between different scores (or before everything). FA/h is a correctly rounded
    quotient, so `FA/h <= budget` is decided alike on every backend.
    """
    if score.shape[0] == 0:
        frr = jnp.ones(len(budgets))
    else:
        order = by_score.order
        kept_score, kept_eval, kept_hit = score[order], det_eval[order], hits[order]
        kept = jnp.stack([kept_hit & kept_eval, ~kept_hit & kept_eval], axis=1)
        true_kept, false_kept = _cumulative(jnp.add, kept.astype(jnp.int32)).T
        next_differs = jnp.concatenate([kept_score[1:] != kept_score[:-1], jnp.array([True])])
        next_eval = jnp.concatenate([kept_eval[1:], jnp.array([False])])
        can_cut = kept_eval & (next_differs | ~next_eval)
        fa_per_hour = _rounded_ratio(false_kept.astype(jnp.float32), total_hours)
        within = can_cut[None] & (fa_per_hour[None] <= jnp.asarray(budgets)[:, None])
        found = jnp.max(jnp.where(within, true_kept[None], 0), axis=-1)  # [len(budgets)]
        missed = (total_gt - found).astype(jnp.float32)  # FRR exactly 0 (1) if all (none) found
        frr = _rounded_ratio(missed, jnp.maximum(total_gt, 1).astype(jnp.float32))
    valid = (total_gt > 0) & (total_hours > 0)
    return jnp.where(valid, frr, jnp.nan).astype(jnp.float32)


def _threshold_index(thresholds: tuple[float, ...], value: float) -> int:
    return int(np.argmin(np.abs(np.asarray(thresholds) - value)))


def _prepared(detections, ground_truth, num_classes, ignore_classes):
    """The fields of `_checked` arguments, and which entries are evaluated (bool [B, D],
    [B, G]). Called inside the jitted programs, whose arguments are arrays already."""
    det_eval = _evaluated(detections["label"], detections["valid"], num_classes, ignore_classes)
    gt_eval = _evaluated(ground_truth["label"], ground_truth["valid"], num_classes, ignore_classes)
    return detections, ground_truth, det_eval, gt_eval


def _checked(detections, ground_truth, num_classes, ignore_classes):
    """(detections, ground_truth, num_classes, ignore_classes) checked: both sides
    reduced to their fields (what the jitted programs take), the classes as ints."""
    num_dets = _check_fields("detections", detections, DETECTION_FIELDS)
    num_gts = _check_fields("ground_truth", ground_truth, GROUND_TRUTH_FIELDS)
    if num_dets[0] != num_gts[0]:
        raise ValueError(
            f"detections have batch size {num_dets[0]} but ground_truth has {num_gts[0]}"
        )
    num_classes = _validate.require_int_at_least("num_classes", num_classes, 1)
    ignore_classes = tuple(
        _validate.require_class_index("ignore_classes", c, num_classes) for c in ignore_classes
    )
    detections = {k: detections[k] for k in DETECTION_FIELDS}
    ground_truth = {k: ground_truth[k] for k in GROUND_TRUTH_FIELDS}
    return detections, ground_truth, num_classes, ignore_classes


def detection_scores(
    detections: Mapping[str, jax.Array],
    ground_truth: Mapping[str, jax.Array],
    *,
    num_classes: int,
    total_hours,
    ignore_classes: Sequence[int] = (),
    iou_thresholds: Sequence[float] | None = None,
    frr_iou: float = 0.05,
    fa_per_hour: Sequence[float] = (5.0, 25.0),
) -> dict[str, jax.Array]:
    """AP, mAP and FRR at false-alarm budgets for 1-D keyword detections.

    Args:
      detections: dict of start, end, score float [B, D] (s), label int [B, D], valid bool [B, D].
      ground_truth: dict of start, end float [B, G] (s), label int [B, G], valid bool [B, G].
      num_classes: static number of classes (>= 1), ignored classes included.
      total_hours: summed duration of the evaluated audio in hours, > 0 (may be traced).
      ignore_classes: static class ids dropped from both sides (e.g. the *unknown* class).
      iou_thresholds: static thresholds in (0, 1] for `AP` and `mAP`;
        default 0.05, 0.10, ..., 0.95.
      frr_iou: IoU threshold of the matching behind FRR.
      fa_per_hour: false-alarm budgets per hour of audio; key `FRR@{budget:g}` each.

    Returns:
      dict with `AP` float32 [num_thresholds, num_classes] (NaN for a class without
      ground truth or an ignored class), `mAP` (mean over classes with ground truth and
      thresholds), `AP@0.05`, `AP@0.75`, and `FRR@5`, `FRR@25` (one per budget). Means
      over no class and FRR without ground truth are NaN.
    """
    # The checks here, then one jitted computation: called outside `jit`, it compiles one
    # program per shape instead of dispatching each of its operations alone (12 s to
    # 1-2 s on a first call); inside `jit` it is inlined.
    detections, ground_truth, num_classes, ignore_classes = _checked(
        detections, ground_truth, num_classes, ignore_classes
    )
    ap_thresholds = _validate.require_thresholds(
        "iou_thresholds", DEFAULT_IOU_THRESHOLDS if iou_thresholds is None else iou_thresholds
    )
    (frr_iou,) = _validate.require_thresholds("frr_iou", (frr_iou,))
    budgets = tuple(float(b) for b in fa_per_hour)
    if any(not b >= 0 for b in budgets):
        raise ValueError(f"fa_per_hour: budgets must be >= 0, got {budgets}")
    concrete_hours = not isinstance(total_hours, jax.core.Tracer)
    if concrete_hours and (np.ndim(total_hours) != 0 or not float(total_hours) > 0):
        raise ValueError(f"total_hours: expected a scalar > 0, got {total_hours!r}")
    return _detection_scores(
        detections,
        ground_truth,
        total_hours,
        num_classes=num_classes,
        ignore_classes=ignore_classes,
        ap_thresholds=ap_thresholds,
        frr_iou=frr_iou,
        budgets=budgets,
    )


@functools.partial(
    jax.jit,
    static_argnames=("num_classes", "ignore_classes", "ap_thresholds", "frr_iou", "budgets"),
)
def _detection_scores(
    detections,
    ground_truth,
    total_hours,
    *,
    num_classes,
    ignore_classes,
    ap_thresholds,
    frr_iou,
    budgets,
) -> dict[str, jax.Array]:
    """`detection_scores` of checked arguments."""
    detections, ground_truth, det_eval, gt_eval = _prepared(
        detections, ground_truth, num_classes, ignore_classes
    )
    flat = {k: detections[k].reshape(-1) for k in ("score", "label")}
    flat_eval = det_eval.reshape(-1)
    by_score = _score_order(flat["score"], flat_eval)
    match_thresholds = tuple(sorted(set(ap_thresholds) | {0.05, 0.75, frr_iou}))
    hits = _match(detections, ground_truth, det_eval, gt_eval, match_thresholds, by_score)
    hits = hits.reshape(-1, len(match_thresholds))  # [N, K]
    classes = jnp.arange(num_classes)
    gt_count = jnp.sum(
        gt_eval[..., None] & (ground_truth["label"][..., None] == classes),
        axis=(0, 1),
        dtype=jnp.int32,
    )
    ap_all = _average_precision(hits, flat["label"], flat_eval, gt_count, num_classes, by_score)
    has_gt = gt_count > 0

    def mean_over_classes(ap):  # [..., C] -> mean over classes with ground truth
        total = _ordered_sum(jnp.where(has_gt, ap, 0.0))
        # 0/0 -> NaN when no class has ground truth
        return _rounded_ratio(total, jnp.sum(has_gt).astype(jnp.float32))

    ap = ap_all[jnp.asarray([_threshold_index(match_thresholds, t) for t in ap_thresholds])]
    frr_hits = hits[:, _threshold_index(match_thresholds, frr_iou)]
    frr = _false_rejection_rates(
        frr_hits, flat["score"], flat_eval, jnp.sum(gt_count), total_hours, budgets, by_score
    )
    scores = {
        "AP": ap,
        "mAP": _rounded_ratio(_ordered_sum(mean_over_classes(ap)), float(len(ap_thresholds))),
        "AP@0.05": mean_over_classes(ap_all[_threshold_index(match_thresholds, 0.05)]),
        "AP@0.75": mean_over_classes(ap_all[_threshold_index(match_thresholds, 0.75)]),
    }
    scores.update({f"FRR@{b:g}": frr[i] for i, b in enumerate(budgets)})
    return scores


def pooled_matches(
    detections: Mapping[str, jax.Array],
    ground_truth: Mapping[str, jax.Array],
    *,
    num_classes: int,
    iou: float = 0.05,
    ignore_classes: Sequence[int] = (),
) -> dict[str, jax.Array]:
    """Every detection's outcome at one IoU threshold, pooled over examples and classes in
    score order: the list behind FRR, and behind precision-recall and DET curves.

    Args: as `detection_scores` (same fields and checks); `iou`: the matching threshold.

    Returns:
      dict with `score` float32 [B * D] (descending; ties in flat index order, detections
      that are not evaluated last), `hit` bool [B * D] (a true positive of the matching
      of docs/metrics.md at `iou`), `evaluated` bool [B * D], `index` int32 [B * D] (the
      flat index b * D + d of each outcome's detection, e.g. to look up its label), and
      `num_ground_truth` int32 (evaluated ground truths of all classes).
    """
    detections, ground_truth, num_classes, ignore_classes = _checked(
        detections, ground_truth, num_classes, ignore_classes
    )
    (iou,) = _validate.require_thresholds("iou", (iou,))
    return _pooled_matches(
        detections,
        ground_truth,
        num_classes=num_classes,
        iou=iou,
        ignore_classes=ignore_classes,
    )


@functools.partial(jax.jit, static_argnames=("num_classes", "iou", "ignore_classes"))
def _pooled_matches(detections, ground_truth, *, num_classes, iou, ignore_classes):
    """`pooled_matches` of checked arguments (see `detection_scores`)."""
    detections, ground_truth, det_eval, gt_eval = _prepared(
        detections, ground_truth, num_classes, ignore_classes
    )
    flat_eval = det_eval.reshape(-1)
    score = detections["score"].reshape(-1).astype(jnp.float32)
    by_score = _score_order(score, flat_eval)
    hits = _match(detections, ground_truth, det_eval, gt_eval, (iou,), by_score).reshape(-1)
    order = by_score.order
    return {
        "score": score[order],
        "hit": hits[order] & flat_eval[order],
        "evaluated": flat_eval[order],
        "index": order.astype(jnp.int32),
        "num_ground_truth": jnp.sum(gt_eval, dtype=jnp.int32),
    }
