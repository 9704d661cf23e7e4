"""transformers' Auto classes load saved candidates and students; the registration keeps imports light."""

import json
import subprocess
import sys

import pytest
import torch

from optuna_wpca import DecoderSpace, FlexiBERTSpace, WPCASpace
from optuna_wpca.distill import StudentClassifier

SPACES = {
    "wpca": WPCASpace(num_layers=2, hidden_size=32, bert_heads=2, mobilebert_heads=2),
    "flexibert": FlexiBERTSpace(),
    "decoder": DecoderSpace(num_layers_choices=(2,), hidden_sizes=(64,), ffn_sizes=(128,)),
}


@pytest.mark.parametrize("kind", sorted(SPACES))
def test_auto_model_gives_the_candidates_own_output(tmp_path, kind):
    from transformers import AutoConfig, AutoModel
    from transformers.modeling_outputs import BaseModelOutput

    space = SPACES[kind]
    model = space.build(space.sample(3), seed=1).eval()
    model.save_pretrained(tmp_path)
    config = AutoConfig.from_pretrained(tmp_path)
    assert config.model_type == model.model_type and config.candidate_config() == model.config
    hf = AutoModel.from_pretrained(tmp_path).eval()
    ids = torch.arange(1000, 1024).reshape(2, 12)
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    out = hf(ids, attention_mask=mask)
    assert isinstance(out, BaseModelOutput)
    with torch.no_grad():
        assert torch.equal(out.last_hidden_state, model(ids, attention_mask=mask))
    assert sum(p.numel() for p in hf.parameters()) == sum(p.numel() for p in model.parameters())


def test_a_student_loads_as_a_sequence_classifier_and_its_encoder_as_a_bare_model(tmp_path):
    from transformers import AutoModel, AutoModelForSequenceClassification

    space = SPACES["wpca"]
    student = StudentClassifier.from_candidate(space.build(space.sample(0), seed=0), 3, labels=("a", "b", "c")).eval()
    student.save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]
    ids = torch.arange(2000, 2020).reshape(2, 10)
    hf = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    assert hf.config.id2label == {0: "a", 1: "b", 2: "c"}
    with torch.no_grad():
        assert torch.equal(hf(ids).logits, student(ids).logits)
        assert torch.equal(AutoModel.from_pretrained(tmp_path)(ids).last_hidden_state, student.candidate(ids))
    again = StudentClassifier.from_pretrained(tmp_path)
    assert again.labels == ["a", "b", "c"]
    with torch.no_grad():
        assert torch.equal(again(ids).logits, student(ids).logits)


def test_directories_saved_before_the_rename_still_load(tmp_path):
    """Releases before 0.2 wrote model_type 'optuna_wpca.wpca' and the task head in head.safetensors."""
    from safetensors.torch import save_file

    from optuna_wpca import CandidateModel

    space = SPACES["wpca"]
    student = StudentClassifier.from_candidate(space.build(space.sample(1), seed=0), 2).eval()
    student.candidate.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "model_type": "optuna_wpca.wpca"}))
    head = {f"pooler.{k}": v for k, v in student.pooler.state_dict().items()}
    head.update({f"classifier.{k}": v for k, v in student.classifier.state_dict().items()})
    save_file({k: v.contiguous() for k, v in head.items()}, str(tmp_path / "head.safetensors"))
    (tmp_path / "head.json").write_text('{"num_labels": 2}')
    ids = torch.arange(100, 110).reshape(1, 10)
    with torch.no_grad():
        assert torch.equal(StudentClassifier.from_pretrained(tmp_path)(ids).logits, student(ids).logits)
    assert type(CandidateModel.from_pretrained(tmp_path)).__name__ == "WPCAModel"


@pytest.mark.parametrize("order", ["optuna_wpca first", "transformers first"])
def test_registration_does_not_import_transformers_and_works_in_either_order(order):
    first, second = ("optuna_wpca", "transformers") if order == "optuna_wpca first" else ("transformers", "optuna_wpca")
    script = (
        f"import sys; import {first}\n"
        "light = 'transformers.modeling_utils' not in sys.modules\n"
        f"import {second}\n"
        "from transformers import AutoConfig\n"
        "config = AutoConfig.for_model('optuna_wpca_wpca')\n"
        "print(light, type(config).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    light, name = out.stdout.split()
    assert name == "WPCATransformersConfig"
    if order == "optuna_wpca first":
        assert light == "True"  # import optuna_wpca alone leaves transformers' models unloaded


def test_a_candidate_class_of_ones_own_is_wrapped_and_registered_like_the_built_in_ones(tmp_path):
    """One hierarchy: a new candidate class needs no transformers code of its own; its config, AutoModel and
    AutoModelForSequenceClassification classes are made from the generic ones when it is defined."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification

    from optuna_wpca import WPCASpace
    from optuna_wpca.models import MODEL_TYPES, WPCAModel

    class WideWPCAModel(WPCAModel):
        model_type = "optuna_wpca_test_wide"

    try:
        space = WPCASpace(num_layers=2, hidden_size=32, bert_heads=2, mobilebert_heads=2)
        model = WideWPCAModel(space.model_config(space.sample(0)))
        model.save_pretrained(tmp_path)
        assert type(AutoConfig.from_pretrained(tmp_path)).__name__ == "WideWPCATransformersConfig"
        hf = AutoModel.from_pretrained(tmp_path).eval()
        ids = torch.tensor([[101, 2023, 102]])
        with torch.no_grad():
            assert torch.equal(hf(ids).last_hidden_state, model.eval()(ids))
        head = AutoModelForSequenceClassification.from_pretrained(tmp_path, num_labels=3)
        assert type(head).__name__ == "WideWPCAForSequenceClassification" and head(ids).logits.shape == (1, 3)
    finally:
        MODEL_TYPES.unregister("optuna_wpca_test_wide")
