"""ctc_jax.beam: prefix probabilities equal a brute-force sum over every CTC path,
width 1 without a word model gives greedy's transcript, streaming over any block
partition equals the whole stream, final words are never revoked, and the word model
moves the choice between words the audio leaves open."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctc_jax import beam, decode, symbols
from speechkit import lm

HOP_S = 0.02
PLAIN = beam.BeamConfig(width=1, alpha=0.0, beta=0.0, prune_log_prob=None)


def ids(text: str) -> list[int]:
    return [int(i) for i in symbols.encode(text)]


def log_probs_over(columns: list[int], probabilities: np.ndarray) -> np.ndarray:
    """float [T, 30] log-probabilities: `probabilities` [T, len(columns)] in `columns`,
    every other label impossible (-inf)."""
    out = np.full((len(probabilities), symbols.NUM_SYMBOLS), -np.inf)
    with np.errstate(divide="ignore"):
        out[:, columns] = np.log(probabilities)
    return out


def brute_force(columns: list[int], probabilities: np.ndarray) -> dict[str, float]:
    """{label text: P(text)} summed over every path of len(probabilities) frames."""
    found: dict[str, float] = {}
    for path in itertools.product(range(len(columns)), repeat=len(probabilities)):
        p = math.prod(probabilities[t, k] for t, k in enumerate(path))
        labels = [columns[k] for k in path]
        collapsed = [a for i, a in enumerate(labels) if a and (i == 0 or a != labels[i - 1])]
        text = "".join(symbols.character(label) for label in collapsed)
        found[text] = found.get(text, 0.0) + p
    return found


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    frames=st.integers(1, 5),
    alphabet=st.sampled_from(["ab ", "a ", "ab", "a"]),
)
def test_prefix_probabilities_equal_a_sum_over_every_path(seed, frames, alphabet):
    """A beam wide enough to keep every prefix (no pruning, no word model) holds each
    label sequence with the probability of all the paths that collapse to it."""
    rng = np.random.default_rng(seed)
    columns = [symbols.BLANK, *ids(alphabet)]
    probabilities = rng.dirichlet(np.ones(len(columns)), size=frames)
    decoder = beam.BeamDecoder(
        beam.BeamConfig(
            width=beam.MAX_WIDTH, alpha=0, beta=0, prune_log_prob=None, max_delay_s=None
        ),
        hop_s=HOP_S,
    )
    assert decoder.step(log_probs_over(columns, probabilities)) == []  # "" keeps all open
    found = {labels: math.exp(acoustic) for labels, acoustic, _ in decoder.hypotheses()}
    expected = brute_force(columns, probabilities)
    assert found.keys() == expected.keys()
    for labels, p in expected.items():
        assert found[labels] == pytest.approx(p, rel=1e-9, abs=1e-15), labels


def peaked_log_probs(rng, frames: int, low: float = 0.5) -> np.ndarray:
    """float [T, 30]: a best label per frame (blank 40 %, space 15 %, else any) with
    probability in [low, 1), the rest spread at random."""
    best = rng.integers(1, symbols.NUM_SYMBOLS, frames)
    best[rng.random(frames) < 0.15] = symbols.SPACE
    best[rng.random(frames) < 0.4] = symbols.BLANK
    rest = rng.random((frames, symbols.NUM_SYMBOLS))
    rest[np.arange(frames), best] = 0
    top = rng.uniform(low, 1.0, frames)
    probabilities = rest / rest.sum(1, keepdims=True) * (1 - top)[:, None]
    probabilities[np.arange(frames), best] = top
    return np.log(probabilities)


def greedy_transcript(log_probs: np.ndarray) -> decode.Transcript:
    emit, symbol = decode.greedy(log_probs[None])
    return decode.transcribe(emit[0], symbol[0], hop_s=HOP_S)


@pytest.mark.parametrize("seed", range(40))
def test_width_one_without_a_word_model_is_greedy(seed):
    """Text, characters and word spans equal greedy's; a word is emitted when it became
    final (its SPACE, or the stream's end), never before greedy emits it."""
    log_probs = peaked_log_probs(np.random.default_rng(seed), 120)
    greedy = greedy_transcript(log_probs)
    found = beam.transcribe(log_probs, PLAIN, hop_s=HOP_S)
    assert found.text == greedy.text and found.chars == greedy.chars
    assert [(w.word, w.start, w.end) for w in found.words] == [
        (w.word, w.start, w.end) for w in greedy.words
    ]
    for ours, theirs in zip(found.words, greedy.words, strict=True):
        assert ours.emitted >= theirs.emitted


def test_width_one_keeps_the_more_probable_prefix_where_greedy_does_not():
    """Flat frames: greedy's best path spells "aa", but "a" is the more probable label
    sequence, and the beam keeps it (the documented difference)."""
    columns = [symbols.BLANK, *ids("a")]
    probabilities = np.array([[0.1, 0.9], [0.6, 0.4], [0.4, 0.6]])
    log_probs = log_probs_over(columns, probabilities)
    exact = brute_force(columns, probabilities)
    assert greedy_transcript(log_probs).text == "aa" and exact["a"] > exact["aa"]
    assert beam.transcribe(log_probs, PLAIN, hop_s=HOP_S).text == "a"


def partitions(rng, frames: int) -> list[int]:
    """Random block sizes summing to `frames` (zeros included)."""
    sizes = []
    while sum(sizes) < frames:
        sizes.append(int(min(rng.integers(0, 12), frames - sum(sizes))))
    return sizes


def streamed(log_probs, config, sizes, model=None):
    """(words of each step, words of close, chars) over blocks of `sizes` frames."""
    decoder = beam.BeamDecoder(config, hop_s=HOP_S, lm=model)
    steps, start = [], 0
    for size in sizes:
        steps.append(decoder.step(log_probs[start : start + size]))
        start += size
    return steps, decoder.close(), decoder.chars


@pytest.fixture(scope="module")
def word_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("lm") / "words.arpa"
    sentences = [["call", "me", "back"], ["the", "cat", "is", "here"], ["call", "the", "cat"]]
    lm.train_arpa(sentences * 3, path)
    return lm.read_arpa(path, unknown_log10=-4.0)


@pytest.mark.parametrize("seed", range(6))
def test_streaming_over_any_partition_equals_the_whole_stream(seed, word_model):
    rng = np.random.default_rng(seed)
    log_probs = peaked_log_probs(rng, 300, low=0.3)
    config = beam.BeamConfig(width=6, alpha=0.8, beta=0.5, prune_log_prob=-6.0)
    whole = streamed(log_probs, config, [300], word_model)
    for _ in range(4):
        sizes = partitions(rng, 300)
        steps, closed, chars = streamed(log_probs, config, sizes, word_model)
        assert [w for step in steps for w in step] == whole[0][0] and closed == whole[1]
        assert chars == whole[2]


@pytest.mark.parametrize("seed", range(6))
def test_final_words_are_never_revoked_and_come_when_they_are_final(seed, word_model):
    """What `step` emits is the start of the transcript `close` completes; every word is
    emitted at the end of a frame after its last character, in order, and some before
    the stream ends."""
    rng = np.random.default_rng(seed)
    log_probs = peaked_log_probs(rng, 400, low=0.3)
    config = beam.BeamConfig(width=8, alpha=0.5, beta=1.0)
    steps, closed, chars = streamed(log_probs, config, partitions(rng, 400), word_model)
    emitted = [w for step in steps for w in step]
    whole = beam.transcribe(log_probs, config, hop_s=HOP_S, lm=word_model)
    assert tuple(emitted + closed) == whole.words and emitted
    times = [w.emitted for w in whole.words]
    assert times == sorted(times) and times[-1] == pytest.approx(400 * HOP_S)
    assert all(w.start < w.end <= w.emitted for w in whole.words)
    assert "".join(c for c, _ in chars).split() == whole.text.split()


def spelled(text: str, confusions: dict[int, dict[str, float]]) -> np.ndarray:
    """Log-probabilities that spell `text` one character per frame with a blank frame
    after each; frame i's character shares its probability as `confusions[i]` says."""
    rows = []
    for i, character in enumerate(text):
        row = np.full(symbols.NUM_SYMBOLS, 1e-4)
        for other, p in confusions.get(i, {character: 0.9}).items():
            row[symbols.encode(other)[0]] = p
        blank = np.full(symbols.NUM_SYMBOLS, 1e-4)
        blank[symbols.BLANK] = 0.99
        rows += [row / row.sum(), blank / blank.sum()]
    return np.log(np.array(rows))


def test_the_word_model_picks_the_word_the_audio_leaves_open(word_model):
    """The audio makes "cot" a little likelier; the word model knows "cat"."""
    log_probs = spelled("call the cat ", {10: {"o": 0.46, "a": 0.44}})
    acoustic = beam.BeamConfig(width=8, alpha=0.0, beta=0.0)
    assert beam.transcribe(log_probs, acoustic, hop_s=HOP_S, lm=word_model).text == "call the cot"
    weighted = beam.BeamConfig(width=8, alpha=1.0, beta=0.0)
    assert beam.transcribe(log_probs, weighted, hop_s=HOP_S, lm=word_model).text == "call the cat"


def test_the_word_score_is_alpha_log_p_plus_beta_per_word(word_model):
    """The best prefix's word score counts its completed words, final ones included
    ("zz" is still open: `closing` scores it and the sentence's end)."""
    config = beam.BeamConfig(width=4, alpha=0.7, beta=0.3)
    decoder = beam.BeamDecoder(config, hop_s=HOP_S, lm=word_model)
    decoder.step(spelled("call me zz", {}))
    expected = 0.7 * word_model.log_prob("call", [lm.BOS]) + 0.3
    expected += 0.7 * word_model.log_prob("me", [lm.BOS, "call"]) + 0.3
    labels, _, score = decoder.hypotheses()[0]
    assert labels.endswith("me zz") or labels == "zz"
    assert score == pytest.approx(expected)
    closing = 0.7 * word_model.log_prob("zz", ["call", "me"]) + 0.3
    closing += 0.7 * word_model.log_prob(lm.EOS, ["me", "zz"])
    assert decoder.scorer.closing(decoder.state.prefixes[labels]) == pytest.approx(closing)


def test_max_delay_bounds_the_wait_for_a_word_the_prefixes_disagree_on():
    """Two spellings of the first word tie and live on side by side: without a bound
    its words wait for the end of the stream; with one, every word is final within
    `max_delay_s` (and a frame) of its SPACE, and the text is the same."""
    text = "xa bb cc dd ee ff "
    log_probs = spelled(text, {1: {"a": 0.45, "o": 0.45}})
    unbounded = beam.BeamConfig(width=8, alpha=0, beta=0, max_delay_s=None)
    steps, closed, _ = streamed(log_probs, unbounded, [len(log_probs)])
    assert steps == [[]] and len(closed) == 6
    bounded = beam.BeamConfig(width=8, alpha=0, beta=0, max_delay_s=0.1)
    found = beam.transcribe(log_probs, bounded, hop_s=HOP_S)
    assert found.text == " ".join(w.word for w in closed)
    spaces = [2 * i + 1 for i, c in enumerate(text) if c == " "]  # the SPACEs' frames
    for word, space in zip(found.words, spaces, strict=True):
        assert word.emitted <= (space + 1) * HOP_S + 0.1 + HOP_S + 1e-9, word


def test_blocks_are_checked_and_a_closed_decoder_takes_no_more():
    decoder = beam.BeamDecoder(beam.BeamConfig(), hop_s=HOP_S)
    with pytest.raises(ValueError, match=r"shape \(4, 29\), expected \[frames, 30\]"):
        decoder.step(np.zeros((4, 29)))
    with pytest.raises(ValueError, match="not logits"):
        decoder.step(np.ones((2, 30)))
    with pytest.raises(ValueError, match="NaN"):
        decoder.step(np.full((2, 30), np.nan))
    with pytest.raises(ValueError, match="frame 0 leaves no prefix"):
        decoder.step(np.full((1, 30), -np.inf))
    assert decoder.step(np.zeros((0, 30))) == [] and decoder.close() == []
    with pytest.raises(RuntimeError, match="closed"):
        decoder.step(np.zeros((1, 30)))
    with pytest.raises(ValueError, match="BeamConfig.width"):
        beam.BeamConfig(width=0)
    with pytest.raises(ValueError, match="BeamConfig.prune_log_prob"):
        beam.BeamConfig(prune_log_prob=1.0)
    with pytest.raises(ValueError, match="BeamConfig.max_delay_s"):
        beam.BeamConfig(max_delay_s=-1.0)
    with pytest.raises(ValueError, match="hop_s"):
        beam.BeamDecoder(beam.BeamConfig(), hop_s=0)
