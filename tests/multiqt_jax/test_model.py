"""MultiQT model: the streaming contract for every fusion and modality, causality,
modality dropout and missing modalities, the precision policy (float32 matmuls by
default), and clear errors on bad input."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from multiqt_jax import model
from speechkit import accelerator, streaming

HIGHEST = (jax.lax.Precision.HIGHEST, jax.lax.Precision.HIGHEST)

SMALL = dict(
    num_classes=4,
    audio_channels=(8, 8, 8),
    audio_kernels=(3, 3, 3),
    audio_strides=(1, 2, 2),
    audio_dilations=(1, 1, 2),
    text_channels=(8, 8),
    text_kernels=(3, 3),
    text_strides=(2, 1),
    text_dilations=(1, 2),
    fusion_size=4,
    dense=(16,),
)
SETTINGS = [{"fusion": fusion, "modalities": ("audio", "text")} for fusion in model.FUSIONS] + [
    {"modalities": ("audio",)},
    {"modalities": ("text",)},
]


def _setup(seed=0, outputs=23, batch=2, **overrides):
    config = model.MultiQTConfig(**{**SMALL, **overrides})
    rng = np.random.default_rng(seed)
    audio = rng.normal(size=(batch, outputs * 4 - 1, 40)).astype(np.float32)
    text = rng.random((batch, outputs * 2, 29)).astype(np.float32)
    net = model.MultiQT(config)
    params = net.init(jax.random.key(seed), {"audio": audio, "text": text})
    return config, net, params, audio, text


@pytest.mark.parametrize(
    "setting", SETTINGS, ids=lambda s: "+".join(s["modalities"]) + "-" + s.get("fusion", "")
)
def test_streaming_over_random_block_partitions_equals_the_whole_call(setting):
    """The shared contract check, with a missing modality in one example and frames
    masked at the end of one example."""
    config, net, params, audio, text = _setup(**setting)
    present = np.array([[True, True], [True, False]]) if len(config.modalities) == 2 else None
    inputs = {"audio": audio, "text": text}
    outputs, out_mask = net.apply(params, inputs, None, present)
    assert outputs["logits"].shape == (2, 23, 4) and out_mask.all()
    assert streaming.check_contract(net, params, inputs, None, present) <= 1e-5
    if setting.get("fusion") in ("concat", None):  # masked frames: one fusion suffices
        mask = {"audio": np.arange(91) < [[91], [60]], "text": np.arange(46) < [[46], [30]]}
        assert streaming.check_contract(net, params, inputs, mask, present, seed=1) <= 1e-5
        _, masked = net.apply(params, inputs, mask, present)
        assert masked[0].all() and not masked[1, 15:].any()


def test_the_contract_check_catches_a_step_that_breaks_it():
    config, net, params, audio, text = _setup()

    class Leaky(model.MultiQT):  # forgets the convolution buffers between blocks
        def step(self, inputs, mask, state, present=None):
            fresh = self.initial_state(np.shape(inputs["audio"])[0])
            return super().step(inputs, mask, fresh, present)

    with pytest.raises(AssertionError, match="logits differs by"):
        streaming.check_contract(Leaky(config), params, {"audio": audio, "text": text})


def _programs(net, params, audio, text):
    """The model's jaxprs: whole call, one step, streamed scan and training gradient."""
    inputs = {"audio": audio, "text": text}
    state = net.apply(params, 2, method=net.initial_state)
    runner = streaming.BlockRunner.for_model(net, params, block_outputs=2)
    widths = {"audio": 40, "text": 29}
    blocks = {
        name: np.zeros((3, 2, frames, widths[name]), np.float32)
        for name, frames in runner.block_frames.items()
    }
    block_masks = {name: np.ones(value.shape[:3], bool) for name, value in blocks.items()}

    def loss(params):
        outputs, _ = net.apply(params, inputs, training=True, rngs={"dropout": jax.random.key(0)})
        return outputs["logits"].sum()

    step = functools.partial(net.apply, method=net.step)
    first = {"audio": audio[:, :8], "text": text[:, :4]}
    return {
        "call": jax.make_jaxpr(net.apply)(params, inputs),
        "step": jax.make_jaxpr(step)(params, first, None, state),
        "scan": jax.make_jaxpr(runner._scan)(blocks, block_masks, ()),
        "grad": jax.make_jaxpr(jax.grad(loss))(params),
    }


@pytest.mark.parametrize(
    "setting", SETTINGS, ids=lambda s: "+".join(s["modalities"]) + "-" + s.get("fusion", "")
)
def test_every_matmul_and_convolution_is_float32_under_the_default_policy(setting):
    """On CPU float32 is exact anyway; this pins what a GPU or TPU is asked for, even
    inside a caller's lower-precision context (the policy's scope is innermost)."""
    config, net, params, audio, text = _setup(**setting)
    assert config.precision == "highest"
    with jax.default_matmul_precision("bfloat16"):
        programs = _programs(net, params, audio, text)
    for name, jaxpr in programs.items():
        found = accelerator.matmul_precisions(jaxpr)
        assert found, name
        assert all(precision == HIGHEST for _, precision in found), (name, found)
    for program in (net.apply, jax.jit(net.apply)):
        hlo = jax.jit(program).lower(params, {"audio": audio, "text": text}).as_text()
        ops = [line for line in hlo.splitlines() if "stablehlo.convolution" in line]
        ops += [line for line in hlo.splitlines() if "stablehlo.dot_general" in line]
        assert ops and all("HIGHEST" in line for line in ops)


def test_faster_precisions_are_passed_on_and_bad_ones_named():
    config, _, params, audio, text = _setup(fusion="tensor")
    net = model.MultiQT(dataclasses.replace(config, precision="default"))
    for name, jaxpr in _programs(net, params, audio, text).items():
        assert {precision for _, precision in accelerator.matmul_precisions(jaxpr)} == {None}, name
    net = model.MultiQT(dataclasses.replace(config, precision="high"))
    inputs = {"audio": audio, "text": text}
    found = accelerator.matmul_precisions(jax.make_jaxpr(net.apply)(params, inputs))
    assert {precision for _, precision in found} == {(jax.lax.Precision.HIGH,) * 2}
    with pytest.raises(ValueError, match=r"precision: expected one of \('highest', 'high'"):
        model.MultiQTConfig(num_classes=3, precision="tf32")


def test_outputs_are_causal_with_the_declared_receptive_field():
    config, net, params, audio, text = _setup(batch=1)
    spec = model.streaming_spec(config)
    frame = 12

    def output(audio, text):
        return net.apply(params, {"audio": audio, "text": text})[0]["logits"][0, frame].sum()

    audio_grad, text_grad = jax.grad(output, argnums=(0, 1))(jnp.asarray(audio), jnp.asarray(text))
    seen_audio = np.flatnonzero(np.abs(audio_grad[0]).sum(axis=1) > 0)
    seen_text = np.flatnonzero(np.abs(text_grad[0]).sum(axis=1) > 0)
    audio_spec, text_spec = spec.inputs["audio"], spec.inputs["text"]
    last = frame * audio_spec.block
    assert seen_audio.max() == last
    assert seen_audio.min() == last - audio_spec.receptive_field + 1
    assert seen_text.max() == frame * text_spec.block
    assert seen_text.min() == frame * text_spec.block - text_spec.receptive_field + 1


def test_a_missing_modality_is_ignored_and_modality_dropout_drops_one():
    config, net, params, audio, text = _setup(dropout=0.0, modality_dropout=1.0)

    def logits(text, present=None, **kwargs):
        return net.apply(params, {"audio": audio, "text": text}, None, present, **kwargs)[0][
            "logits"
        ]

    without_text = np.array([[True, False]] * 2)
    first = logits(text, without_text)
    np.testing.assert_allclose(first, logits(text[::-1].copy(), without_text), atol=1e-6)
    without_audio = logits(text, np.array([[False, True]] * 2))
    dropped = logits(text, training=True, rngs={"dropout": jax.random.key(3)})
    for row in range(2):
        assert np.allclose(dropped[row], first[row], atol=1e-6) or np.allclose(
            dropped[row], without_audio[row], atol=1e-6
        )


def test_bad_input_is_named():
    config, net, params, audio, text = _setup()
    with pytest.raises(ValueError, match=r"audio \(2, 91, 40\) and text \(2, 40, 29\) disagree"):
        net.apply(params, {"audio": audio, "text": text[:, :40]})
    with pytest.raises(
        ValueError, match=r"inputs\['text'\]: shape \(2, 46, 30\), expected \[batch, frames, 29\]"
    ):
        net.apply(params, {"audio": audio, "text": np.zeros((2, 46, 30), np.float32)})
    with pytest.raises(ValueError, match=r"inputs: expected a dict with \['audio', 'text'\]"):
        net.apply(params, {"audio": audio})
    broken = audio.copy()
    broken[1, 5, 7] = np.nan
    with pytest.raises(
        ValueError,
        match=r"inputs\['audio'\]: shape \(2, 91, 40\) holds non-finite values "
        r"\(first at \[1, 5, 7\]\)",
    ):
        streaming.BlockRunner.for_model(net, params).run({"audio": broken, "text": text})
    with pytest.raises(ValueError, match="fusion: expected one of"):
        model.MultiQTConfig(num_classes=3, fusion="product")
    with pytest.raises(ValueError, match="must reach one output hop"):
        model.MultiQTConfig(num_classes=3, text_strides=(1, 1, 1, 1))
    with pytest.raises(ValueError, match="modalities"):
        model.MultiQTConfig(num_classes=3, modalities=("video",))


def test_describe_names_size_and_rate():
    config = model.MultiQTConfig(num_classes=9)
    inputs = {"audio": np.zeros((1, 40, 40), np.float32), "text": np.zeros((1, 20, 29), np.float32)}
    params = model.MultiQT(config).init(jax.random.key(0), inputs)
    line = model.describe(config, params)
    assert f"{model.parameter_count(params):,} parameters" in line
    assert "every 40 ms (25 Hz)" in line and "1.13 s audio / 1.14 s text" in line
    assert line.endswith("highest precision")
