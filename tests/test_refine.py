"""ELM's refinement: CKA between heads, the greedy head reduction, PCA-guided widths within the budget."""

import optuna
import pytest
import torch

from optuna_wpca import ELMSpace, WPCASampler, ZeroCostObjective, text_batch
from optuna_wpca._refine import REFINED_FROM_ATTR, head_cka, kept_heads, linear_cka, refine, refine_architecture
from optuna_wpca import Budget
from optuna_wpca.cli import main

SPACE = ELMSpace(num_layers=3, hidden_size=96, bert_head_choices=(1, 2, 4, 8), mobilebert_head_choices=(1, 2, 3))
BATCH = text_batch(batch_size=8, seq_len=64)


def test_linear_cka_of_a_head_with_itself_is_one_and_of_independent_heads_near_zero():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(2000, 16, generator=g), torch.randn(2000, 16, generator=g)
    assert linear_cka(x, x) == pytest.approx(1.0)
    q, _ = torch.linalg.qr(torch.randn(16, 16, generator=g))
    assert linear_cka(x, 5 * x @ q) == pytest.approx(1.0)  # rotation and scale do not matter
    assert linear_cka(x, y) < 0.02
    with pytest.raises(ValueError, match="same >= 2 examples"):
        linear_cka(x, y[:10])


def test_the_greedy_pass_drops_a_head_that_repeats_a_kept_one():
    cka = torch.tensor([[1.0, 0.95, 0.2, 0.3], [0.95, 1.0, 0.1, 0.2], [0.2, 0.1, 1.0, 0.91], [0.3, 0.2, 0.91, 1.0]])
    assert kept_heads(cka, 0.9) == [0, 2]
    assert kept_heads(cka, 0.96) == [0, 1, 2, 3]


def test_head_cka_gives_one_symmetric_matrix_per_layer():
    arch = SPACE.sample(0)
    matrices = head_cka(SPACE.build(arch), BATCH)
    assert [m.shape[0] for m in matrices] == [layer.heads for layer in arch.layers]
    for m in matrices:
        assert torch.allclose(m, m.T) and torch.allclose(m.diagonal(), torch.ones(m.shape[0], dtype=m.dtype))
        assert float(m.min()) >= 0 and float(m.max()) <= 1 + 1e-9


@pytest.mark.parametrize("seed", range(6))
def test_refine_never_breaks_the_budget_and_builds(seed):
    arch = SPACE.sample(seed)
    n = SPACE.num_params(arch)
    for budget in (Budget(max_params=n), Budget(min_params=n), Budget()):
        for saturation in (0.0, 0.99, 1.01):  # 0: every layer counts as full and grows one step
            result = refine_architecture(SPACE, arch, BATCH, budget=budget, saturation=saturation)
            refined = result.architecture
            assert budget.contains(SPACE.num_params(refined))
            SPACE.to_params(refined)  # in the space
            with torch.no_grad():
                SPACE.build(refined)(BATCH.input_ids[:2])
            for new, old in zip(refined.layers, arch.layers):
                assert new.heads <= old.heads or new.heads == min(SPACE._head_choices(new.block))


def test_the_width_rules():
    arch = SPACE.sample(2)
    grid = [SPACE.ffn_unit * k for k in SPACE.ffn_mults]
    grown = refine_architecture(SPACE, arch, BATCH, heads=False, saturation=0.0).architecture
    for new, old in zip(grown.layers, arch.layers):
        assert new.ffn_size == min([w for w in grid if w > old.ffn_size], default=old.ffn_size)
    fitted = refine_architecture(SPACE, arch, BATCH, heads=False, saturation=1.01)
    for new, dim in zip(fitted.architecture.layers, fitted.pca_dims):
        assert new.ffn_size == min([w for w in grid if w >= dim], default=max(grid))


def test_refine_enqueues_a_trial_that_points_to_its_source_and_the_cli_scores_it(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    budget = SPACE.num_params(SPACE.sample(0)) * 1.5
    study = optuna.create_study(study_name="r", storage=url, direction="maximize",
                                sampler=WPCASampler(SPACE, max_params=budget, population_size=4, seed=0))
    study.optimize(ZeroCostObjective(SPACE, batch=BATCH), n_trials=6)
    source = study.best_trial.number
    result = refine(study, source, batch=BATCH, saturation=0.0)
    assert result.changed
    waiting = [t for t in study.trials if t.state.name == "WAITING"]
    assert len(waiting) == 1 and waiting[0].user_attrs[REFINED_FROM_ATTR] == source
    with pytest.raises(ValueError, match="has no trial 99"):
        refine(study, 99)
    assert main(["refine", "--storage", url, "--study-name", "r", "--trial", str(source)]) == 0
    out = capsys.readouterr().out
    assert "refined:" in out and "heads kept by CKA" in out
    scored = optuna.load_study(study_name="r", storage=url).trials
    refined = [t for t in scored if t.user_attrs.get(REFINED_FROM_ATTR) == source and t.state.name == "COMPLETE"]
    assert refined and refined[-1].user_attrs["num_params"] <= budget
