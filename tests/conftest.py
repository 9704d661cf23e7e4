import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", min(2, os.cpu_count() or 1))))


@pytest.fixture(scope="session")
def small_batch():
    from optuna_wpca import text_batch

    return text_batch(batch_size=8, seq_len=32, seed=0)


@pytest.fixture(scope="session")
def postgres_url():
    """A real PostgreSQL server: $OPTUNA_WPCA_POSTGRES_URL, else one started here for the session."""
    url = os.environ.get("OPTUNA_WPCA_POSTGRES_URL")
    if url:
        yield url
        return
    from _postgres import TemporaryPostgres

    try:
        server = TemporaryPostgres()
        url = server.start()
    except Exception as err:  # no server can be started here: say so loudly, do not pass silently
        message = f"POSTGRESQL NOT AVAILABLE, PostgreSQL tests SKIPPED: {err}"
        print(f"\n{'!' * 20} {message} {'!' * 20}")
        if os.environ.get("CI"):
            pytest.fail(message)  # CI must have a server: .ci/run installs it
        pytest.skip(message)
    import optuna

    optuna.storages.RDBStorage(url)  # create the schema once, before any workers race to create it
    yield url
    server.stop()
