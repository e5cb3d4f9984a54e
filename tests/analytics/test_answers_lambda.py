"""Answers on Lambda's real logs (../shared/corpus; skipped when absent): device ratios where each GPU ran
at its own batch size, and one system's scaling across 1, 2, 4 and 8 GPUs. Every expected number is read
here from the tarball's own `total images/sec:` lines, never from bench's output."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest
from conftest import LAMBDA_TARBALL

from bench.analytics.compare import compare
from bench.analytics.results import rows
from bench.analytics.selection import narrow
from bench.sql.read import connect

TARBALL = LAMBDA_TARBALL
TOTAL = re.compile(rb"^total images/sec: ([0-9.]+)", re.M)
A100_1 = "7742-1xA100-SXM4-40GB_TF2_3"
V100 = "Platinum-Tesla_V100-SXM3-32GB_HP16_TF2_2"
RESNET_FP16 = "model = 'resnet50' AND precision = 'fp16' AND mode = 'train' AND tags['data_mode'] = 'syn' AND tags['variant'] IS NULL"


def total(member: str) -> float:
    """The `total images/sec` a log of the tarball prints (the hand value)."""
    with tarfile.open(TARBALL) as tar:
        data = tar.extractfile(member).read()  # type: ignore[union-attr]
    return float(TOTAL.findall(data)[-1])


@pytest.fixture
def store(lambda_store: Path) -> Path:
    return lambda_store


def test_a100_against_v100_each_at_its_own_batch(store: Path) -> None:
    a = total(f"{A100_1}.logs/syn-replicated-fp16-1gpus/resnet50-448/throughput/1")
    b = total(f"{V100}.logs/syn-replicated-fp16-1gpus/resnet50-384/throughput/1")
    con = connect(store)
    narrow(con, f"{RESNET_FP16} AND tags['system'] IN ('{A100_1}', '{V100}')")
    r = compare(con, "device_model", "A100-SXM4", "V100")
    one = [p for p in r.pairs if p.num_devices == 1]
    assert len(one) == 1 and one[0].ratio == pytest.approx(a / b)  # 1990.02 / 1276.24 = 1.559
    assert (one[0].a_batch, one[0].b_batch, one[0].own_batch) == (448, 384, True)
    # the versions as each folder's metadata file gives them (TF 2.3.0, 2.2.0), refining the logs' 2.3 and 2.2
    assert one[0].differs == {"framework_version": ("2.3.0", "2.2.0"), "system": (A100_1, V100)}


def test_rtx_3090_against_rtx_3070_takes_each_sides_fastest_system(store: Path) -> None:
    """Two systems have RTX 3090s (7662 on TF 2.4, 3970X on TF 1.15): the pair takes the faster one."""
    fast = total("7662-GeForce_RTX_3090.logs/syn-replicated-fp16-1gpus/resnet50-96/throughput/1")
    slow = total("3970X-GeForce_RTX_3090_XLA.logs/syn-replicated-fp16-1gpus/resnet50-96/throughput/1")
    b = total("7502-GeForce_RTX_3070.logs/syn-replicated-fp16-1gpus/resnet50-48/throughput/1")
    assert fast > slow
    con = connect(store)
    narrow(con, f"{RESNET_FP16} AND num_gpus = 1")
    r = compare(con, "device_model", "RTX 3090", "RTX 3070")
    (pair,) = r.pairs
    assert pair.ratio == pytest.approx(fast / b) and (pair.a_batch, pair.b_batch, pair.own_batch) == (96, 48, True)
    assert pair.differs["system"] == ("7662-GeForce_RTX_3090", "7502-GeForce_RTX_3070")
    assert [u.value for u in r.unmatched] == [pytest.approx(slow)]  # listed: slower than its side's row


def test_one_a100_system_family_scales_from_1_to_8_gpus_with_ignore_system(store: Path) -> None:
    """7742-{1,2,4,8}xA100 are four systems of one machine: with --ignore system they are one curve."""
    rate = {n: total(f"7742-{n}xA100-SXM4-40GB_TF2_3.logs/syn-replicated-fp16-{n}gpus/resnet50-448/throughput/1")
            for n in (1, 2, 4, 8)}
    con = connect(store)
    narrow(con, f"{RESNET_FP16} AND tags['system'] LIKE '7742-_xA100-SXM4-40GB_TF2_3'", ignore=["system"])
    got = rows(con, "SELECT num_devices, speedup, efficiency FROM scaling ORDER BY num_devices")
    assert [g[0] for g in got] == [1, 2, 4, 8]
    assert [g[1] for g in got] == pytest.approx([rate[n] / rate[1] for n in (1, 2, 4, 8)])
    assert [g[2] for g in got] == pytest.approx([rate[n] / rate[1] / n for n in (1, 2, 4, 8)])
    con = connect(store)  # without --ignore system: four one-point curves, nothing scaled: no speedup
    narrow(con, f"{RESNET_FP16} AND tags['system'] LIKE '7742-_xA100-SXM4-40GB_TF2_3'")
    assert rows(con, "SELECT count(DISTINCT config_id), max(speedup) FROM scaling") == [(4, None)]


def test_synthetic_against_real_data_pairs_although_the_path_restates_data(store: Path) -> None:
    """The path pattern's {data_mode} tag (syn, real) restates the data column (synthetic, real): it is
    bookkeeping, so the same system's synthetic and real runs pair."""
    syn = total(f"{A100_1}.logs/syn-replicated-fp16-1gpus/resnet50-448/throughput/1")
    real = total(f"{A100_1}.logs/real-replicated-fp16-1gpus/resnet50-448/throughput/1")
    con = connect(store)
    narrow(con, f"model = 'resnet50' AND precision = 'fp16' AND mode = 'train' AND tags['variant'] IS NULL "
                f"AND tags['system'] = '{A100_1}' AND num_gpus = 1")
    assert rows(con, "SELECT DISTINCT tags['data_mode'] FROM runs ORDER BY 1") == [("real",), ("syn",)]
    r = compare(con, "data", "synthetic", "real")
    (pair,) = r.pairs
    assert pair.ratio == pytest.approx(syn / real) and "data_mode" not in pair.config["tags"]


def test_each_system_folders_metadata_fills_its_runs_facts(store: Path) -> None:
    """Lambda's <system>.logs/metadata (CUDA, driver, TF, GPUs) describes the runs below it; the 4 folders
    of 7742-{1,2,4,8}xA100 hold the same bytes and each describes its own runs. A log's TF version is refined
    by the metadata's (2.3 -> 2.3.0) but never replaced: one log of Processor-LambdaCloud_4xQuadro_RTX_6000
    says `TensorFlow:  2.2` while its folder's metadata says 1.15.3 (72 others say 1.15, one says none)."""
    def meta(system: str) -> dict[str, str]:
        with tarfile.open(TARBALL) as tar:
            text = tar.extractfile(f"{system}.logs/metadata").read().decode()  # type: ignore[union-attr]
        return dict(line.split("\t", 1) for line in text.splitlines() if "\t" in line)

    con = connect(store)
    for n in (1, 2, 4, 8):
        system = f"7742-{n}xA100-SXM4-40GB_TF2_3"
        m = meta(system)
        got = rows(con, "SELECT DISTINCT framework_version, details['cuda_version'], device_model FROM runs "
                        "WHERE tags['system'] = ?", [system])
        assert got == [(m["TF"], m["CUDA"].removeprefix("V"), m["GPU 0"])] == [("2.3.0", "11.0.221", "A100-SXM4-40GB")]
    cloud = "Processor-LambdaCloud_4xQuadro_RTX_6000"
    assert meta(cloud)["TF"] == "1.15.3"
    assert rows(con, "SELECT framework_version, count(*) FROM runs WHERE tags['system'] = ? GROUP BY 1 ORDER BY 1",
                [cloud]) == [("1.15.3", 73), ("2.2", 1)]
    assert rows(con, "SELECT count(*) FROM problems WHERE kind = 'unrecognized_format'") == [(0,)]


def test_the_report_leads_with_findings_and_stays_small(store: Path, tmp_path: Path) -> None:
    from bench.analytics.report.build import Options, build_report, write_report

    report = build_report(connect(store), Options())
    found = report.findings
    assert 3 <= len(found) <= 10 and report.sections[0].title == "Findings"
    order = ["leaderboard", "order", "actionable", "scaling", "effect", "trust"]  # what to fix or buy before the rest
    assert [f.kind for f in found] == sorted((f.kind for f in found), key=order.index)
    con = connect(store)
    # the leaderboard ranks training at its most measured device count (1 on Lambda), against the device model
    # measured there most
    scope = "mode = 'train' AND num_devices = 1 AND data = 'synthetic'"
    (most,) = rows(con, f"SELECT device_model FROM configs WHERE device_model IS NOT NULL AND images_per_sec > 0 "
                        f"AND {scope} GROUP BY ALL ORDER BY count(DISTINCT config_id) DESC, 1 LIMIT 1")
    board = [f for f in found if f.kind == "leaderboard"]
    assert board and all(" is " in f.text and most[0] in f.text for f in board)
    assert board[0].text.startswith("In training at 1 device, synthetic data, ")
    # the first device's number is the geometric mean of the per-workload ratios bench compare pairs
    name = board[0].text.removeprefix("In training at 1 device, synthetic data, ").split(" is ")[0]
    res = compare(connect(store), "device_model", name, most[0], where=scope)
    assert board[0].value == pytest.approx(res.summary.geomean) and board[0].n == res.summary.n
    assert res.summary.ci95_low <= board[0].value <= res.summary.ci95_high
    (not_ok,) = rows(con, "SELECT count(*) FROM runs WHERE status <> 'ok'")
    assert any(f.kind == "trust" and f.n == not_ok[0] for f in found)
    html = write_report(report, tmp_path / "r")
    assert html.stat().st_size <= 2_000_000


def test_a_ci_over_two_pairs_is_not_their_min_and_max(store: Path) -> None:
    """`bench compare --a "RTX 3090" --b "RTX 2080 Ti" --where "model = 'resnet50' AND num_devices = 1 AND mode =
    'train' AND data = 'synthetic'"` gave n=2 and "95% CI 1.322-1.769": exactly [min, max], a percentile
    bootstrap that covers half the time. The t-interval on the two log ratios (1 df) is honestly wide."""
    import math

    where = "model = 'resnet50' AND num_devices = 1 AND mode = 'train' AND data = 'synthetic'"
    res = compare(connect(store), "device_model", "RTX 3090", "RTX 2080 Ti", where=where)
    s = res.summary
    assert s.n == 2 and (round(s.min, 3), round(s.max, 3)) == (1.322, 1.769)
    logs = [math.log(p.ratio) for p in res.pairs]
    half = 12.706205 * abs(logs[0] - logs[1]) / math.sqrt(2) / math.sqrt(2)  # t(0.975, 1) * sd / sqrt(n)
    mean = sum(logs) / 2
    assert (s.ci95_low, s.ci95_high) == (pytest.approx(math.exp(mean - half)), pytest.approx(math.exp(mean + half)))
    assert s.ci95_low < 0.5 and s.ci95_high > 3  # far wider than [1.322, 1.769]


def test_the_fp16_finding_names_the_one_device_it_rests_on_and_gives_each_devices_own_batch_effect(store: Path) -> None:
    """"fp16 gives 1.19x ... (n=18 pairs)" rests on the Vega 20 alone (the one GPU Lambda ran at equal batch
    sizes): the sentence says so in its first words, and the one that gives fp16 at each precision's own best
    batch size per device (on more devices: what holds more generally) comes first; its GTX 1080 Ti figure (one
    system) is checked against the tarball's own totals: per workload the mean of its repeats, the best batch
    size of each precision, fp16 / fp32, geometric mean."""
    import math

    from bench.analytics.findings import effect_findings
    from bench.analytics.report.select import select_runs

    con = connect(store)
    select_runs(con, None)
    texts = [f.text for f in effect_findings(con, "effects")]
    (equal,) = [t for t in texts if "precision fp16" in t and "all else equal" in t]
    assert equal.startswith("On Vega 20 only, in training, precision fp16 gives") and "the one device measured" in equal
    (own,) = [t for t in texts if "own best batch size" in t]
    assert texts.index(own) < texts.index(equal)  # the effect on several devices leads
    got = float(re.search(r"(\d+\.\d\d)x \(GeForce GTX 1080 Ti\)", own).group(1))  # type: ignore[union-attr]
    path = re.compile(r"i7-6850K-GeForce_GTX_1080_Ti\.logs/(\w+)-([\w]+)-(fp16|fp32)-(\d+)gpus(?:-([\w-]+))?/"
                      r"([\w]+)-(\d+)/throughput/\d+$")
    runs: dict[tuple, list[float]] = {}
    with tarfile.open(TARBALL) as tar:
        for m in tar:
            hit = path.match(m.name)
            if hit and m.isfile() and "inference" not in (hit.group(5) or ""):
                totals = TOTAL.findall(tar.extractfile(m).read())  # type: ignore[union-attr]
                if totals:
                    runs.setdefault(hit.groups(), []).append(float(totals[-1]))
    best: dict[tuple, float] = {}
    for (data, vu, prec, n, variant, model, _batch), values in runs.items():
        key = (data, vu, prec, n, variant, model)
        best[key] = max(best.get(key, 0.0), sum(values) / len(values))
    ratios = [best[k] / best[(*k[:2], "fp32", *k[3:])] for k in best if k[2] == "fp16" and (*k[:2], "fp32", *k[3:]) in best]
    assert len(ratios) >= 5
    assert got == pytest.approx(math.exp(sum(map(math.log, ratios)) / len(ratios)), abs=0.006)


README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_the_readme_quotes_these_answers(store: Path) -> None:
    """The README's Lambda walk-through, as its commands print it: the RTX 3090 / 3070 summary (checked here
    against its pairs' ratios: median, geometric mean and the Student t-interval of the log ratios, by scipy)
    and the 7742 A100 machine's one curve, under the README's own --where."""
    import math
    import statistics

    from scipy import stats
    from typer.testing import CliRunner

    from bench.runner.cli import app

    result = CliRunner().invoke(app, ["compare", "--store", str(store), "--factor", "device_model", "--a", "RTX 3090",
                                      "--b", "RTX 3070"])
    ratios = [p.ratio for p in compare(connect(store), "device_model", "RTX 3090", "RTX 3070").pairs]
    logs = [math.log(r) for r in ratios]
    half = stats.t.ppf(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    mean = statistics.fmean(logs)
    said = (f"n={len(ratios)}  median {statistics.median(ratios):.3f}x  geomean {math.exp(mean):.3f}x (95% CI "
            f"{math.exp(mean - half):.3f}-{math.exp(mean + half):.3f})")
    assert result.stdout.strip().splitlines()[-1].startswith(said), result.stdout[-300:]
    assert f"#  {said}: each GPU at its own batch size" in README
    where = re.search(r'bench plot speedup --store lambda --ignore system --where "(.*?)"\n', README.replace("\\\n    ", ""))
    assert where and where.group(1) == f"{RESNET_FP16} AND tags['system'] LIKE '7742-_xA100-SXM4-40GB_TF2_3'"
    rate = {n: total(f"7742-{n}xA100-SXM4-40GB_TF2_3.logs/syn-replicated-fp16-{n}gpus/resnet50-448/throughput/1")
            for n in (1, 2, 4, 8)}
    speedups = ", ".join(f"{rate[n] / rate[1]:.2f}" for n in (2, 4, 8))
    efficiencies = ", ".join(f"{rate[n] / rate[1] / n:.0%}" for n in (2, 4, 8))
    assert f"speedup {speedups}\n#  (efficiency {efficiencies})" in README


def test_an_order_that_rests_on_software_says_so(store: Path) -> None:
    """The PCIe A100 ranks above the SXM4 A100, but its system runs TensorFlow 1.15.4 (its folder's metadata)
    and the SXM4 systems 2.3.0, one with XLA, and no workload ran on both on the same software: a finding says
    so, naming both. Half the RTX 2080 Ti system folders of the tarball say XLA (the faster ones, which the
    pairing takes), the PCIe A100's does not."""
    from bench.analytics.report.build import Options, build_report

    with tarfile.open(TARBALL) as tar:
        folders = {m.name.split("/")[0] for m in tar.getmembers() if m.name.endswith("/metadata")}
    ti = [f for f in folders if "2080_Ti" in f]
    assert len([f for f in ti if "_XLA" in f]) == len(ti) // 2 == 6
    assert not any("XLA" in f for f in folders if "A100-PCIE" in f)
    (order,) = [f.text for f in build_report(connect(store), Options()).findings if f.kind == "order"]
    assert order.startswith("A100-PCIE-40GB ranks above A100-SXM4-40GB (")
    assert "TensorFlow 1.15.4 against TensorFlow 2.3.0 and TensorFlow 2.3.0 with XLA" in order
    assert ("no workload was run on both with the same software, so the order may be the software's. Every "
            "GeForce RTX 2080 Ti run compared is on a system whose name (or xla tag) says XLA, and those of "
            "A100-PCIE-40GB on none: their ratios include XLA's effect, unless their names mislead: TensorFlow's "
            "own log says it compiled with XLA in 12 of 12 A100-PCIE-40GB runs, so both sides may use it.") in order
    # the 12: the board's workloads (6 models x fp16/fp32, training at 1 GPU, synthetic data), one run each, every
    # log of which holds "Compiled cluster using XLA!"
    with tarfile.open(TARBALL) as tar:
        ones = [m for m in tar.getmembers() if m.name.startswith("7502-A100-PCIE-40GB.logs/syn-replicated-")
                and "-1gpus/" in m.name and "/throughput/" in m.name and "inference" not in m.name]
        assert len(ones) == 12 and all(b"Compiled cluster using XLA" in tar.extractfile(m).read() for m in ones)  # type: ignore[union-attr]


def test_a_scaling_finding_names_the_software_its_curves_share(store: Path) -> None:
    """Of the five A100-SXM4-40GB folders only 7742-A100-SXM4-40GB_TF2_3_XLA ran 1 to 8 GPUs in one system (the
    7742-Nx folders ran one count each): the A100's scaling finding rests on the XLA system's curves, and says
    so (TF 2.3 by its folder name, 2.3.0 by its metadata), then gives the four one-count systems' curves
    joined (test_report_lambda checks their figure by hand)."""
    from bench.analytics import findings as fd
    from bench.analytics.report.select import select_runs

    with tarfile.open(TARBALL) as tar:
        counts: dict[str, set[str]] = {}
        for m in tar.getmembers():
            parts = m.name.split("/")
            if "A100-SXM4" in parts[0] and len(parts) > 1 and (g := re.search(r"-(\d)gpus", parts[1])):
                counts.setdefault(parts[0], set()).add(g.group(1))
    assert [f for f, c in counts.items() if len(c) > 1] == ["7742-A100-SXM4-40GB_TF2_3_XLA.logs"]
    con = connect(store)
    select_runs(con, None)
    (a100,) = [f.text for f in fd.scaling_findings(con, "x") if f.text.startswith("A100-SXM4-40GB scales")]
    assert a100.endswith("; all on TensorFlow 2.3.0 with XLA; joined across 4 other systems (TensorFlow 2.3.0, "
                         "without XLA): 89% at 8 devices (median of 36 curves)).")


def test_the_first_screen_says_what_scales_worst_and_why_it_may(store: Path) -> None:
    """The RTX 3090 system (7662-GeForce_RTX_3090) scales training worst: per workload (6 models x fp16/fp32,
    synthetic), throughput at 8 GPUs / (8 x throughput at 1 GPU) from the tarball's own totals, median over
    the 12; its system's name says no NVLink."""
    import statistics

    from bench.analytics import findings as fd
    from bench.analytics.report.select import select_runs

    pattern = re.compile(r"7662-GeForce_RTX_3090\.logs/syn-replicated-(fp16|fp32)-(\d)gpus/(\w+)-(\d+)/throughput/\d+$")
    totals: dict[tuple[str, str, str], list[float]] = {}
    with tarfile.open(TARBALL) as tar:
        for m in tar:
            if hit := pattern.match(m.name):
                precision, gpus, model, _ = hit.groups()
                got = TOTAL.findall(tar.extractfile(m).read())  # type: ignore[union-attr]
                if got:
                    totals.setdefault((precision, model, gpus), []).append(float(got[-1]))
    effs = [statistics.fmean(totals[(p, m, "8")]) / (8 * statistics.fmean(totals[(p, m, "1")]))
            for p, m, g in totals if g == "1" and (p, m, "8") in totals]
    assert len(effs) == 12
    con = connect(store)
    select_runs(con, None)
    (worst,) = fd.worst_scaling_finding(con, "x")
    assert worst.text.startswith(f"Worst scaling: GeForce RTX 3090 reaches only {statistics.median(effs):.0%} "
                                 "efficiency at 8 devices (median of 12 curves")
    assert worst.text.endswith("no fact of its system (7662-GeForce_RTX_3090) names NVLink: its GPUs likely exchange "
                               "gradients over PCIe.")


def test_xla_is_what_tensorflows_own_log_says_and_the_names_do_not_always_agree(store: Path) -> None:
    """details['xla'] = 'compiled' on exactly the runs whose log holds TensorFlow's "Compiled cluster using
    XLA!" (read here from the tarball, run by run), and the folder names do not always tell: four systems
    named without XLA compiled with it on their synthetic-data runs (the PCIe A100's TensorFlow 1.15.4, the RTX
    3070, 3090 and the cloud A6000), and one named for it did not on its real-data runs. The order finding says
    so where it rests on the names."""
    import collections

    from bench.analytics.software import xla

    logged, odd = {}, collections.Counter()
    with tarfile.open(TARBALL) as tar:
        for m in tar:
            if m.isfile() and "/throughput/" in m.name:
                compiled = b"Compiled cluster using XLA" in tar.extractfile(m).read()  # type: ignore[union-attr]
                logged[m.name] = compiled
                system = m.name.split(".logs/")[0]
                if compiled != xla(system):
                    odd[system, m.name.split("/")[1].split("-")[0]] += 1
    found = connect(store).execute("SELECT source, details['xla'] FROM runs").fetchall()
    assert len(found) == 3949
    assert [(src, x) for src, x in found if (x == "compiled") != logged[src.split("::", 1)[1]]] == []
    assert dict(odd) == {("7502-A100-PCIE-40GB", "syn"): 98, ("7502-GeForce_RTX_3070", "syn"): 58,
                         ("7662-GeForce_RTX_3090", "syn"): 96, ("LambdaCloud-RTX_A6000", "syn"): 72,
                         ("Gold_6230-GeForce_RTX_2080_Ti_NVLink_XLA_trt2_TF1_15", "real"): 48}
