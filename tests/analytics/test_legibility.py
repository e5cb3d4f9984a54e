"""The figure checker finds what a reader trips over, and settle() fixes crowded tick labels and names of
points that collide; the report figures of Lambda's archive, an MLPerf round, a simulated fleet, a nightly
history and a sweep are measured by it in their own tests (figure_problems)."""

from __future__ import annotations

from bench.analytics.legibility import problems, settle
from bench.analytics.plots import new_figure, varying_labels


def test_overlapping_tick_labels_colliding_names_cut_labels_and_notes_over_data_are_found() -> None:
    fig = new_figure(8.0, 6.0)
    ax = fig.add_subplot()
    names = [f"system=Gold_6230-GeForce_RTX_2080_Ti_{i}" for i in range(8)]
    ax.bar(range(8), range(1, 9))
    ax.set_xticks(range(8), names)
    ax.plot([2.0, 2.1], [5.0, 5.0], "o")
    ax.annotate("node018", (2.0, 5.0), xytext=(0, 6), textcoords="offset points", ha="center")
    ax.annotate("node052", (2.1, 5.0), xytext=(0, 6), textcoords="offset points", ha="center")
    ax.plot([4.5, 5.0, 5.5], [2.0, 2.0, 2.0], "x")
    ax.text(5.0, 2.0, "a note drawn over the points", ha="center", va="center")
    ax.set_title("system=Gold_6230...se, variant=inference")
    found = problems(fig)
    assert any(p.startswith("x tick labels overlap") for p in found)
    assert any("'node018' and 'node052' overlap" in p for p in found)
    assert any("is cut in the middle" in p for p in found)
    assert any("the note 'a note drawn over the points' covers 3 data points" in p for p in found)
    settle(fig)
    after = problems(fig)
    assert not any(p.startswith("x tick labels overlap") or "overlap" in p for p in after), after
    assert fig.axes[0].get_xticklabels()[0].get_rotation() in (45.0, 90.0)


def test_a_plain_figure_has_no_problem() -> None:
    fig = new_figure(5.0, 3.0)
    ax = fig.add_subplot()
    ax.plot([1, 2, 4, 8], [1, 1.9, 3.7, 7.1], marker="o", label="speedup")
    ax.set_xticks([1, 2, 4, 8])
    ax.legend(loc="upper left")
    assert problems(fig) == []


def test_labels_keep_what_varies_whole_and_give_what_they_share() -> None:
    labels = ["device_model=Quadro RTX 8000, system=Gold_6230-Quadro_RTX_8000_XLA, variant=inference",
              "device_model=Quadro RTX 8000, system=Gold_6230-Quadro_RTX_8000_XLA, variant=training",
              "device_model=A100-SXM4-40GB, system=7742-8xA100, variant=training"]
    short, shared = varying_labels(labels, 200)
    assert shared == ""  # no part is in all three
    short, shared = varying_labels(labels[:2], 200)
    assert (short, shared) == (["variant=inference", "variant=training"],
                               "device_model=Quadro RTX 8000, system=Gold_6230-Quadro_RTX_8000_XLA")
    short, _ = varying_labels(labels, 30)
    assert all("..." not in s for s in short) and short[0].replace("\n", " ") == labels[0]
    assert varying_labels(["a=1, b=2", "a=1, b=2"], 40)[0] == ["(alike)", "(alike) (2)"]
