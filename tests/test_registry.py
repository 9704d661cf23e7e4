"""One registry type behind proxies, space kinds, model types and benchmark formats: a taken name is
refused in one line, a name can be forgotten, and lent for a block."""

import pytest

from optuna_wpca import InputError, WPCASpace
from optuna_wpca.models import MODEL_TYPES, WPCAModel
from optuna_wpca.proxies import PROXIES, ProxyResult, get_proxy, register_proxy, unregister_proxy
from optuna_wpca.ranking import BENCHMARK_FORMATS, register_benchmark_format
from optuna_wpca.spaces._base import SPACES


def test_every_registry_is_one_type_that_refuses_a_taken_name():
    for registry, taken in ((PROXIES, "wpca"), (SPACES, "wpca"), (MODEL_TYPES, "optuna_wpca_wpca"),
                            (BENCHMARK_FORMATS, "NAS-Bench-BERT")):
        assert type(registry).__name__ == "Registry" and taken in registry
        with pytest.raises(InputError, match=f"named {taken!r} is already registered"):
            registry.register(taken, object())


def test_a_proxy_is_registered_refused_twice_unregistered_and_its_combinations_forgotten():
    @register_proxy("depth_test_registry", needs_grad=False, description="layers")
    def depth(model, batch):
        return ProxyResult(float(len(model.layers)))

    try:
        with pytest.raises(InputError, match="already registered"):
            register_proxy("depth_test_registry", needs_grad=False, description="again")(depth)
        assert get_proxy("depth_test_registry+params").parts == ("depth_test_registry", "params")
    finally:
        unregister_proxy("depth_test_registry")
    with pytest.raises(InputError, match="unknown proxy 'depth_test_registry'"):
        get_proxy("depth_test_registry")
    with pytest.raises(InputError, match="unknown proxy"):
        get_proxy("depth_test_registry+params")


def test_a_model_type_is_refused_to_another_class_and_not_taken_by_a_subclass_that_inherits_it():
    class Plain(WPCAModel):  # inherits WPCAModel's type: registers nothing
        pass

    assert MODEL_TYPES.get("optuna_wpca_wpca") is WPCAModel
    with pytest.raises(InputError, match="model_type 'optuna_wpca_wpca' is already optuna_wpca.models._wpca_model.WPCAModel"):
        class Impostor(WPCAModel):  # noqa: F841
            model_type = "optuna_wpca_wpca"
    assert MODEL_TYPES.get("optuna_wpca_wpca") is WPCAModel


def test_a_benchmark_format_lent_for_a_block_is_tried_first_and_gone_after():
    sentinel = object()
    with BENCHMARK_FORMATS.temporarily("lent", sentinel):
        assert BENCHMARK_FORMATS.names()[-1] == "lent"
    assert "lent" not in BENCHMARK_FORMATS
    register_benchmark_format("lent2", lambda raw: False, lambda *a, **k: None)
    assert BENCHMARK_FORMATS.unregister("lent2").name == "lent2"
    with pytest.raises(InputError, match="no benchmark format named 'lent2'"):
        BENCHMARK_FORMATS.unregister("lent2")


def test_a_space_kind_lent_for_a_block():
    class Lent(WPCASpace):
        kind = "lent-test"

    try:
        assert SPACES.get("lent-test") is Lent
    finally:
        SPACES.unregister("lent-test")
    assert "lent-test" not in SPACES
