import json

import numpy as np
import pytest
from markdown_it import MarkdownIt

from companion.ledger import (CheckFailed, Diagnosis, Ledger, build_dir, claims_table, contract_problems,
                              headline_counts, ledger_markdown, md_escape, read_ledgers, summary_markdown)
from companion.ledger import ascii_maths, md_text

POST = dict(kind="paper", statement="s", paper="p", criterion="holds if x", post_hoc=True)
POST3 = dict(POST, no_null="exact", gate_criteria={"g": "c"}, gates={"g": (1, True)})


def counted(ledger, cid, *, kind="paper", v3=True, **measured):
    """Pre-register a claim (v3: no null and one gate; else on the old contract) and record it."""
    contract = dict(no_null="exact", gates={"g": "c"}) if v3 else {}
    ledger.preregister(cid, kind=kind, statement="s", paper="p", criterion="holds if x", **contract)
    return ledger.record(cid, gates={"g": (1, True)} if v3 else None, **measured)


@pytest.fixture
def ledger(tmp_path):
    return Ledger("toy-chapter", scale="quick", seed=0, path=tmp_path / "ledger" / "toy-chapter.json")


def test_record_writes_the_json_of_book_md(ledger):
    ledger.preregister("kl-bound", kind="paper", statement="KL is bounded", paper="KL <= 1",
                       criterion="holds if KL <= 1", null="the same KL for the untrained model",
                       gates={"model-learned": "loss fell by half"})
    ledger.departure("learning rate", official=1e-3, source="train.py", ours=2e-3, why="a smaller batch")
    ledger.record("kl-bound", measured=np.float64(0.5), holds=np.bool_(True), note="exact",
                  null_measured=3.0, null_holds=False, gates={"model-learned": (0.38, True)})
    ledger.record("win-rate", measured="n/a here", holds=False, kind="mechanism", statement="wins",
                  paper="0.9", criterion="holds if >= 0.9", post_hoc=True, no_null="checked exactly",
                  gate_criteria={"g": "c"}, gates={"g": (1, True)})
    ledger.record("kernel", measured=0.0, holds=True, kind="check", statement="k = ref", paper="-",
                  criterion="c", post_hoc=False)
    data = json.loads(ledger.path.read_text())
    assert data == {"chapter": "toy-chapter", "scale": "quick", "seed": 0, "claims": [
        {"id": "kl-bound", "kind": "paper", "post_hoc": False, "statement": "KL is bounded", "paper": "KL <= 1",
         "measured": 0.5, "criterion": "holds if KL <= 1", "holds": True, "note": "exact",
         "null": "the same KL for the untrained model", "null_measured": 3.0, "null_holds": False,
         "gates": [{"id": "model-learned", "criterion": "loss fell by half", "measured": 0.38, "passed": True}],
         "diagnosis": None, "verdict": "reproduced"},
        {"id": "win-rate", "kind": "mechanism", "post_hoc": True, "statement": "wins", "paper": "0.9",
         "measured": "n/a here", "criterion": "holds if >= 0.9", "holds": False, "note": "",
         "no_null": "checked exactly", "gates": [{"id": "g", "criterion": "c", "measured": 1, "passed": True}],
         "diagnosis": None, "verdict": "untraced"},
        {"id": "kernel", "kind": "check", "post_hoc": False, "statement": "k = ref", "paper": "-", "measured": 0.0,
         "criterion": "c", "holds": True, "note": "", "verdict": "holds"}],
        "departures": [{"parameter": "learning rate", "official": 0.001, "source": "train.py", "ours": 0.002,
                        "why": "a smaller batch", "ablation": None}]}
    assert type(data["claims"][0]["measured"]) is float
    assert contract_problems(data) == []


@pytest.mark.parametrize("missing", ["kind", "statement", "paper", "criterion", "post_hoc"])
def test_an_unregistered_claim_needs_kind_criterion_and_post_hoc(ledger, missing):
    given = {k: v for k, v in POST.items() if k != missing}
    with pytest.raises(ValueError, match=f"^{missing}: claim 'c' was not pre-registered"):
        ledger.record("c", measured=1, holds=True, **given)


def test_a_registered_claim_cannot_change_its_criterion_after_the_run(ledger):
    ledger.preregister("c", kind="paper", statement="s", paper="p", criterion="holds if <= 1")
    with pytest.raises(ValueError, match="^criterion: claim 'c' was pre-registered"):
        ledger.record("c", measured=2, holds=True, criterion="holds if <= 3")
    with pytest.raises(ValueError, match="^kind"):
        ledger.record("c", measured=2, holds=True, kind="check")
    with pytest.raises(ValueError, match="^id: claim 'c' is already pre-registered"):
        ledger.preregister("c", kind="paper", statement="s", paper="p", criterion="again")
    assert ledger.pending == ["c"]
    with pytest.raises(ValueError, match="pre-registered claims never recorded"):
        ledger.verdict_markdown()


@pytest.mark.parametrize("kwargs, match", [
    ({"id": "Not Kebab"}, "^id"),
    ({"measured": None}, "^measured"),
    ({"measured": float("nan")}, "^measured"),
    ({"measured": True}, "^measured"),
    ({"measured": "x" * 200}, "^measured"),
    ({"holds": "yes"}, "^holds"),
    ({"statement": ""}, "^statement"),
    ({"kind": "theorem"}, "^kind"),
    ({"criterion": " "}, "^criterion"),
    ({"post_hoc": "no"}, "^post_hoc"),
])
def test_bad_claims_are_refused(ledger, kwargs, match):
    claim = dict(id="ok-id", measured=1.0, holds=True, **POST)
    claim.update(kwargs)
    with pytest.raises(ValueError, match=match):
        ledger.record(claim.pop("id"), **claim)


def test_a_failing_check_is_written_then_raised(ledger):
    ledger.record("kernel", measured=1e-6, holds=True, kind="check", statement="kernel = reference",
                  paper="(ours)", criterion="holds if max error <= 1e-5", post_hoc=False)
    with pytest.raises(CheckFailed, match="check 'broken' failed"):
        ledger.record("broken", measured=0.3, holds=False, kind="check", statement="kernel = reference",
                      paper="(ours)", criterion="holds if max error <= 1e-5", post_hoc=False)
    assert [c["id"] for c in json.loads(ledger.path.read_text())["claims"]] == ["kernel", "broken"]


def test_paper_claims_are_never_asserted(ledger):
    claim = ledger.record("fails", measured=0.1, holds=False, **POST)
    assert not claim.holds and not ledger["fails"].holds


def test_duplicate_ids_and_bad_ledger_arguments(ledger):
    ledger.record("once", measured=1, holds=True, **POST)
    with pytest.raises(ValueError, match="^id: claim 'once' is already"):
        ledger.record("once", measured=1, holds=True, **POST)
    with pytest.raises(ValueError, match="^chapter"):
        Ledger("Best of N", scale="quick", seed=0)
    with pytest.raises(ValueError, match="^scale"):
        Ledger("x", scale="huge", seed=0)
    with pytest.raises(ValueError, match="^seed"):
        Ledger("x", scale="quick", seed=1.5)
    with pytest.raises(KeyError, match="unknown"):
        ledger["never"]


def _table_rows(markdown: str) -> list[list[str]]:
    """Parse Markdown with a real parser and return the text of every body row's cells."""
    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    rows, row = [], None
    for tok in tokens:
        if tok.type == "tr_open":
            row = []
        elif tok.type == "inline" and row is not None:
            row.append(tok.content)
        elif tok.type == "tr_close":
            rows.append(row)
            row = None
    return rows[1:]  # without the header


def test_a_statement_with_pipes_and_stars_renders_as_one_row(ledger):
    ledger.record("pipes", measured=1, holds=False, kind="paper", statement="cost O(|E|) with p* = a_b * c",
                  paper="O(|V| + |E|)", criterion="holds if *x* | y", post_hoc=True)
    rows = _table_rows(claims_table(ledger.claims))
    assert len(rows) == 1 and len(rows[0]) == 6, rows
    assert rows[0][0] == "✗ does not hold (old contract)" and rows[0][4] == "paper, post hoc"
    assert rows[0][2] == "1"  # measured comes right after the claim: a phone shows it first
    html = MarkdownIt("commonmark").enable("table").render(claims_table(ledger.claims))
    assert "<em>" not in html and "O(|E|)" in html and "p* = a_b * c" in html
    assert md_escape("a|b*c_d$e") == "a\\|b\\*c\\_d\\$e"



def test_tex_in_a_claim_is_kept_for_mathjax_and_the_rest_stays_literal(ledger):
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    ledger.record("tex", measured=1, holds=False, kind="paper", post_hoc=True,
                  statement=r"KL $\le \log n - (n-1)/n$ with $|E|$ edges, a_b * c",
                  paper=r"$\hat k = \min\{k : v(k) \le \delta\}$", criterion=r"holds if $\|x\| \ge 2$")
    markdown = claims_table(ledger.claims)
    rows = _table_rows(markdown)
    assert len(rows) == 1 and len(rows[0]) == 6, rows  # the |s of the TeX split no cell
    parser = MarkdownIt("commonmark").enable("table").use(dollarmath_plugin)
    maths = [t.content for t in parser.parse(markdown) if t.type == "inline"
             for t in t.children if t.type == "math_inline"]
    assert maths == [r"\le \log n - (n-1)/n", r"\vert E\vert ", r"\Vert x\Vert  \ge 2",
                     r"\hat k = \min\{k : v(k) \le \delta\}"]
    assert r"a\_b \* c" in markdown  # outside the dollars, nothing is markup
    assert md_text("costs $5 and $ 6 $") == r"costs \$5 and \$ 6 \$"  # no span, no maths
    assert md_text(0.123456) == "0.1235"


def test_ascii_maths_is_found_outside_the_tex_only():
    assert ascii_maths(r"k_hat <= delta, sqrt(n), R^2 >= 0, min{k : v}, +/- 1") == [
        "k_hat", "<=", "sqrt(", "R^2", ">=", "min{", "+/-"]
    assert ascii_maths(r"$\hat k \le \delta$, $\sqrt{n}$, $R^2 \ge 0$, a k-means run") == []
    assert ascii_maths(r"$a$ <= $b$") == ["<="]

def test_verdict_box_counts_the_papers_claims_and_lists_the_rest_apart(ledger):
    ledger.preregister("a", kind="paper", statement="A holds", paper="p", criterion="c")
    ledger.preregister("b", kind="mechanism", statement="B | explains", paper="p", criterion="c")
    ledger.record("a", measured=1, holds=True)
    ledger.record("b", measured=1, holds=False)
    ledger.record("k", measured=0, holds=True, kind="check", statement="kernel", paper="-", criterion="c",
                  post_hoc=False)
    ledger.record("z", measured=0, holds=True, kind="paper", statement="late", paper="-", criterion="c",
                  post_hoc=True)
    box = ledger.verdict_markdown()
    assert box.startswith(":::{admonition} Verdict: 1 of 2 of the paper's claims hold at quick scale")
    assert "- ✓ **holds (old contract)**: A holds (paper)" in box
    assert "- ✗ **does not hold (old contract)**: B \\| explains (mechanism)" in box
    assert "1 check (1 holds), 1 post-hoc claim (1 holds)" in box and "{ref}`the claims <toy-chapter-claims>`" in box
    assert ledger.say("w", "b", yes="explains", no="does not explain") is None  # glued, never displayed


def test_build_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("BOOK_BUILD_DIR", str(tmp_path))
    assert build_dir() == tmp_path
    assert Ledger("x", scale="quick", seed=0).path == tmp_path / "ledger" / "x.json"
    monkeypatch.delenv("BOOK_BUILD_DIR")
    monkeypatch.chdir(tmp_path)
    assert build_dir() == tmp_path / "_build"  # no repository above: next to the notebook


def test_glue_takes_plain_numbers_and_words_only():
    from companion.book import glue, glue_choice, glue_text

    with pytest.raises(ValueError, match="^value"):
        glue("x", "0.5")
    with pytest.raises(ValueError, match="^value"):
        glue("x", True)
    with pytest.raises(ValueError, match="^text"):
        glue_text("x", "")
    with pytest.raises(ValueError, match="^condition"):
        glue_choice("x", 1.0, "beats", "does not beat")
    glue("x", np.float64(0.5))  # outside a notebook myst-nb glues into nothing; it must not fail
    assert glue_choice("x", np.bool_(False), "beats", "does not beat") is None


def test_read_ledgers_follows_the_reading_order_and_refuses_old_files(tmp_path):
    for slug in ("zeta", "alpha", "mid"):
        Ledger(slug, scale="quick", seed=0, path=tmp_path / f"{slug}.json").record(
            "c", measured=1, holds=True, **POST)
    order = [led["chapter"] for led in read_ledgers(tmp_path, order=["mid", "zeta"])]
    assert order == ["mid", "zeta", "alpha"]
    (tmp_path / "old.json").write_text(json.dumps({"chapter": "old", "scale": "quick", "seed": 0, "claims": [
        {"id": "c", "statement": "s", "paper": "p", "measured": 1, "holds": True, "note": ""}]}))
    with pytest.raises(ValueError, match="old.json: claim 'c' lacks"):
        read_ledgers(tmp_path)


def test_ledger_page_counts_each_kind_in_its_own_column(tmp_path):
    led = Ledger("toy", scale="quick", seed=0, path=tmp_path / "toy.json")
    counted(led, "a", measured=1, holds=True)
    counted(led, "b", kind="mechanism", measured=2, holds=False)
    led.record("c", measured=2, holds=True, **{**POST, "kind": "control", "post_hoc": False})
    led.record("d", measured=2, holds=True, **POST3)
    led.record("e", measured=0, holds=True, **{**POST, "kind": "check", "post_hoc": False})
    old = Ledger("old", scale="quick", seed=0, path=tmp_path / "old.json")
    counted(old, "a", v3=False, measured=1, holds=True)
    (data, old_data) = read_ledgers(tmp_path, order=["toy", "old"])
    counts = headline_counts(data)
    assert counts == {"reproduced": 1, "not_reproduced": 0, "untraced": 1, "inconclusive": 0, "vacuous": 0,
                      "old_contract": (0, 0), "check": (1, 1), "control": (1, 1), "post_hoc": (1, 1)}
    table = summary_markdown([data, old_data], {"toy": "A toy | chapter"})
    assert ("| {ref}`A toy \\| chapter <toy-claims>` | 1 | 0 | 1 | 0 | 0 | 1/1 checks, 1/1 controls, "
            "1/1 post hoc |") in table
    assert "| **all chapters** | **1** | **0** | **1** |" in table
    assert "| chapter (old contract) |" in table and "| {ref}`old <old-claims>` | 1/1 | – |" in table
    page = ledger_markdown([data], {"toy": "Toy"})
    assert ("**{ref}`Toy <toy-claims>`**: 1 of 1 decided claims of the paper reproduced at quick scale; "
            "not counted: 1 not reproduced with the cause untraced") in page
    assert ":class: dropdown" in page and "no null: exact" in page  # the reason for no null is shown
    led2 = Ledger("toy2", scale="quick", seed=0, path=tmp_path / "toy2.json")
    led2.record("a", measured=1, holds=True, note="measured | somehow", **{**POST, "kind": "control"})
    assert ":class: dropdown" in ledger_markdown([read_ledgers(tmp_path, order=["toy2"])[0]])
    assert ":class: dropdown" not in ledger_markdown([old_data])  # no note, no null, no gate: nothing to fold


# --- contract v3: nulls, gates, diagnoses and the five verdicts ---------------------------------------

def _claim(ledger, cid, *, holds, null_holds=None, gate_ok=True, diagnosis=None):
    ledger.preregister(cid, kind="paper", statement=f"{cid} holds", paper="p", criterion="holds if x <= 1",
                       null="the same x for an untrained model", gates={"model-learned": "loss halves"})
    return ledger.record(cid, measured=0.5, holds=holds, null_measured=0.7, null_holds=null_holds,
                         gates={"model-learned": (0.4 if gate_ok else 0.9, gate_ok)}, diagnosis=diagnosis)


def test_the_five_verdicts(ledger):
    traced = Diagnosis("ablation at the official lr 1e-3", "the ratio stays at 0.98")
    assert _claim(ledger, "good", holds=True, null_holds=False).verdict == "reproduced"
    assert _claim(ledger, "empty", holds=True, null_holds=True).verdict == "vacuous"
    assert _claim(ledger, "blind", holds=True, null_holds=False, gate_ok=False).verdict == "inconclusive"
    assert _claim(ledger, "blind-fail", holds=False, null_holds=False, gate_ok=False,
                  diagnosis=traced).verdict == "inconclusive"
    assert _claim(ledger, "traced", holds=False, null_holds=False, diagnosis=traced).verdict == "not reproduced"
    assert _claim(ledger, "lost", holds=False, null_holds=False).verdict == "untraced"
    ledger.preregister("exact", kind="paper", statement="a theorem", paper="Thm 1", criterion="no violation",
                       no_null="checked exactly against enumeration",
                       gates={"tight": "some case within 1% of the bound"})
    ledger.record("exact", measured=0, holds=True, gates={"tight": (0.001, True)})
    assert ledger["exact"].verdict == "reproduced"
    head = ledger.headline()
    assert head == ("2 of 3 decided claims of the paper reproduced at quick scale; not counted: 2 inconclusive, "
                    "1 vacuous, 1 not reproduced with the cause untraced")
    box = ledger.verdict_markdown()
    assert ":class: important" in box
    assert "- ∅ **vacuous: the null passes too (0.7)**: empty holds (paper)" in box
    assert "- ? **inconclusive (gate model-learned failed: 0.9)**: blind holds (paper)" in box
    assert ("- ✗ **not reproduced (traced)**: traced holds (paper) Traced by ablation at the official lr 1e-3: "
            "the ratio stays at 0.98.") in box
    assert "- ✗ **not reproduced, cause untraced**: lost holds (paper)" in box
    ledger.departure("seeds", official=5, source="paper", ours=3, why="time")
    data = ledger.to_dict()
    assert contract_problems(data) == []
    assert ledger.say_verdict("w", "blind") is None  # glued, never displayed
    data["claims"][1]["verdict"] = "reproduced"  # a typed verdict is caught
    assert contract_problems(data) == ["claim 'empty' reads 'reproduced', its fields give 'vacuous'"]


def test_a_claim_must_record_its_null_and_exactly_its_gates(ledger):
    ledger.preregister("c", kind="paper", statement="s", paper="p", criterion="x <= 1", null="untrained",
                       gates={"learned": "loss halves"})
    with pytest.raises(ValueError, match="^null_measured: claim 'c' pre-registered a null"):
        ledger.record("c", measured=1, holds=True, gates={"learned": (1, True)})
    with pytest.raises(ValueError, match="^gates: claim 'c' pre-registered the gates"):
        ledger.record("c", measured=1, holds=True, null_measured=2, null_holds=False)
    with pytest.raises(ValueError, match="^gates: expected 'learned': \\(measured, passed\\)"):
        ledger.record("c", measured=1, holds=True, null_measured=2, null_holds=False, gates={"learned": 0.3})
    with pytest.raises(ValueError, match="passed: expected a bool"):
        ledger.record("c", measured=1, holds=True, null_measured=2, null_holds=False, gates={"learned": (1, 1)})
    with pytest.raises(ValueError, match="^null_holds"):
        ledger.record("c", measured=1, holds=True, null_measured=2, null_holds="no", gates={"learned": (1, True)})
    with pytest.raises(ValueError, match="^diagnosis: expected a Diagnosis"):
        ledger.record("c", measured=1, holds=False, null_measured=2, null_holds=False,
                      gates={"learned": (1, True)}, diagnosis="it is the scale")
    with pytest.raises(ValueError, match="^null: give either"):
        ledger.preregister("d", kind="paper", statement="s", paper="p", criterion="c", null="n", no_null="m")
    with pytest.raises(ValueError, match="^kind: a check claim has no null"):
        ledger.preregister("e", kind="check", statement="s", paper="p", criterion="c", null="n")
    with pytest.raises(ValueError, match="^null_measured: claim 'f' has no pre-registered null"):
        ledger.record("f", measured=1, holds=True, null_measured=1, null_holds=True, **POST3)
    with pytest.raises(ValueError, match="^experiment"):
        Diagnosis("", "flat")


def test_departures_beyond_two_fold_need_an_ablation(ledger):
    with pytest.raises(ValueError, match="^ablation: 'learning rate' departs 100x"):
        ledger.departure("learning rate", official=1e-3, source="train.py", ours=0.1, why="faster")
    ledger.departure("learning rate", official=1e-3, source="train.py", ours=0.1, why="faster",
                     ablation="lr-official")
    ledger.departure("model", official="a 7B language model", source="paper, section 5", ours="a Markov chain",
                     why="offline and enumerable", ablation="none can run offline")
    with pytest.raises(ValueError, match="^parameter: 'model' is already"):
        ledger.departure("model", official="x", source="y", ours="z", why="w")
    _claim(ledger, "good", holds=True, null_holds=False)
    with pytest.raises(ValueError, match="^ablation: departure 'learning rate' names 'lr-official'"):
        ledger.verdict_markdown()
    _claim(ledger, "lr-official", holds=True, null_holds=False)
    assert "Verdict: 2 of 2 decided claims" in ledger.verdict_markdown()
    ledger.departure("batch", official=64, source="train.py", ours=8, why="w", ablation="good, missing-one")
    with pytest.raises(ValueError, match="names 'missing-one'"):
        ledger.verdict_markdown()
    table = ledger.departures()._repr_markdown_()
    assert "| learning rate | 0.001 (train.py) | 0.1 | faster | lr-official |" in table


def test_a_chapter_on_the_old_contract_is_named_by_contract_problems(ledger):
    counted(ledger, "a", v3=False, measured=1, holds=True)
    problems = contract_problems(ledger.to_dict())
    assert problems == ["no departures table (departure())", "claim 'a' has no null and no reason for none"]
    assert ledger["a"].verdict is None and ledger.headline().endswith("(old contract: no nulls or gates)")


def test_what_a_v3_claim_cannot_leave_out(ledger):
    with pytest.raises(ValueError, match="^post_hoc: claim 'late' is a paper claim that was not pre-registered"):
        ledger.record("late", measured=1, holds=True, **{**POST3, "post_hoc": False})
    with pytest.raises(ValueError, match="^gates: a paper or mechanism claim gives its null"):
        ledger.preregister("a", kind="paper", statement="s", paper="p", criterion="c", null="untrained")
    with pytest.raises(ValueError, match="^gates: a paper or mechanism claim gives its null"):
        ledger.preregister("b", kind="paper", statement="s", paper="p", criterion="c", gates={"g": "c"})
    ledger.preregister("c", kind="paper", statement="s", paper="p", criterion="c", no_null="exact",
                       gates={"g": "c"})
    for bad in ("ab", 5):
        with pytest.raises(ValueError, match="^gates: expected a dict"):
            ledger.record("c", measured=1, holds=True, gates=bad)
    for official, ours in ((0, 0.1), ("a 7B model", "an MLP")):
        with pytest.raises(ValueError, match="^ablation"):
            ledger.departure(f"p{ours}", official=official, source="s", ours=ours, why="w")
    assert ledger.departure("same", official=0, source="s", ours=0, why="w").factor == 1.0


def test_a_failure_is_a_failure_whatever_its_null_shows(ledger):
    assert _claim(ledger, "x", holds=False, null_holds=True).verdict == "untraced"
    traced = Diagnosis("a budget sweep of 3 points", "flat")
    assert _claim(ledger, "y", holds=False, null_holds=True, diagnosis=traced).verdict == "not reproduced"
