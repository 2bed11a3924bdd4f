"""The CTC recogniser: the streaming contract, its declared receptive field, the precision
policy, parameter counts in closed form, greedy decoding (streamed equals whole, emission
times) and its bundle. Nothing here needs Grain: the device check (`benchmarks.gpu_check`)
runs this file on a machine without it. The input pipeline, training and the recogniser's
caches, which need it, are tests/ctc_jax/test_input_pipeline.py's."""

import dataclasses
import functools
import json

import jax
import numpy as np
import pytest

from ctc_jax import decode, model, symbols, train
from speechkit import accelerator, asr, streaming
from speechkit.augment import MaskConfig

HIGHEST = (jax.lax.Precision.HIGHEST, jax.lax.Precision.HIGHEST)


SMALL = model.CtcConfig(channels=16, stem_kernel=3, kernels=(3, 3, 2), dilations=(1, 2, 4))


def _setup(config=SMALL, frames=91, batch=2, seed=0):
    audio = np.random.default_rng(seed).normal(size=(batch, frames, 40)).astype(np.float32)
    net = model.CtcRecogniser(config)
    return net, net.init(jax.random.key(seed), {"audio": audio}), audio


def test_streaming_over_random_block_partitions_equals_the_whole_call():
    net, params, audio = _setup()
    outputs, out_mask = net.apply(params, {"audio": audio})
    assert outputs["logits"].shape == (2, 46, symbols.NUM_SYMBOLS) and out_mask.all()
    assert streaming.check_contract(net, params, {"audio": audio}) <= 1e-5
    mask = {"audio": np.arange(91) < np.array([[91], [50]])}
    assert streaming.check_contract(net, params, {"audio": audio}, mask, seed=1) <= 1e-5
    _, masked = net.apply(params, {"audio": audio}, mask)
    assert masked[0].all() and masked[1, :25].all() and not masked[1, 25:].any()


def test_outputs_are_causal_with_the_declared_receptive_field():
    net, params, audio = _setup(batch=1, frames=200)
    spec = model.streaming_spec(SMALL)
    field = spec.inputs["audio"].receptive_field
    assert (spec.output_hop_s, spec.output_latency, spec.inputs["audio"].block) == (0.02, 0, 2)
    assert field == 1 + (3 - 1) + 2 * ((3 - 1) * 1 + (3 - 1) * 2 + (2 - 1) * 4)
    base = net.apply(params, {"audio": audio})[0]["logits"]
    t = 60  # output frame t depends on audio frames 2t - field + 1 .. 2t
    for frame, changes in ((2 * t + 1, False), (2 * t, True), (2 * t - field + 1, True)):
        changed = audio.copy()
        changed[0, frame] += 10.0
        logits = net.apply(params, {"audio": changed})[0]["logits"]
        assert bool(np.abs(logits[0, t] - base[0, t]).max() > 1e-6) == changes, frame
    changed = audio.copy()
    changed[0, 2 * t - field] += 10.0
    logits = net.apply(params, {"audio": changed})[0]["logits"]
    np.testing.assert_array_equal(logits[0, t], base[0, t])


def test_every_matmul_and_convolution_is_float32_under_the_default_policy():
    net, params, audio = _setup()
    state = net.apply(params, 2, method=net.initial_state)
    batch = _batch(audio)

    def loss(params):
        return train.loss(net, params, batch, jax.random.key(0), MaskConfig(1, 4, 1, 5))

    with jax.default_matmul_precision("bfloat16"):
        programs = {
            "call": jax.make_jaxpr(net.apply)(params, {"audio": audio}),
            "step": jax.make_jaxpr(functools.partial(net.apply, method=net.step))(
                params, {"audio": audio[:, :8]}, None, state
            ),
            "grad": jax.make_jaxpr(jax.grad(loss))(params),
        }
    for name, jaxpr in programs.items():
        found = accelerator.matmul_precisions(jaxpr)
        assert found and all(precision == HIGHEST for _, precision in found), name
    fast = model.CtcRecogniser(dataclasses.replace(SMALL, precision="default"))
    found = accelerator.matmul_precisions(jax.make_jaxpr(fast.apply)(params, {"audio": audio}))
    assert {precision for _, precision in found} == {None}


@pytest.mark.parametrize(
    "config", [SMALL, model.CtcConfig(), model.FULL], ids=["small", "default", "full"]
)
def test_parameter_parts_count_the_initialised_parameters(config):
    shapes = jax.eval_shape(
        model.CtcRecogniser(config).init, jax.random.key(0), {"audio": np.zeros((1, 8, 40))}
    )
    leaves = jax.tree_util.tree_leaves(shapes)
    parts = config.parameter_parts().values()
    assert sum(arrays for arrays, _ in parts) == len(leaves)
    assert sum(scalars for _, scalars in parts) == sum(int(np.prod(leaf.shape)) for leaf in leaves)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"kernels": (3, 3), "dilations": (1,)}, r"kernels / CtcConfig.dilations: expected equal"),
        ({"dilations": (1, 2, 10**6)}, r"CtcConfig.dilations\[2\]"),
        ({"channels": 0}, r"CtcConfig.channels"),
        ({"precision": "tf32"}, r"precision: expected one of"),
    ],
)
def test_bad_configs_are_named(change, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(SMALL, **change)


def test_bad_inputs_are_named():
    net, params, audio = _setup()
    with pytest.raises(ValueError, match=r"inputs\['audio'\]: shape \(2, 91, 39\)"):
        net.apply(params, {"audio": audio[..., :39]})
    with pytest.raises(ValueError, match=r"expected a dict with 'audio'"):
        net.apply(params, {"text": audio})


def test_symbols_round_trip_and_share_the_text_streams_columns():
    text = symbols.normalise_text("It's Main Street, 12!")
    assert text == "it's main street"
    ids = symbols.encode(text)
    assert symbols.decode_ids(ids) == text and ids[4] == symbols.SPACE
    assert symbols.NUM_SYMBOLS == asr.NUM_SYMBOLS + 1
    rendered = asr.char_frames([asr.TimedWord("it's", 0.0, 0.2)], 10)
    assert [int(np.argmax(row)) for row in rendered[::3][:3]] == list(symbols.encode("it's"))[:3]
    assert symbols.encode("a\u00e9")[1] == symbols.UNKNOWN


def _logits(best: list[int], num_symbols: int = symbols.NUM_SYMBOLS) -> np.ndarray:
    return np.eye(num_symbols, dtype=np.float32)[best][None] * 5.0


def test_greedy_decoding_collapses_repeats_and_times_each_character():
    # "ab b" then blank: a a _ b _ b SPACE b b _
    a, b, space = symbols.encode("ab ")
    best = [a, a, 0, b, 0, b, space, b, b, 0]
    emit, symbol = decode.greedy(_logits(best))
    assert np.flatnonzero(emit[0]).tolist() == [0, 3, 5, 6, 7]
    transcript = decode.transcribe(emit[0], symbol[0], hop_s=0.02)
    assert transcript.text == "abb b"
    assert [t for _, t in transcript.chars] == [0.02, 0.08, 0.12, 0.14, 0.16]
    assert transcript.words == (
        asr.TimedWord("abb", 0.0, 0.12, 0.12),
        asr.TimedWord("b", 0.14, 0.16, 0.16),
    )


def test_masked_frames_emit_nothing_and_streamed_decoding_equals_whole():
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(3, 57, symbols.NUM_SYMBOLS)).astype(np.float32)
    logits[..., 0] += 1.0  # mostly blank, with repeats
    mask = rng.random((3, 57)) < 0.8
    emit, symbol = decode.greedy(logits, mask)
    assert not np.asarray(emit)[~mask].any()
    for trial in range(3):
        sizes = streaming.partition(np.random.default_rng(trial), 57)
        state, pieces, start = decode.initial_state(3), [], 0
        for size in sizes:
            piece, _, state = decode.step(
                logits[:, start : start + size], mask[:, start : start + size], state
            )
            pieces.append(np.asarray(piece))
            start += size
        np.testing.assert_array_equal(np.concatenate(pieces, axis=1), emit)


def test_error_rates_count_characters_and_words():
    rates = decode.error_rates(["call me back", "yes"], ["call be back", "yes"])
    assert rates == {"cer": pytest.approx(1 / 15), "wer": pytest.approx(1 / 4)}


def _batch(audio):
    labels = np.zeros((audio.shape[0], audio.shape[1] // 4), np.int32)
    labels[:, :3] = symbols.encode("yes")
    label_mask = labels > 0
    return {
        "audio": audio,
        "audio_mask": np.ones(audio.shape[:2], bool),
        "labels": labels,
        "label_mask": label_mask,
        "example_mask": np.ones(audio.shape[0], bool),
    }


def test_a_bundle_round_trips_and_refuses_a_config_that_does_not_fit(tmp_path):

    from ctc_jax import bundle
    from speechkit.bundle import BundleError

    net, params, audio = _setup()
    folder = bundle.save(tmp_path / "bundle", net, params, corpus="toy")
    loaded, loaded_params, info = bundle.load(folder)
    assert loaded.config == SMALL and list(info.labels[:2]) == ["_", "a"] and info.labels[-1] == " "
    np.testing.assert_array_equal(
        loaded.apply(loaded_params, {"audio": audio})[0]["logits"],
        net.apply(params, {"audio": audio})[0]["logits"],
    )
    manifest = json.loads((folder / "bundle.json").read_text())
    for path, value, message in [
        (("model_config", "dilations"), [1, 2, 10**6], r"model_config: CtcConfig.dilations\[2\]"),
        (("model_config", "channels"), 17, r"params.npz"),
        (("labels",), ["x"] * 30, r"labels: expected the 30 symbols"),
    ]:
        edited = json.loads(json.dumps(manifest))
        node = edited
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        (folder / "bundle.json").write_text(json.dumps(edited))
        with pytest.raises(BundleError, match=message):
            bundle.load(folder)


def test_text_posteriors_fold_the_word_boundary_into_blank_and_sum_to_one():
    logits = np.random.default_rng(2).normal(size=(2, 7, symbols.NUM_SYMBOLS)) * 3
    found = np.asarray(decode.text_posteriors(logits))
    assert found.shape == (2, 7, asr.NUM_SYMBOLS) and found.dtype == np.float32
    np.testing.assert_allclose(found.sum(-1), 1.0, rtol=1e-6)
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(found[..., 1:], probabilities[..., 1 : asr.NUM_SYMBOLS], rtol=1e-5)
    np.testing.assert_allclose(
        found[..., symbols.BLANK],
        probabilities[..., symbols.BLANK] + probabilities[..., symbols.SPACE],
        rtol=1e-5,
    )
