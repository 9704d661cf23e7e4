"""benchmarks/anytime.py: runs whose journals are gone count from their exported CSV, a journal's study of
the same name replaces its rows, and a committed gzipped journal is read (and resumed) where the plain one
is missing."""

import argparse
import csv
import gzip
import json
import shutil

import optuna

import optuna_wpca
from benchmarks import anytime

GROUP = "wpca-tiny:wpca:8x64"


def _journal_study(path, name, values):
    space, _ = optuna_wpca.preset("wpca-tiny")
    storage = anytime._storage(path)
    study = optuna.create_study(study_name=name, storage=storage, direction="maximize")
    for i, value in enumerate(values):
        params = space.to_params(space.sample(i))
        study.add_trial(optuna.trial.create_trial(params=params, distributions=space.distributions(), value=value))


def _csv(path, studies):
    space, _ = optuna_wpca.preset("wpca-tiny")
    with gzip.open(path, "wt", newline="") as f:
        out = csv.writer(f)
        out.writerow(["study", "number", "value", "num_params", "params"])
        for name, values in studies.items():
            for i, value in reversed(list(enumerate(values))):  # out of order: read back by number
                arch = space.sample(100 + i)
                out.writerow([name, i, repr(value), space.num_params(arch), json.dumps(space.to_params(arch))])


def test_summary_reads_gone_runs_from_the_csv_and_a_packed_journal_replaces_a_study(tmp_path):
    journal, table = tmp_path / "more.journal", tmp_path / "trials.csv.gz"
    _csv(table, {f"{GROUP}:paper:0": [1.0, 3.0, 2.0] + [2.5] * 22, f"{GROUP}:paper:1": [0.5] * 25})
    _journal_study(journal, f"{GROUP}:paper:1", [4.0] * 25)
    with open(journal, "rb") as src, gzip.open(str(journal) + ".gz", "wb") as dst:  # committed copy only
        shutil.copyfileobj(src, dst)
    journal.unlink()
    out = tmp_path / "curves.json"
    anytime.summary(argparse.Namespace(journal=[str(journal)], csv=[str(table)], json=str(out), plot=None))
    group = json.loads(out.read_text())["curves"][GROUP]
    runs = group["samplers"]["paper"]["per_seed"]
    assert runs["0"]["25"] == 3.0  # from the CSV, rows read in trial order
    assert runs["1"]["25"] == 4.0  # the journal's study, not the CSV's 0.5
    assert group["best_ever"] == 4.0
    assert journal.exists()  # unpacked, so that a run resumes there


def test_export_keeps_the_rows_of_studies_no_journal_holds(tmp_path):
    journal, table = tmp_path / "more.journal", tmp_path / "trials.csv.gz"
    _csv(table, {f"{GROUP}:paper:0": [1.0, 2.0], f"{GROUP}:tpe:0": [9.0]})
    _journal_study(journal, f"{GROUP}:tpe:0", [5.0, 6.0, 7.0])
    anytime.export(argparse.Namespace(journal=[str(journal)], csv=str(table)))
    with gzip.open(table, "rt", newline="") as f:
        rows = list(csv.DictReader(f))
    by_study = {}
    for row in rows:
        by_study.setdefault(row["study"], []).append(float(row["value"]))
    assert by_study == {f"{GROUP}:paper:0": [1.0, 2.0], f"{GROUP}:tpe:0": [5.0, 6.0, 7.0]}
