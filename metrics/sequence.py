"""Sequence-labelling metrics of MultiQT: TIMESTEP and INSTANCE precision / recall / F1.

Entry points: `timestep_prf` and `instance_prf`; for batch-by-batch use their int32
counts (`timestep_counts`, `instance_counts`, or both from one pass: `sequence_counts`),
which add with `+` and are scored once at the end by `prf_from_counts`. Inputs are
padded batch-first arrays: int `[B, T]` pred and gold class ids, bool `[B, T]` mask
(False marks padding). Pure, jittable (class counts and run lengths static), vmappable.

    timestep, instance = sequence_counts(pred, gold, mask, num_classes=7)
    prf_from_counts(timestep), prf_from_counts(instance)

Specification, in docs/metrics.md, "Sequence labelling": the definitions, mergeable
counts, how the counts are computed, and labels out of range (they match no class;
`metrics.checked` makes them an error).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from metrics import _validate


class PRF(NamedTuple):
    """Macro-averaged precision, recall and F1 (float32 scalars, or [..] under vmap)."""

    precision: jax.Array
    recall: jax.Array
    f1: jax.Array


def _add_counts(self, other):
    """Merges counts field by field (`+` on the NamedTuple, not tuple concatenation)."""
    if type(other) is not type(self):
        return NotImplemented
    return type(self)(*(a + b for a, b in zip(self, other, strict=True)))


class TimestepCounts(NamedTuple):
    """Per-class TIMESTEP counts, int32 [..., num_classes]."""

    tp: jax.Array
    fp: jax.Array
    fn: jax.Array

    __add__ = _add_counts


class InstanceCounts(NamedTuple):
    """Per-class INSTANCE counts, int32 [..., num_classes].

    correct: predicted instances with >= min_run consecutive gold timesteps of their class.
    predicted: predicted instances (maximal runs of one non-background predicted label).
    found: gold instances with >= min_run consecutive predicted timesteps of their class.
    gold: gold instances.
    """

    correct: jax.Array
    predicted: jax.Array
    found: jax.Array
    gold: jax.Array

    __add__ = _add_counts


def _check_sequences(pred, gold, mask) -> None:
    _validate.require_same_shape({"pred": pred, "gold": gold, "mask": mask}, rank=2)
    _validate.require_dtype("pred", pred, "int")
    _validate.require_dtype("gold", gold, "int")
    _validate.require_dtype("mask", mask, "bool")


# The counts are bins of one histogram whose table grows with num_classes squared (about
# 2.3 MB at this limit); sequence labelling has a handful of classes.
MAX_CLASSES = 254


def _require_num_classes(num_classes) -> int:
    num_classes = _validate.require_int_at_least("num_classes", num_classes, 2)
    if num_classes > MAX_CLASSES:
        raise ValueError(f"num_classes: expected at most {MAX_CLASSES}, got {num_classes}")
    return num_classes


def _in_range(labels: jax.Array, num_classes: int) -> jax.Array:
    """labels with out-of-range values (< 0 or >= num_classes) replaced by num_classes."""
    return jnp.where((labels >= 0) & (labels < num_classes), labels, num_classes)


# Rows are padded to a multiple of _LANES timesteps (see `_carry_hits`); padding is an
# invalid timestep. Every kernel below compiles to a plain loop over contiguous memory,
# a small reduction or the histogram's scatter. Where a result is used by several
# kernels it goes through a concatenate along the last axis, which XLA:CPU writes out
# instead of recomputing it inside each consumer (where the loops stop vectorising).
_LANES = 8
_LANE_BITS = 3


def _cells(pred, gold, mask, num_classes: int) -> tuple[jax.Array, int]:
    """(cell codes, field width w): unsigned [B, Tp], Tp = T rounded up to _LANES.

    cell = gold' << w | pred' at valid timesteps, label' being the label, or num_classes
    when out of range. Invalid timesteps (masked or padding) hold all ones, which no valid
    cell does: both fields are <= num_classes < 2**w - 1.
    """
    width = (num_classes + 1).bit_length()  # <= 8 under MAX_CLASSES
    dtype = next(d for d in (jnp.uint8, jnp.uint16, jnp.uint32) if jnp.iinfo(d).bits >= 2 * width)
    invalid = (1 << 2 * width) - 1
    cell = _in_range(gold, num_classes).astype(dtype) << width
    cell = jnp.where(mask, cell | _in_range(pred, num_classes).astype(dtype), dtype(invalid))
    padding = -cell.shape[1] % _LANES
    return jnp.pad(cell, ((0, 0), (0, padding)), constant_values=invalid), width


def _histogram(codes: jax.Array, num_bins: int) -> jax.Array:
    """How often each of 0..num_bins-1 occurs in `codes` (int, any shape): int32 [num_bins].

    One scatter-add, which XLA:CPU runs as a loop over the codes.
    """
    codes = codes.reshape(-1, 1)
    return jax.lax.scatter_add(
        jnp.zeros(num_bins, jnp.int32),
        codes,
        jnp.ones(codes.shape[0], jnp.int32),
        jax.lax.ScatterDimensionNumbers((), (0,), (0,)),
        mode=jax.lax.GatherScatterMode.PROMISE_IN_BOUNDS,
    )


def _pair_histogram(codes: jax.Array, num_bins: int) -> jax.Array:
    """`_histogram` of a multiple of four codes in half the loop: code i of the first half
    and code i of the second make one code of num_bins**2; the table is summed both ways.
    Worth it while that table stays in cache. Two interleaved tables (`_spread`)."""
    halves = codes.astype(jnp.int32).reshape(2, -1, 2)
    table = _histogram(_spread(halves[0] * num_bins + halves[1], num_bins**2), 2 * num_bins**2)
    table = table.reshape(2, num_bins, num_bins).sum(0)
    return table.sum(0) + table.sum(1)


def _spread(codes: jax.Array, num_bins: int) -> jax.Array:
    """codes [..., k] of k interleaved tables: element j of the last axis counts in table j.

    Labels come in runs, so consecutive codes mostly hit one bin, and each scatter-add
    then waits for the one before it (a store, then a load of the same address). With
    consecutive codes in k tables, k such chains overlap; the caller sums the k tables.
    """
    copies = codes.shape[-1]
    return codes + jnp.arange(copies, dtype=codes.dtype) * num_bins


# Lane digits of `_carry_hits`, and the run-end flag stored above them.
_NEITHER, _CONTINUES, _QUALIFIES = 3, 7, 9
_DIGIT, _END = 15, 16
_ALL_CONTINUE = (1 << _LANES * _LANE_BITS) - 1  # eight lanes of 7


def _pack_lanes(digits: jax.Array) -> jax.Array:
    """uint32 [..., n / _LANES]: digits [..., n] summed in 3-bit lanes, 8 per word.

    Lane j of word w holds digit 8w + j; a digit of 8 or more carries into the next lane
    (or, from the top lane, into bit 24).
    """
    lanes = digits.astype(jnp.uint32).reshape(digits.shape[:-1] + (-1, _LANES))
    shifts = jnp.arange(_LANES, dtype=jnp.uint32) * _LANE_BITS
    return jnp.sum(lanes << shifts, axis=-1, dtype=jnp.uint32)


def _unpack_lanes(words: jax.Array) -> jax.Array:
    """uint32 [..., n, _LANES]: the 3-bit lanes of words [..., n]."""
    shifts = jnp.arange(_LANES, dtype=jnp.uint32) * _LANE_BITS
    return (words[..., None] >> shifts) & 7


def _carry_hits(digits: jax.Array) -> jax.Array:
    """The lane words of `digits` with every carry added; see `_hit_lanes`.

    digits: uint8 [B, n] of _NEITHER / _CONTINUES / _QUALIFIES, n a multiple of _LANES.
    Returns uint32 [B, n / _LANES].

    Wanted is the flip-flop hit[t] = digit[t] == _QUALIFIES or (digit[t] == _CONTINUES
    and hit[t - 1]) along each row. In 3-bit lanes, added up as integers, it happens by
    itself: a _QUALIFIES lane (8 + 1) always carries into the next lane, a _CONTINUES
    lane (7) passes an incoming carry on, a _NEITHER lane (3) absorbs it; afterwards a
    lane is <= 2 exactly where a carry left it, i.e. where hit[t]. Within a word the
    addition resolves the carries; across words it is the same recurrence over words,
    with 8 times fewer of them, solved the same way.
    """
    words = _pack_lanes(digits)
    count = words.shape[-1]
    if count == 1:
        return words
    carries = (words >> _LANES * _LANE_BITS) != 0  # the carry out of the top lane
    passes = (words & _ALL_CONTINUE) == _ALL_CONTINUE
    word_digits = jnp.where(carries, _QUALIFIES, jnp.where(passes, _CONTINUES, _NEITHER))
    padding = ((0, 0), (0, -count % _LANES))
    word_digits = jnp.pad(word_digits.astype(jnp.uint8), padding, constant_values=_NEITHER)
    carry_out = _hit_lanes(_carry_hits(word_digits))[:, :count]
    carried = words[:, 1:] + carry_out[:, :-1].astype(jnp.uint32)
    return jnp.concatenate([words[:, :1], carried], axis=1)  # written out, see _LANES


def _hit_lanes(words: jax.Array) -> jax.Array:
    """bool [B, n * _LANES]: hit[t] from the words of `_carry_hits` [B, n]."""
    return (_unpack_lanes(words) <= 2).reshape(words.shape[0], -1)


def _side_codes(cell, earlier, width: int, shift: int, *, length, background, min_run):
    """uint8 [B, Tp]: one side's lane digit and run-end flag (_END) per timestep.

    cell: [B, Tp] codes. earlier(k): the cells k timesteps earlier ([B, Tp]; k = -1: one
    later), garbage where that lies outside the row. shift: 0 for the pred side, `width`
    for gold. A run of the side is a maximal run of one non-background label;
    _CONTINUES marks a timestep that continues the side's run, _END the run's last one,
    and _QUALIFIES the last of `min_run` timesteps with one and the same cell, gold = pred
    = a non-background class: such a window lies inside one pred run and one gold run
    and makes both hits (the other side carries their class for `min_run` timesteps).
    """
    field = (1 << width) - 1
    window = min(min_run, length)
    # Where the garbage matters, as a constant row (cheaper than comparing positions).
    time = np.arange(cell.shape[1])
    has_previous = jnp.asarray(time >= 1)
    is_last = jnp.asarray(time == length - 1)
    has_window = jnp.asarray((time >= min_run - 1) & (min_run <= length))
    label = (cell >> shift) & field
    in_run = (label != background) & (label != field)  # field: an invalid cell
    continues = in_run & (((earlier(1) >> shift) & field) == label) & has_previous
    ends = in_run & ((((earlier(-1) >> shift) & field) != label) | is_last)
    pred, gold = cell & field, cell >> width
    qualifies = (pred == gold) & (pred != background) & (pred != field) & has_window
    for k in range(1, window):
        qualifies &= earlier(k) == cell
    u8 = jnp.uint8  # byte-wide constants keep the loop byte-wide
    digit = jnp.where(qualifies, u8(_QUALIFIES), jnp.where(continues, u8(_CONTINUES), u8(_NEITHER)))
    return digit | jnp.where(ends, u8(_END), u8(0))


def _end_states(codes: jax.Array, words: jax.Array, dtype) -> jax.Array:
    """[B, Tp / 8, 8] of `dtype`: 0 where no run of the side ends, 1 where one ends that
    is no hit, 2 where a hit ends. codes: one side's [B, Tp]; words: its `_carry_hits`."""
    lanes = codes.reshape(words.shape + (_LANES,))
    hit = (_unpack_lanes(words) <= 2).astype(dtype)
    return jnp.where(lanes >= _END, 1 + hit, dtype(0))


def _odd_histogram(codes: jax.Array, num_bins: int) -> jax.Array:
    """`_histogram` of int32 `codes` that are all odd, 2j + 1 for bin j: int32 [num_bins].

    The codes are also the scatter's updates, so no array of ones is written and read
    (on XLA:CPU that array costs about a fifth of the scatter): bin 2j + 1 adds up
    count_j * (2j + 1), wrapping modulo 2**32 (XLA integer addition wraps on every
    backend), and count_j comes back exactly on multiplying by the inverse of 2j + 1
    modulo 2**32, which every odd number has. Exact for count_j < 2**32.
    """
    codes = codes.reshape(-1)
    table = jax.lax.scatter_add(
        jnp.zeros(2 * num_bins, jnp.int32),
        codes[:, None],
        codes,
        jax.lax.ScatterDimensionNumbers((), (0,), (0,)),
        mode=jax.lax.GatherScatterMode.PROMISE_IN_BOUNDS,
    )
    sums = jax.lax.bitcast_convert_type(table[1::2], jnp.uint32)
    odd = 2 * jnp.arange(num_bins, dtype=jnp.uint32) + 1
    return jax.lax.bitcast_convert_type(sums * _odd_inverse(odd), jnp.int32)


def _odd_inverse(odd: jax.Array) -> jax.Array:
    """uint32 [...]: the inverse modulo 2**32 of each odd uint32 value, by Newton's
    iteration y <- y (2 - x y) in wrapping uint32 arithmetic. y = x is right in the low 3
    bits (x x = 1 modulo 8 for odd x) and each step doubles them: 6, 12, 24, 48. Computed
    in the program, not a constant: a table of 4.7 M inverses for num_classes=254 took
    seconds to build in Python and to compile."""
    inverse = odd
    for _ in range(4):
        inverse = inverse * (2 - odd * inverse)
    return inverse


# The public functions check their arguments, then call one jitted computation: called
# outside `jit`, they compile one program per shape instead of dispatching (and, on a
# new shape, compiling) each of their ~100 operations alone. Inside `jit` it is inlined.
@functools.partial(jax.jit, static_argnames=("num_classes", "background", "min_run"))
def _joint_histogram(pred, gold, mask, *, num_classes, background, min_run) -> jax.Array:
    """int32 [C + 1, 3, C + 1, 3]: valid timesteps counted by (gold', gold end state,
    pred', pred end state), C = num_classes, label' as in `_cells`, end states as in
    `_end_states`. B * T must be > 0."""
    cell, width = _cells(pred, gold, mask, num_classes)
    batch, length = pred.shape
    padded = cell.shape[1]
    lead = min(max(min_run - 1, 1), length)
    # Each row's last `lead` cells, the row, its first cell: cells k timesteps away are
    # then plain slices (garbage at the row ends, which _side_codes masks).
    rolled = jnp.concatenate([cell[:, padded - lead :], cell, cell[:, :1]], axis=1)

    def earlier(k):
        return rolled[:, lead - k : lead - k + padded]

    sides = [
        _side_codes(
            cell, earlier, width, shift, length=length, background=background, min_run=min_run
        )
        for shift in (0, width)
    ]
    # Both sides in one row: the gold half's first timestep never continues a run, so no
    # carry crosses from the pred half.
    codes = jnp.concatenate(sides, axis=1)
    words = _carry_hits(codes & _DIGIT)
    n = padded // _LANES  # words per side
    side_bins = 3 * (num_classes + 1)
    dtype = jnp.int32  # the codes are the histogram's updates too (`_odd_histogram`)
    pred_state, gold_state = (
        _end_states(codes[:, i * padded : (i + 1) * padded], words[:, i * n : (i + 1) * n], dtype)
        for i in (0, 1)
    )
    cell = cell.reshape(batch, n, _LANES)
    field = (1 << width) - 1
    pred_class, gold_class = (cell & field).astype(dtype), (cell >> width).astype(dtype)
    code = (gold_class * 3 + gold_state) * side_bins + pred_class * 3 + pred_state
    invalid = pred_class == field
    code = jnp.where(invalid, dtype(side_bins * side_bins), code)  # one more bin
    # No pairs here: their table would not stay in cache (and XLA:CPU stops vectorising
    # the loop above if it has to form them). One table per lane (`_spread`).
    num_bins = side_bins * side_bins + 1
    # In two halves, which XLA:CPU's executor can run at once (the loops above already
    # run on two threads; a scatter runs on one).
    halves = (2 * _spread(code, num_bins) + 1).reshape(2, -1)
    counts = sum(_odd_histogram(half, _LANES * num_bins) for half in halves)
    counts = counts.reshape(_LANES, num_bins).sum(0)[:-1]
    return counts.reshape(num_classes + 1, 3, num_classes + 1, 3)


def timestep_counts(pred, gold, mask, *, num_classes: int) -> TimestepCounts:
    """Per-class true positives, false positives and false negatives over valid timesteps.

    Args:
      pred: int [B, T] predicted class per timestep.
      gold: int [B, T] gold class per timestep.
      mask: bool [B, T], False = padding.
      num_classes: static number of classes (background included), >= 2.

    Returns:
      `TimestepCounts` of int32 [num_classes] arrays.
    """
    _check_sequences(pred, gold, mask)
    num_classes = _require_num_classes(num_classes)
    pred, gold, mask = jnp.asarray(pred), jnp.asarray(gold), jnp.asarray(mask)
    confusion = jnp.zeros((num_classes + 1, num_classes + 1), jnp.int32)
    if pred.size:
        confusion = _confusion(pred, gold, mask, num_classes=num_classes)
    return _timestep_counts(confusion)


@functools.partial(jax.jit, static_argnames="num_classes")  # see `_joint_histogram`
def _confusion(pred, gold, mask, *, num_classes: int) -> jax.Array:
    """int32 [C + 1, C + 1]: valid timesteps counted by (gold', pred'), label' as in
    `_cells`. B * T must be > 0."""
    cell, width = _cells(pred, gold, mask, num_classes)
    side = 1 << width  # cells are side * side codes
    count = _pair_histogram if side <= 16 else _histogram
    confusion = count(cell, side * side).reshape(side, side)
    return confusion[: num_classes + 1, : num_classes + 1]


def _timestep_counts(confusion: jax.Array) -> TimestepCounts:
    """From int32 [C + 1, C + 1] (gold', pred') counts; index C is out of range."""
    tp = jnp.diagonal(confusion)[:-1]
    return TimestepCounts(tp=tp, fp=confusion.sum(0)[:-1] - tp, fn=confusion.sum(1)[:-1] - tp)


def _instance_counts(joint: jax.Array) -> InstanceCounts:
    """From the int32 [C + 1, 3, C + 1, 3] counts of `_joint_histogram`."""
    pred_ends = joint.sum((0, 1))[:-1]  # [C, 3] by pred end state
    gold_ends = joint.sum((2, 3))[:-1]
    return InstanceCounts(
        correct=pred_ends[:, 2],
        predicted=pred_ends[:, 1] + pred_ends[:, 2],
        found=gold_ends[:, 2],
        gold=gold_ends[:, 1] + gold_ends[:, 2],
    )


def _safe_ratio(numerator, denominator):
    """numerator / denominator as float32, with 0/0 (and x/0) = 0."""
    numerator = jnp.asarray(numerator, jnp.float32)
    denominator = jnp.asarray(denominator, jnp.float32)
    return jnp.where(denominator > 0, numerator / jnp.where(denominator > 0, denominator, 1), 0.0)


def _macro(values: jax.Array, eligible: jax.Array) -> jax.Array:
    """Mean of `values` [..., C] over eligible classes; 0 when none is eligible."""
    total = jnp.sum(jnp.where(eligible, values, 0.0), axis=-1)
    return _safe_ratio(total, jnp.sum(eligible, axis=-1))


def per_class_prf(counts: TimestepCounts | InstanceCounts) -> PRF:
    """Per-class precision, recall and F1, float32 [..., num_classes]; any 0/0 is 0."""
    if isinstance(counts, TimestepCounts):
        precision = _safe_ratio(counts.tp, counts.tp + counts.fp)
        recall = _safe_ratio(counts.tp, counts.tp + counts.fn)
        f1 = _safe_ratio(2 * counts.tp, 2 * counts.tp + counts.fp + counts.fn)
    elif isinstance(counts, InstanceCounts):
        precision = _safe_ratio(counts.correct, counts.predicted)
        recall = _safe_ratio(counts.found, counts.gold)
        f1 = _safe_ratio(2 * precision * recall, precision + recall)
    else:
        raise TypeError(
            f"counts: expected TimestepCounts or InstanceCounts, got {type(counts).__name__}"
        )
    return PRF(precision, recall, f1)


def eligible_classes(counts: TimestepCounts | InstanceCounts, average_over=None) -> jax.Array:
    """Classes that enter the macro average, bool [..., num_classes].

    TIMESTEP: classes present in gold or pred at a valid timestep. INSTANCE: classes with
    a gold or predicted instance (background never has one). Both further restricted by
    `average_over`, bool [num_classes], when given.
    """
    if isinstance(counts, TimestepCounts):
        present = (counts.tp + counts.fp + counts.fn) > 0
    elif isinstance(counts, InstanceCounts):
        present = (counts.gold + counts.predicted) > 0
    else:
        raise TypeError(
            f"counts: expected TimestepCounts or InstanceCounts, got {type(counts).__name__}"
        )
    if average_over is None:
        return present
    num_classes = present.shape[-1]
    shape, _ = _validate.shape_and_dtype("average_over", average_over)
    if shape != (num_classes,):
        raise ValueError(f"average_over: expected shape ({num_classes},), got {shape}")
    _validate.require_dtype("average_over", average_over, "bool")
    return present & jnp.asarray(average_over)


def prf_from_counts(counts: TimestepCounts | InstanceCounts, average_over=None) -> PRF:
    """Macro P/R/F1 from (possibly merged) counts; macro F1 is the mean of per-class F1."""
    per_class = per_class_prf(counts)
    eligible = eligible_classes(counts, average_over)
    return PRF(*(_macro(values, eligible) for values in per_class))


def timestep_prf(pred, gold, mask, *, num_classes: int, average_over=None) -> PRF:
    """TIMESTEP macro precision / recall / F1, counts pooled over all valid timesteps.

    With default arguments equals scikit-learn's
    `precision_recall_fscore_support(gold[mask], pred[mask], average='macro',
    zero_division=0)`.

    Args:
      pred, gold: int [B, T] class ids; mask: bool [B, T].
      num_classes: static, >= 2.
      average_over: optional bool [num_classes]; classes outside it are left out of the mean.
    """
    counts = timestep_counts(pred, gold, mask, num_classes=num_classes)
    return prf_from_counts(counts, average_over)


def _validated(pred, gold, mask, num_classes, background, min_run):
    _check_sequences(pred, gold, mask)
    num_classes = _require_num_classes(num_classes)
    background = _validate.require_class_index("background", background, num_classes)
    min_run = _validate.require_int_at_least("min_run", min_run, 1)
    pred, gold, mask = jnp.asarray(pred), jnp.asarray(gold), jnp.asarray(mask)
    return pred, gold, mask, num_classes, background, min_run


def sequence_counts(
    pred, gold, mask, *, num_classes: int, background: int = 0, min_run: int = 5
) -> tuple[TimestepCounts, InstanceCounts]:
    """`timestep_counts` and `instance_counts` (same arguments) from one pass over the data.

    Returns:
      (`TimestepCounts`, `InstanceCounts`), int32 [num_classes] arrays each.
    """
    pred, gold, mask, num_classes, background, min_run = _validated(
        pred, gold, mask, num_classes, background, min_run
    )
    joint = jnp.zeros((num_classes + 1, 3, num_classes + 1, 3), jnp.int32)
    if pred.size:
        joint = _joint_histogram(
            pred, gold, mask, num_classes=num_classes, background=background, min_run=min_run
        )
    return _timestep_counts(joint.sum((1, 3))), _instance_counts(joint)


def instance_counts(
    pred, gold, mask, *, num_classes: int, background: int = 0, min_run: int = 5
) -> InstanceCounts:
    """Per-class INSTANCE counts.

    An instance is a maximal run of one non-background label (a masked timestep ends a
    run). A gold instance is found, and a predicted instance correct, when inside its
    span the other side carries its class for >= `min_run` consecutive timesteps.

    Args:
      pred, gold: int [B, T] class ids; mask: bool [B, T].
      num_classes: static, >= 2. background: static class id that is never an instance.
      min_run: static, >= 1.

    Returns:
      `InstanceCounts` of int32 [num_classes] arrays (zero at the background class).
    """
    return sequence_counts(
        pred, gold, mask, num_classes=num_classes, background=background, min_run=min_run
    )[1]


def instance_prf(
    pred, gold, mask, *, num_classes: int, background: int = 0, min_run: int = 5
) -> PRF:
    """INSTANCE macro precision / recall / F1 over non-background classes with instances.

    `P_c = correct_c / predicted_c`, `R_c = found_c / gold_c`, `F1_c = 2 P_c R_c / (P_c + R_c)`;
    see `instance_counts` for the rule. A gold instance shorter than `min_run` can never be
    found (the paper's rule).
    """
    counts = instance_counts(
        pred, gold, mask, num_classes=num_classes, background=background, min_run=min_run
    )
    return prf_from_counts(counts)


# `metrics.latency` finds instances and qualifying windows with these.


def _shift_right(values: jax.Array, by: int, fill) -> jax.Array:
    """values[t - by] along the last axis, `fill` for t < by."""
    if by == 0:
        return values
    pad = [(0, 0)] * (values.ndim - 1) + [(by, 0)]
    return jnp.pad(values[..., : values.shape[-1] - by], pad, constant_values=fill)[
        ..., : values.shape[-1]
    ]


def _window_all(values: jax.Array, width: int) -> jax.Array:
    """True at t when values[t - width + 1 .. t] are all True (False for t < width - 1)."""
    if width <= 8:  # a few shifted ANDs fuse into one pass
        out = values
        for by in range(1, width):
            out = out & _shift_right(values, by, False)
        return out
    window = jax.lax.reduce_window(
        values.astype(jnp.int32),
        0,
        jax.lax.add,
        (1,) * (values.ndim - 1) + (width,),
        (1,) * values.ndim,
        [(0, 0)] * (values.ndim - 1) + [(width - 1, 0)],
    )
    return window == width


def _run_events(labels, agree, mask, *, background, min_run):
    """Instance boundaries and qualifying windows of one side, bool [B, T] each.

    starts / ends: first and last timestep of each instance (maximal run of one
    non-background label; a masked timestep ends it). qualifies: the `min_run`
    timesteps ending here all agree (pred == gold, valid) and lie inside one instance.
    """
    in_run = mask & (labels != background)
    same_as_before = _shift_right(labels, 1, 0) == labels
    continues = in_run & _shift_right(in_run, 1, False) & same_as_before
    starts = in_run & ~continues
    next_continues = jnp.pad(continues[:, 1:], ((0, 0), (0, 1)))
    ends = in_run & ~next_continues
    qualifies = _window_all(agree & in_run, min_run)
    if min_run > 1:  # ...and no instance starts inside the window after its first step
        qualifies &= _window_all(~starts, min_run - 1)
    return starts, ends, qualifies
