"""One definition of a configuration and of a series: the factor lists the Python side reads
(bench.analytics.selection, compare, changes) are the ones sql/run_configs.sql hashes into config_id and
series_id, read from the SQL itself."""

from __future__ import annotations

import re
from pathlib import Path

from bench.analytics import changes, compare, selection

SQL = (Path(__file__).resolve().parents[2] / "sql" / "run_configs.sql").read_text()


def _hashed(column: str) -> list[str]:
    """The field names of the struct_pack that ``column`` is the md5 of, in the SQL's order."""
    before = SQL[:SQL.index(f"))) AS {column}")]
    body = before[before.rindex("md5(to_json(struct_pack("):]
    return re.findall(r"(\w+) :=", re.sub(r"--[^\n]*", "", body))


def test_a_configuration_is_what_config_id_hashes() -> None:
    assert _hashed("config_id") == [*selection.FACTORS, "config_tags"]


def test_a_series_is_what_series_id_hashes() -> None:
    hashed = _hashed("series_id")
    assert set(hashed) - {"tags"} == set(changes.SERIES_COLUMNS) and len(changes.SERIES_COLUMNS) == len(hashed) - 1
    # a series follows one configuration through time less framework_version, at one scale point
    assert set(changes.SERIES_COLUMNS) == set(selection.FACTORS) - {"framework_version"} | {"num_devices", "num_nodes",
                                                                                             "system"}


def test_the_system_factors_are_the_selection_s() -> None:
    assert set(selection.WORKLOAD) | set(selection.SYSTEM) == set(selection.FACTORS)
    assert compare.SYSTEM_FACTORS == ("framework_version", "device_type", "device_model")
