"""experiments.multiqt on smoke data: results, resuming after SIGKILL, device counts."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

MODELS = "multimodal,rf"
# Three folds of the 5 smoke calls: folds of unequal size (two calls, two, one), training
# sets of 3 and 4 calls (an odd one against batches of 2), and on 2 devices two folds on
# one device and a padding slot on the other. Folds unroll on CPU, so fewer compile faster.
FOLDS = 3


def _command(data_dir, workdir, *extra):
    return [
        sys.executable,
        "-m",
        "experiments.multiqt",
        "--config=experiments/configs/multiqt.py:smoke",
        f"--workdir={workdir}",
        f"--config.data_dir={data_dir}",
        "--config.build_missing=False",
        f"--config.models={MODELS}",
        f"--config.num_folds={FOLDS}",
        *extra,
    ]


def _run(data_dir, workdir, devices=1, *extra):
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
    done = subprocess.run(
        _command(data_dir, workdir, *extra), env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((workdir / "results.json").read_text()), done


@pytest.fixture(scope="module")
def reference(smoke_build, tmp_path_factory):
    data_dir, _ = smoke_build
    workdir = tmp_path_factory.mktemp("multiqt")
    results, done = _run(data_dir, workdir)
    return data_dir, results, done


@pytest.mark.slow
def test_smoke_cross_validation_writes_results(reference, check_multiqt_heldout):
    _, results, done = reference
    assert set(results["models"]) == {"multimodal", "rf"}
    for summary in results["models"].values():
        assert len(summary["folds"]) == FOLDS
        for score in ("timestep", "instance"):
            assert set(summary["mean"][score]) == {"precision", "recall", "f1"}
            assert 0 <= summary["mean"][score]["f1"] <= 1
        check_multiqt_heldout(summary, FOLDS)  # neural and baseline alike
        for part in (summary, summary["smoothed"], summary["heldout"]):
            early = part["early_frames"]  # on the 40 ms output clock
            assert (early["margin_s"], early["hop_s"]) == (0.5, 0.04)
            assert 0 <= early["overall"] <= 1 and early["per_class"][0] is None
    assert results["heldout_engine"] and results["heldout_calls"] > 0
    assert "TIMESTEP F1" in done.stdout and "multimodal" in done.stdout
    assert done.stdout.count("  on heldout") == 2
    assert "heldout TIMESTEP F1" in done.stderr


def test_fold_scores_are_gathered_in_fold_order_under_the_given_names():
    from experiments.scoring import calls

    def scores(value):
        return {
            "timestep": {"precision": value, "recall": value, "f1": value},
            "instance": {"precision": 1.0, "recall": 0.5, "f1": value / 2},
            "timestep_f1_per_class": [value, None, 1.0],
        }

    names = ["test/raw", "test/smoothed", "heldout/raw", "heldout/smoothed"]
    mine = {
        fold: {name: scores(fold / 4 + i / 16) for i, name in enumerate(names)} for fold in (0, 2)
    }
    gathered = calls.gather_folds(mine, names, num_folds=3, num_classes=3)
    assert list(gathered) == names
    for i, name in enumerate(names):
        assert len(gathered[name]) == 3
        for fold in (0, 2):
            assert gathered[name][fold] == scores(fold / 4 + i / 16)  # exact in binary
        assert np.isnan(gathered[name][1]["timestep"]["f1"])  # not owned here
        assert gathered[name][1]["timestep_f1_per_class"] == [None] * 3
    # A process that owns no fold still gathers every part it is told of.
    empty = calls.gather_folds({}, names, num_folds=2, num_classes=3)
    assert list(empty) == names and all(len(folds) == 2 for folds in empty.values())


def test_early_frames_travel_with_the_folds_and_pool_over_them():
    import metrics
    from experiments.scoring import calls
    from experiments.scoring.evaluators import tracking

    def scores(early, predicted):
        counts = metrics.EarlyFrameCounts(np.array(early), np.array(predicted))
        return {
            "timestep": {"precision": 0.5, "recall": 0.5, "f1": 0.5},
            "instance": {"precision": 0.5, "recall": 0.5, "f1": 0.5},
            "timestep_f1_per_class": [0.5, 0.5, 0.5],
            "early_frames": tracking.early_frames_record(counts, margin_s=0.5, hop_s=0.04),
        }

    mine = {
        0: {"test/raw": scores([0, 1, 0], [0, 4, 0])},
        1: {"test/raw": scores([0, 2, 6], [0, 4, 6])},
    }
    gathered = calls.gather_folds(mine, ["test/raw"], num_folds=3, num_classes=3)["test/raw"]
    assert gathered[:2] == [mine[0]["test/raw"], mine[1]["test/raw"]]  # exact
    assert gathered[0]["early_frames"]["per_class"] == [None, 0.25, 0.0]  # 0 of 0: 0
    assert "early_frames" not in gathered[2]  # not owned here
    pooled = calls.summarise(gathered[:2])["early_frames"]
    assert (pooled["early"], pooled["predicted"]) == ([0, 3, 6], [0, 8, 6])
    assert pooled["per_class"] == [None, 3 / 8, 1.0] and pooled["margin_s"] == 0.5
    assert pooled["overall"] == float(np.float32(9 / 14))  # the metric's float32
    assert "early_frames" not in calls.summarise(gathered)  # a fold without them


def test_evaluation_summary_transfer_and_cache_check():
    from experiments import common, multiqt
    from experiments.scoring import calls

    def fold(f1):
        return {
            "timestep": {"precision": f1, "recall": f1, "f1": f1},
            "instance": {"precision": f1, "recall": f1, "f1": f1},
            "timestep_f1_per_class": [f1],
        }

    smoothing = {"min_frames": 3, "latency_ms": 80.0}
    summary = calls.summarise_label_streams(
        {"raw": [fold(0.8), fold(0.6)], "smoothed": [fold(0.7), fold(0.7)]}, smoothing
    )
    in_engine_only = json.loads(json.dumps(summary))
    summary["heldout"] = calls.summarise_label_streams(
        {"raw": [fold(0.35), fold(0.35)], "smoothed": [fold(0.3), fold(0.2)]}, smoothing
    )
    summary["transfer"] = calls.transfer(summary, summary["heldout"])
    assert summary["heldout"]["mean"]["timestep"]["f1"] == pytest.approx(0.35)
    assert summary["heldout"]["smoothed"]["mean"]["timestep"]["f1"] == pytest.approx(0.25)
    assert summary["transfer"] == pytest.approx({"timestep_f1": 0.5, "instance_f1": 0.5})
    assert "  on heldout" in calls.table({"audio": summary}, ["heldout"])
    assert "  on heldout" not in calls.table({"audio": summary})
    assert common.transfer_ratio(0.3, 0.0) is None
    assert common.transfer_ratio(float("nan"), 0.5) is None
    # Scores saved without an evaluation are recomputed once the run declares it.
    assert multiqt.reusable(summary, smoothing, ["heldout"])
    assert multiqt.reusable(in_engine_only, smoothing, [])
    assert not multiqt.reusable(in_engine_only, smoothing, ["heldout"])
    assert not multiqt.reusable(summary, {**smoothing, "min_frames": 2}, ["heldout"])


def test_evaluations_come_from_the_config_and_refuse_taken_names():
    from experiments.configs import multiqt as presets
    from experiments.scoring import evals

    config = presets.get_config("smoke")
    (heldout,) = evals.evaluations(config)
    assert heldout == evals.Evaluation("heldout", "heldout", "", optional=True)
    assert heldout.corpus("synthetic_calls/questions-smoke") == "synthetic_calls/questions-smoke"
    assert evals.transfer_key("heldout") == "transfer"
    assert evals.transfer_key("libri") == "transfer_libri"
    config.evals.test = {"split": "test"}
    with pytest.raises(ValueError, match="config.evals.test: the name is taken"):
        evals.evaluations(config)
    config.evals = {"other": {"split": "train", "corpus": "x"}}
    with pytest.raises(ValueError, match="config.evals.other"):
        evals.evaluations(config)


@pytest.mark.slow
def test_offline_text_stream_is_a_separate_reference_row(reference, tmp_path):
    data_dir, results, _ = reference
    offline, done = _run(
        data_dir, tmp_path, 1, "--config.text_stream=offline", "--config.models=multimodal"
    )
    assert "offline text stream" in done.stderr
    assert offline["text_stream"] == "offline" and results["text_stream"] == "causal"
    assert set(offline["models"]) == {"multimodal@offline"}
    assert (tmp_path / "multimodal@offline" / "scores.json").exists()
    # Same model, same seed: only the text input differs, and the scores with it.
    assert offline["models"]["multimodal@offline"] != results["models"]["multimodal"]


def test_the_ctc_recogniser_gives_the_text_of_every_split(reference, tmp_path):
    """text_recogniser="ctc_posteriors": a (random, tiny) CTC bundle's character
    posteriors are the text input, and its words replace pocketsphinx's, on the train
    split and on the held-out engine's calls, both cached beside the corpus ("ctc", its
    words alone, is the main job's: tests/experiments/test_reproduce.py)."""
    import jax

    from ctc_jax import bundle as ctc_bundle
    from ctc_jax import model as ctc_model

    data_dir, results, _ = reference
    config = ctc_model.CtcConfig(channels=8, stem_kernel=3, kernels=(3,), dilations=(1,))
    net = ctc_model.CtcRecogniser(config)
    params = net.init(jax.random.key(0), {"audio": np.zeros((1, 8, 40), np.float32)})
    folder = ctc_bundle.save(tmp_path / "recogniser", net, params)
    ctc, done = _run(
        data_dir,
        tmp_path / "run",
        1,
        "--config.models=multimodal",
        "--config.text_recogniser=ctc_posteriors",
        f"--config.ctc_bundle={folder}",
    )
    assert ctc["text_recogniser"] == "ctc_posteriors" and "heldout" in ctc["models"]["multimodal"]
    assert ctc["models"]["multimodal"] != results["models"]["multimodal"]
    # the text stream's own scores, against the words said: pocketsphinx's beside the
    # untrained recogniser's (every word wrong or missing)
    ours, theirs = results["text_scores"], ctc["text_scores"]
    assert 0 < ours["wer"] < 0.9 and ours["words"] == theirs["words"] > 0
    assert theirs["wer"] >= 0.9 and theirs["cer"] > ours["cer"]
    # Other tests' recognisers share the smoke corpus folder: look for this one's files.
    from experiments.scoring import text_inputs

    digest = text_inputs.ctc_recogniser(str(folder)).digest[:12]
    for kind in ("ctc_words", "ctc_posteriors"):
        cached = sorted((data_dir / "synthetic_calls" / kind).glob(f"*-{digest}.npz"))
        assert [p.name.split("-")[0] for p in cached] == ["heldout", "train"], kind


@pytest.mark.parametrize(
    "change", ["text_stream=offline", "text_lag_s=0.5", "text_substitution_rate=0.2"]
)
def test_posteriors_refuse_what_alters_words(change):
    from experiments import multiqt_setup
    from experiments.configs import multiqt as multiqt_configs

    config = multiqt_configs.get_config("smoke")
    config.text_recogniser = "ctc_posteriors"
    assert multiqt_setup.text_recogniser(config) == "ctc_posteriors"
    field, value = change.split("=")
    setattr(config, field, type(config[field])(value))
    with pytest.raises(ValueError, match="'ctc_posteriors' needs text_stream='causal'"):
        multiqt_setup.text_recogniser(config)


def test_epochs_give_every_fold_its_steps_in_full_batches():
    from experiments import multiqt_folds

    # Batches of 2 from 3 calls: one per epoch (the third call waits for the next).
    assert multiqt_folds.epochs_for(30, 2, [np.arange(3), np.arange(4)]) == 30
    assert multiqt_folds.epochs_for(30, 2, [np.arange(8)]) == 8
    with pytest.raises(ValueError, match="batch_size=4: fold 1 trains on only 3 call"):
        multiqt_folds.epochs_for(10, 4, [np.arange(5), np.arange(3)])


def test_text_stream_must_be_causal_or_offline():
    from ml_collections import ConfigDict

    from experiments import multiqt_setup

    with pytest.raises(ValueError, match=r"config.text_stream: expected one of .*'live'"):
        multiqt_setup.causal_text(ConfigDict({"text_stream": "live"}))


@pytest.mark.slow
@pytest.mark.parametrize("devices", [2, FOLDS])
def test_results_do_not_depend_on_the_device_count(reference, tmp_path, devices):
    data_dir, results, _ = reference
    again, done = _run(data_dir, tmp_path, devices)
    assert f"{devices} device(s)" in done.stderr
    assert again == results


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_same_results(reference, tmp_path):
    data_dir, results, _ = reference
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=1"}
    process = subprocess.Popen(
        _command(data_dir, tmp_path), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    first_checkpoint = tmp_path / "multimodal" / "checkpoints" / "10"
    deadline = time.time() + 300
    while not first_checkpoint.exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, "the run ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (tmp_path / "results.json").exists()
    resumed, done = _run(data_dir, tmp_path)
    assert "resumed at step" in done.stderr
    assert resumed == results


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_two_processes_give_the_single_process_results(reference, tmp_path):
    data_dir, results, _ = reference
    address = f"127.0.0.1:{_free_port()}"
    processes = []
    for process_id in range(2):
        env = {
            **os.environ,
            "XLA_FLAGS": "--xla_force_host_platform_device_count=1",
            "JAX_COORDINATOR_ADDRESS": address,
            "JAX_NUM_PROCESSES": "2",
            "JAX_PROCESS_ID": str(process_id),
        }
        processes.append(
            subprocess.Popen(
                _command(data_dir, tmp_path),
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outputs = [process.communicate(timeout=600) for process in processes]
    for process, (_, stderr) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, stderr[-3000:]
    assert "in 2 processes" in outputs[0][1]
    # Each process fed only its own folds (the baseline logs the folds it scored).
    assert "rf: fold 0" in outputs[0][1] and "rf: fold 0" not in outputs[1][1]
    assert "rf: fold 2" in outputs[1][1] and "rf: fold 2" not in outputs[0][1]
    assert json.loads((tmp_path / "results.json").read_text()) == results


def test_chosen_folds_alone_are_trained_scored_and_named(reference, tmp_path):
    data_dir, results, _ = reference
    chosen, done = _run(data_dir, tmp_path, 1, "--config.folds=2", "--config.models=multimodal")
    summary = chosen["models"]["multimodal"]
    assert summary["trained_folds"] == [2] and "trained_folds" not in results["models"]["rf"]
    assert len(summary["folds"]) == len(summary["heldout"]["folds"]) == 1
    assert sorted(p.name for p in (tmp_path / "multimodal").glob("bundle-fold*")) == [
        "bundle-fold2"
    ]
    assert "(training 2)" in done.stderr
    with open(tmp_path / "multimodal" / "scores.json") as saved:  # reused only for folds "2"
        from experiments import multiqt

        scores = json.load(saved)
    smoothing = scores["smoothed"]["smoothing"]
    assert multiqt.reusable(scores, smoothing, ["heldout"], [2])
    assert not multiqt.reusable(scores, smoothing, ["heldout"], None)


@pytest.mark.parametrize("folds", ["5", "0,0", "x", "-1"])
def test_chosen_folds_must_be_distinct_fold_ids(folds):
    import ml_collections

    from experiments import multiqt_folds

    config = ml_collections.ConfigDict({"num_folds": 5, "folds": folds})
    with pytest.raises(ValueError, match="expected distinct fold ids below config.num_folds=5"):
        multiqt_folds.trained_folds(config)
    assert multiqt_folds.trained_folds(
        ml_collections.ConfigDict({"num_folds": 3, "folds": ""})
    ) == [
        0,
        1,
        2,
    ]


def test_chosen_folds_get_the_full_runs_calls_weights_and_keys(smoke_build, tmp_path):
    """A trainer of folds "2,0" gives each fold the batches, class weights and step keys
    that the full cross-validation's trainer gives it (padding aside: module docstring)."""
    from experiments import fingerprint, folds, multiqt_folds, multiqt_setup
    from experiments.configs import multiqt as presets

    data_dir, _ = smoke_build

    def trainer(chosen: str, workdir):
        config = presets.get_config("smoke")
        config.data_dir, config.build_missing = str(data_dir), False
        config.num_folds, config.folds = FOLDS, chosen
        source, index = multiqt_setup.load_corpus(config)
        fold_ids = index.folds % config.num_folds
        counts = multiqt_folds.record_frame_counts(source, 7)
        return multiqt_folds.FoldTrainer(
            "multimodal", config, source, index, fold_ids, folds.fold_mesh(), workdir, counts
        )

    full, chosen = trainer("", tmp_path / "all"), trainer("2,0", tmp_path / "some")
    assert [chosen._fold(s) for s in chosen.mine] == [2, 0]
    full_keys, chosen_keys = full._rng_table(), chosen._rng_table()
    for position, fold in enumerate([2, 0]):
        same = full.mine.index(fold)
        assert fingerprint.digest(chosen.datasets[position], 6) == fingerprint.digest(
            full.datasets[same], 6
        )
        np.testing.assert_array_equal(chosen.weights[position], full.weights[same])
        np.testing.assert_array_equal(chosen_keys[:, position], full_keys[:, same])
    with pytest.raises(ValueError, match="trained for folds \\[2, 0\\], not all"):
        trainer("", tmp_path / "some")  # its checkpoints are another fold choice's
