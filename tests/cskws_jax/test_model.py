"""AF-KWS model: the streaming contract (random block partitions), look-ahead and
receptive field as declared, the precision policy (float32 matmuls by default), bad
input."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cskws_jax import model
from cskws_jax.streaming import StreamDetector
from speechkit import accelerator, streaming

SMALL = model.AfKwsConfig(
    num_keywords=3,
    stem_channels=8,
    stages=(model.Stage(8, 2, 1), model.Stage(12, 2, 2, dilation=2)),
    head_channels=8,
    delay=3,
)


@pytest.fixture(scope="module")
def small():
    net = model.AfKws(SMALL)
    features = np.random.default_rng(0).normal(size=(2, 157, 64)).astype(np.float32)
    return net, net.init(jax.random.key(0), {"audio": features}), features


@pytest.mark.parametrize("unknown_class", [True, False])
def test_heads_have_the_documented_shapes(unknown_class):
    config = model.AfKwsConfig(num_keywords=5, unknown_class=unknown_class)
    net = model.AfKws(config)
    features = jnp.zeros((2, 403, 64))
    inputs = {"audio": features}
    outputs, mask = net.apply(net.init(jax.random.key(0), inputs), inputs)
    assert outputs["heatmap"].shape == (2, 101, 5 + unknown_class)
    assert outputs["length"].shape == outputs["offset"].shape == mask.shape == (2, 101)
    assert np.all((outputs["offset"] >= 0) & (outputs["offset"] <= 1))
    assert np.all(outputs["length"] >= 0)


def test_streaming_over_random_partitions_equals_the_whole_call(small):
    """The shared contract check, with the end of one example masked."""
    net, params, features = small
    mask = np.ones(features.shape[:2], bool)
    mask[1, 120:] = False
    assert streaming.check_contract(net, params, {"audio": features}) <= 1e-5
    assert streaming.check_contract(net, params, {"audio": features}, {"audio": mask}) <= 1e-5
    _, out_mask = net.apply(params, {"audio": features}, {"audio": mask})
    assert out_mask[0].all() and out_mask[1, :30].all() and not out_mask[1, 30:].any()


def test_streaming_contract_holds_with_a_normalised_input(small):
    """The normaliser's running means travel in the stream's state (after a cepstral
    smoothing of each frame)."""
    _, _, features = small
    config = dataclasses.replace(SMALL, normalise="cmvn", normalise_time_s=0.2, envelope=24)
    net = model.AfKws(config)
    params = net.init(jax.random.key(0), {"audio": features})
    mask = np.ones(features.shape[:2], bool)
    mask[1, 120:] = False
    assert streaming.check_contract(net, params, {"audio": features - 4}, {"audio": mask}) <= 1e-5
    louder = net.apply(params, {"audio": features + 2.0})[0]["heatmap"]
    np.testing.assert_allclose(  # a level change is normalised away
        louder, net.apply(params, {"audio": features})[0]["heatmap"], atol=1e-4
    )
    with pytest.raises(ValueError, match="AfKwsConfig.normalise"):
        dataclasses.replace(SMALL, normalise="loudness")
    with pytest.raises(ValueError, match="AfKwsConfig.envelope"):
        dataclasses.replace(SMALL, envelope=65)


def test_streaming_contract_holds_with_a_frequency_stem(small):
    """2-D convolutions over (time, band) before the stem stream like the rest; their
    parameters are counted in closed form and their frames in the receptive field."""
    _, _, features = small
    config = dataclasses.replace(SMALL, frequency_stem=(4, 3))
    net = model.AfKws(config)
    params = net.init(jax.random.key(0), {"audio": features})
    mask = np.ones(features.shape[:2], bool)
    mask[1, 120:] = False
    assert streaming.check_contract(net, params, {"audio": features}, {"audio": mask}) <= 1e-5
    parts = config.parameter_parts()
    assert sum(arrays for arrays, _ in parts.values()) == len(jax.tree.leaves(params))
    assert sum(scalars for _, scalars in parts.values()) == sum(
        leaf.size for leaf in jax.tree.leaves(params)
    )
    assert config.stem_inputs == 16 * 3
    _check_receptive_field(net, params, features, config)
    with pytest.raises(ValueError, match=r"AfKwsConfig.frequency_stem\[1\]"):
        dataclasses.replace(SMALL, frequency_stem=(4, 0))


def test_look_ahead_and_receptive_field_are_as_declared(small):
    net, params, features = small
    _check_receptive_field(net, params, features, SMALL)


def _check_receptive_field(net, params, features, config):
    spec = model.streaming_spec(config)
    audio = spec.inputs["audio"]
    assert spec.output_latency == config.delay and spec.output_hop_s == 0.04
    position = 30

    def heat(features):
        return net.apply(params, {"audio": features})[0]["heatmap"][0, position].sum()

    grad = jax.grad(heat)(jnp.asarray(features))
    seen = np.flatnonzero(np.abs(grad[0]).sum(axis=1) > 0)
    assert seen.max() == (position + config.delay) * audio.block
    assert seen.min() == (position + config.delay) * audio.block - audio.receptive_field + 1


def _precisions(net, params, features) -> dict[str, set]:
    """Precisions asked for by the whole call, one step, the streamed detector's scan
    and the gradient of the heads."""
    inputs = {"audio": features}
    state = net.apply(params, 2, method=net.initial_state)
    detector = StreamDetector(net, params, block_outputs=2)
    blocks = {"audio": np.zeros((3, 2, detector.block_frames["audio"], 64), np.float32)}
    block_masks = {"audio": np.ones(blocks["audio"].shape[:3], bool)}
    step = functools.partial(net.apply, method=net.step)

    def heat(params):
        return net.apply(params, inputs)[0]["heatmap"].sum()

    programs = {
        "call": jax.make_jaxpr(net.apply)(params, inputs),
        "step": jax.make_jaxpr(step)(params, {"audio": features[:, :8]}, None, state),
        "scan": jax.make_jaxpr(detector._scan)(blocks, block_masks, ()),
        "grad": jax.make_jaxpr(jax.grad(heat))(params),
    }
    found = {name: accelerator.matmul_precisions(jaxpr) for name, jaxpr in programs.items()}
    assert all(found.values())
    return {name: {precision for _, precision in ops} for name, ops in found.items()}


def test_every_matmul_and_convolution_is_float32_under_the_default_policy(small):
    """On CPU float32 is exact anyway; this pins what a GPU or TPU is asked for, even
    inside a caller's lower-precision context."""
    net, params, features = small
    assert SMALL.precision == "highest"
    with jax.default_matmul_precision("bfloat16"):
        found = _precisions(net, params, features)
    highest = (jax.lax.Precision.HIGHEST,) * 2
    assert found == dict.fromkeys(found, {highest})
    hlo = jax.jit(net.apply).lower(params, {"audio": features}).as_text().splitlines()
    ops = [line for line in hlo if "stablehlo.convolution" in line or "stablehlo.dot_gen" in line]
    assert ops and all("HIGHEST" in line for line in ops)


def test_faster_precisions_are_passed_on_and_bad_ones_named(small):
    _, params, features = small
    net = model.AfKws(dataclasses.replace(SMALL, precision="default"))
    found = _precisions(net, params, features)
    assert found == dict.fromkeys(found, {None})
    with pytest.raises(ValueError, match=r"precision: expected one of \('highest', 'high'"):
        model.AfKwsConfig(precision="float32")


def test_bad_input_is_named(small):
    net, params, _ = small
    with pytest.raises(
        ValueError, match=r"features: shape \(1, 40, 63\), expected \[batch, frames, 64\]"
    ):
        net.apply(params, {"audio": np.zeros((1, 40, 63), np.float32)})
    with pytest.raises(ValueError, match=r"inputs: expected a dict with 'audio', got ndarray"):
        net.apply(params, np.zeros((1, 40, 64), np.float32))
    with pytest.raises(ValueError, match="num_keywords"):
        model.AfKwsConfig(num_keywords=0)
    assert "look-ahead 0.12 s, highest precision" in model.describe(SMALL, params)


def _init(config):
    audio = jnp.zeros((1, 16, config.features), jnp.float32)
    return model.AfKws(config).init(jax.random.key(7), {"audio": audio})


@pytest.mark.parametrize("trained_unknown, unknown", [(True, True), (True, False), (False, True)])
def test_warm_start_keeps_the_layers_and_the_known_keywords_columns(
    tiny_afkws_config, trained_unknown, unknown
):
    from speechkit.bundle import flatten, unflatten

    trained_config = dataclasses.replace(tiny_afkws_config(3), unknown_class=trained_unknown)
    trained = flatten(_init(trained_config))
    trained = {name: np.asarray(value) + 1.0 for name, value in trained.items()}  # not fresh
    new_config = dataclasses.replace(tiny_afkws_config(2), unknown_class=unknown)
    fresh = _init(new_config)
    started = model.warm_start(
        unflatten(trained),
        ["alpha", "beta", "gamma"],
        fresh,
        ["gamma", "delta"],
        trained_unknown,
        unknown,
    )
    assert jax.tree.structure(started) == jax.tree.structure(fresh)
    got, new = flatten(started), flatten(fresh)
    for name, value in got.items():
        if not name.startswith(model.HEATMAP):
            np.testing.assert_array_equal(value, trained[name])
    for leaf in ("kernel", "bias"):
        column, old, initial = (t[model.HEATMAP + leaf] for t in (got, trained, new))
        assert column.shape[-1] == 2 + unknown
        np.testing.assert_array_equal(column[..., 0], old[..., 2])  # gamma, known
        np.testing.assert_array_equal(column[..., 1], initial[..., 1])  # delta, new
        if unknown:  # the unknown class is kept only when both models have one
            expected = old[..., 3] if trained_unknown else initial[..., 2]
            np.testing.assert_array_equal(column[..., 2], expected)


def test_warm_start_refuses_another_architecture(tiny_afkws_config):
    trained = _init(tiny_afkws_config(2))
    wider = dataclasses.replace(tiny_afkws_config(2), head_channels=16)
    with pytest.raises(ValueError, match="the architectures differ"):
        model.warm_start(trained, ["a", "b"], _init(wider), ["a", "b"], True, True)
    deeper = dataclasses.replace(
        tiny_afkws_config(2), stages=(*tiny_afkws_config(2).stages, model.Stage(8, 1, 1))
    )
    with pytest.raises(ValueError, match="has no parameter"):
        model.warm_start(trained, ["a", "b"], _init(deeper), ["a", "b"], True, True)
