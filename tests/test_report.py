"""Tests of grokkit.report: preset resolution, claims, summary, verify and the JSON summary."""
import json
import math

import numpy as np
import pytest

from grokkit import report
from grokkit.report import Report, resolve

PRESETS = {
    "quick": {"steps": 1000, "n": 40, "beta1": 1e-3},
    "paper": {"steps": 10**6, "n": 100, "beta1": 1e-5},
}


# --- resolve --------------------------------------------------------------------------------


def test_resolve_preset_values():
    assert resolve(PRESETS, "quick", {}) == PRESETS["quick"]
    assert resolve(PRESETS, "paper", {}) == PRESETS["paper"]


def test_resolve_none_keeps_preset_and_value_overrides():
    given = {"steps": None, "n": 20, "beta1": 0.0, "unrelated": 5, "__name__": "__main__"}
    params = resolve(PRESETS, "paper", given)
    assert params == {"steps": 10**6, "n": 20, "beta1": 0.0}  # 0.0 is a value, not "unset"
    assert PRESETS["paper"] == {"steps": 10**6, "n": 100, "beta1": 1e-5}  # the preset is not modified


def test_a_second_run_is_none_where_the_preset_does_not_train_it_and_checked_where_it_does():
    presets = {"quick": {"steps": 10, "faithful_steps": None, "reference_alpha": None},
               "paper": {"steps": 10, "faithful_steps": 20, "reference_alpha": 1e-3}}
    assert resolve(presets, "quick", {})["faithful_steps"] is None
    assert resolve(presets, "paper", {})["reference_alpha"] == 1e-3
    with pytest.raises(ValueError, match=r"reference_alpha must be in \(0.0, inf\), got -1"):
        resolve(presets, "paper", {"reference_alpha": -1})
    with pytest.raises(ValueError, match=r"faithful_steps must be an integer in \[1, inf\), got 0.5"):
        resolve(presets, "quick", {"faithful_steps": 0.5})
    with pytest.raises(ValueError, match=r"steps must be an integer"):  # None is only a second run's
        resolve({"quick": {"steps": None}}, "quick", {})


def test_resolve_unknown_preset():
    with pytest.raises(ValueError, match=r"preset must be one of \['paper', 'quick'\], got 'full'"):
        resolve(PRESETS, "full", {})


# --- claims ---------------------------------------------------------------------------------


def make_report():
    r = Report("01_demo", {"steps": 100})
    r.claim_between("between ok", 0.5, 0.0, 1.0)
    r.claim_between("between bad", 1.5, 0.0, 1.0)
    r.claim_close("close ok", 1.05, 1.0, 0.1)
    r.claim_close("close bad", 1.5, 1.0, 0.1)
    r.claim_below("below ok", 1.0, 1.0)
    r.claim_below("below bad", 2.0, 1.0)
    r.claim_above("above ok", 3.0, 2.0)
    r.claim_above("above bad", 1.0, 2.0)
    r.claim_true("true ok", np.bool_(True))
    r.claim_true("true bad", False, expected="the run converged")
    return r


def test_claims_pass_and_fail():
    r = make_report()
    results = {c.name: c.passed for c in r.claims}
    assert results == {f"{kind} {tag}": tag == "ok" for kind in ("between", "close", "below", "above", "true")
                       for tag in ("ok", "bad")}
    assert all(isinstance(c.passed, bool) for c in r.claims)


@pytest.mark.parametrize("add", [
    lambda r: r.claim_between("nan", math.nan, -math.inf, math.inf),
    lambda r: r.claim_close("nan", math.nan, 0.0, math.inf),
    lambda r: r.claim_below("nan", math.nan, math.inf),
    lambda r: r.claim_above("nan", np.float64("nan"), -math.inf),
])
def test_nan_fails(add):
    r = Report("nb", {})
    assert add(r) is None  # nothing for a notebook cell to display
    assert r.claims[0].passed is False
    assert r.summary().startswith("FAIL")


def test_same_name_replaces_the_claim():
    r = Report("nb", {})
    r.claim_below("x", 2.0, 1.0)
    r.claim_below("x", 0.5, 1.0)
    assert [(c.name, c.passed) for c in r.claims] == [("x", True)]


def test_summary_lines():
    r = make_report()
    lines = r.summary().splitlines()
    assert len(lines) == 10
    for line, claim in zip(lines, r.claims):
        assert line.startswith("PASS" if claim.passed else "FAIL")
        assert claim.name in line
    assert "measured 0.5, expected in [0, 1]" in lines[0]
    assert "expected the run converged" in lines[-1]


@pytest.mark.parametrize("value, expected, shown", [
    (0.999997391421016, "<= 1", "0.999997"),      # not "1", which would read as the bound
    (1.0000004, ">= 1", "1.0000004"),
    (0.8500001, "1 ± 0.15", "0.8500001"),         # the bounds of a ± are target ∓ tol
    (1.0, "<= 1", "1"),                           # a value equal to its bound stays short
    (0.3141592, "<= 1", "0.314"),
    (-1.0, "<= -1", "-1"),
    (float("nan"), "<= 1", "nan"),
    (True, "True", "True"),
    (7, "<= 7", "7"),
])
def test_a_value_is_never_shown_as_a_bound_it_is_not(expected, value, shown):
    assert report.format_value(value, expected) == shown


def test_a_claims_line_shows_the_digits_that_separate_value_and_bound():
    r = Report("nb", {})
    r.check_below("max ρ", 0.999997391421016, 1.0)
    assert "measured 0.999997, expected <= 1" in r.summary()


def test_verify_lists_failing_claims():
    r = make_report()
    with pytest.raises(AssertionError) as err:
        r.verify()
    text = str(err.value)
    for c in r.claims:
        assert (c.name in text) == (not c.passed), c.name


def test_verify_passes_when_all_claims_pass():
    r = Report("nb", {})
    r.claim_below("small", 0.1, 1.0)
    r.verify()
    Report("empty", {}).verify()


# --- save -----------------------------------------------------------------------------------


def _strict_load(path):
    def no_constant(name):
        raise ValueError(f"non-standard JSON constant {name}")

    with open(path, encoding="utf-8") as fh:
        return json.load(fh, parse_constant=no_constant)


def test_save_writes_nothing_without_the_environment_variable(monkeypatch, tmp_path):
    monkeypatch.delenv(report.SUMMARY_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert make_report().save() is None
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv(report.SUMMARY_ENV, "")
    assert make_report().save() is None
    assert list(tmp_path.iterdir()) == []


def test_save_writes_strict_json(monkeypatch, tmp_path):
    path = tmp_path / "summary.json"
    monkeypatch.setenv("GROKKIT_SUMMARY", str(path))
    r = make_report()
    r.claim_below("nan claim", math.nan, 1.0)
    r.measure(t1=np.array([1.0, np.nan, np.inf]), count=np.int64(3), flag=np.bool_(True), slope=np.float32(-1.0),
              nested={"a": (np.float64(2.0), math.nan)})
    assert r.save() == str(path)
    out = _strict_load(path)
    assert out["notebook"] == "01_demo"
    assert out["parameters"] == {"steps": 100}
    assert out["measured"] == {"t1": [1.0, None, None], "count": 3, "flag": True, "slope": -1.0,
                               "nested": {"a": [2.0, None]}}
    assert out["all_claims_pass"] is False
    assert len(out["claims"]) == 11
    for claim, c in zip(out["claims"], r.claims):
        assert set(claim) == {"name", "value", "expected", "pass", "kind", "where", "seeds"}
        assert claim["name"] == c.name and claim["expected"] == c.expected and claim["pass"] is c.passed
    assert out["claims"][0]["value"] == 0.5
    assert out["claims"][-1] == {"name": "nan claim", "value": None, "expected": "<= 1", "pass": False,
                                 "kind": "claim", "where": "", "seeds": 1}
    assert {"python", "numpy", "torch", "grokkit"} <= set(out["versions"])
    assert out["device"] in ("cpu", "cuda")


def test_save_all_claims_pass(monkeypatch, tmp_path):
    path = tmp_path / "ok.json"
    monkeypatch.setenv("GROKKIT_SUMMARY", str(path))
    r = Report("nb", {"preset": "quick"})
    r.claim_close("slope", -1.0, -1.0, 0.1)
    r.save()
    assert _strict_load(path)["all_claims_pass"] is True


def test_claims_table_lists_claims_then_disagreements():
    r = Report("nb", {})
    r.claim_below("ratio ||b_hat||_inf < 1", 0.5, 1.0)
    r.claim_above("slope", 0.2, 1.0)
    r.disagree("error scaling", "error ∝ alpha beta1", "slope 0.77 <against> alpha beta1")
    table = r.table()
    assert table.rows() == [("ratio ||b_hat||_inf < 1", "0.5", "<= 1", "PASS"),
                            ("slope", "0.2", ">= 1", "FAIL"),
                            ("error scaling", "slope 0.77 <against> alpha beta1", "error ∝ alpha beta1", "DIFF")]
    assert repr(table) == r.summary()  # the text nbval compares
    page = table._repr_html_()
    assert page.startswith('<table class="claims">') and page.count("<tr>") == 4
    assert "&lt;against&gt;" in page and "<against>" not in page  # escaped
    assert '<td class="verdict-fail">FAIL</td>' in page and '<td class="verdict-diff">DIFF</td>' in page


# --- claims over seeds, set-up checks -------------------------------------------------------


@pytest.mark.parametrize("add, worst, passed", [
    (lambda r: r.claim_below("c", [0.1, 0.3, 0.2], 0.25), 0.3, False),
    (lambda r: r.claim_below("c", np.array([0.1, 0.2]), 0.25), 0.2, True),
    (lambda r: r.claim_above("c", [3.0, 1.0, 2.0], 1.5), 1.0, False),
    (lambda r: r.claim_between("c", [0.5, 1.2, -0.05], 0.0, 1.0), 1.2, False),
    (lambda r: r.claim_close("c", [1.0, 1.04, 0.9], 1.0, 0.05), 0.9, False),
    (lambda r: r.claim_true("c", [True, False, True]), False, False),
    (lambda r: r.claim_below("c", [0.1, math.nan, 0.2], 1.0), None, False),
])
def test_a_claim_over_seeds_holds_on_every_seed_and_shows_the_worst(add, worst, passed):
    r = Report("nb", {})
    add(r)
    (c,) = r.claims
    assert c.passed is passed and c.seeds in (2, 3)
    if worst is None:
        assert math.isnan(c.value)
    else:
        assert c.value == worst
    assert c.measured().startswith(f"worst of {c.seeds} seeds: ")


def test_a_claim_over_seeds_refuses_an_empty_or_2d_value():
    r = Report("nb", {})
    with pytest.raises(ValueError, match="claim 'c' must be a number or a non-empty 1-d sequence"):
        r.claim_below("c", [], 1.0)
    with pytest.raises(ValueError, match=r"got shape \(2, 2\)"):
        r.claim_below("c", np.ones((2, 2)), 1.0)


def test_setup_checks_are_apart_from_the_papers_claims():
    r = Report("nb", {})
    r.claim_below("error after t2", 0.01, 0.05, where="Section 2, Figure 1")
    r.check_close("projector is idempotent", 1e-15, 0.0, 1e-12)
    r.check_true("broken set-up", False)
    r.disagree("slope", "1", "0.41")
    assert [c.kind for c in r.claims] == ["claim", "setup", "setup"]
    assert [row[3] for row in r.table().rows()] == ["PASS", "DIFF", "OK", "BROKEN"]
    assert r.table().rows()[0][0] == "error after t2 (Section 2, Figure 1)"
    assert "Checks of the set-up" in r.table()._repr_html_()
    assert "BROKEN  broken set-up" in r.summary()
    with pytest.raises(AssertionError, match="broken set-up"):
        r.verify()


def test_at_paper_scale_is_the_run_itself_at_the_paper_preset():
    """A paper run reads its own numbers, never its previous record; a quick run reads the record."""
    report = Report("fig01-generalization-time", {})
    report.measure(alpha=[0.5])
    assert report.at_paper_scale("sparse_recovery", "paper") is report.measured
    record = report.at_paper_scale("sparse_recovery", "quick")
    assert record is not None and record != report.measured and len(record["alpha"]) == 36
    assert Report("no-such-page", {}).at_paper_scale("sparse_recovery", "quick") is None
