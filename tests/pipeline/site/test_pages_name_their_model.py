"""Every sentence of a release's pages names the model and the figures of that release (issue 41, item 8).

The pages are the release's own: every HTML page a real build publishes under `docs/`, read as a reader
reads it (tags, scripts and code spans left out: `model_4` in code is a key, not a claim). The release's
model is its manifest's `model_version` (`name/major.minor.patch`); nothing here names a version.

Model mentions. A sentence that says "model N" (or "models N", "model-N", "model N.M") with N other than the
release's major version, or N.M other than its major.minor, fails, unless the mention is marked as history
or comparison, narrowly: immediately after it (after an optional "'s") comes a parenthesis that opens with
"a method compared", "an earlier model" or "a method model M compares" with M the release's own major, and
N is lower than the release's major. The name of a registration record ("Model 5 protocol", its link
`model-5-protocol`, its title "Model 5 seasons: protocol", a link to it) is a name, not a claim, and passes. "Model 4 (a method compared)" passes on a model-5 or model-6 release;
"Targets of model 4" or "in model 5.0" on a model-6 release fail, and so does "(a method model 5 compares)".
A version string of the form `name/1.2.3` anywhere on a page (code included) must be the release's own, and
so must a version number right after `model_version` ("`model_version` (4.1)", "`model_version` is `4.0.x`").
Exempt from the model-mention rule, not from the figure rules: the changelog (a history, release by
release) and the registration records (`*-protocol` pages), whose text was fixed before their results and
may not be rewritten.

Skill figures. In a sentence that mentions skill, every decimal figure must be a figure of the release's
`docs/skill.json` or `docs/validation.json` (at the precision printed), unless it is a registered aim or
grid (after ≥, ≤, <, >, ±, inside braces, or a range a–b). A sentence that states this release's choice
of α ("again", "published α", "the choice") must state exactly the α the scorecard publishes by horizon.
"""

from __future__ import annotations

import html as htmllib
import json
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

from pipeline.site.pages import prose
from tests.paths import needs_data

MENTION = re.compile(r"\b[Mm]odels?[- ](\d+)(?:\.(\d+))?")
HISTORY = re.compile(r"^(?:'s)?\s*\((?:a method compared|an earlier model|a method model (\d+) compares)")
RECORD_NAME = re.compile(r"^(?:[- ]protocol\b| seasons: protocol\b)")  # the name of a registration record
# a rule registered now for the next model ("the rule registered for model 7", "registers, for model 7,")
FUTURE = re.compile(r"register(?:ed|s)?,? for (?:the next model, )?$")
RECORD_LINK = re.compile(r"<a\b[^>]*href=\"[^\"]*(?:-protocol|changelog)\.html[^\"]*\"[^>]*>.*?</a>", re.S)
VERSION_STRING = re.compile(r"\b[a-z][a-z-]*/\d+\.\d+\.\d+\b")
VERSION_NUMBER = re.compile(r"model_version\b[^.\d/]{0,12}(\d+)\.(\d+)")
BLOCK_END = re.compile(r"</(?:p|li|td|th|h[1-6]|caption|figcaption|dt|dd|title|div)>", re.I)
SENTENCE = re.compile(r"(?<=[.;!?])\s+(?=[A-Z*(\"“])")
DECIMAL = re.compile(r"(?<![\d.])[-+−]?\d+\.\d+(?!\d|\.\d)")
AIM = re.compile(r"(?:[≥≤<>±]|aim[s]?:?|target:?)\s*[-+−]?\d+\.\d+$")
RANGE_PART = re.compile(r"\d\s*[–-]\s*$|^\s*[–-]\s*\d")
CHOICE = re.compile(r"\bagain\b|published α|\bthe choice\b", re.I)
# a stated choice of α by horizon: the decimals that follow "α by horizon ...:"
ALPHA_LIST = re.compile(r"α by horizon[^:]*:\s*((?:[\d.]+(?:,\s*)?)+)")
EXEMPT = re.compile(r"^(?:changelog|.*-protocol)\.html$")


def sentences(page_html: str) -> list[str]:
    """The page's prose, block by block, cut into sentences."""
    blocks = BLOCK_END.sub(" \x00 ", RECORD_LINK.sub(" ", page_html))
    text = htmllib.unescape(prose(blocks))
    out = []
    for block in text.split("\x00"):
        out += [" ".join(s.split()) for s in SENTENCE.split(block) if s.strip()]
    return out


def model_mentions(sentence: str, version: str) -> list[str]:
    """The mentions of a model other than the release's own, and not marked as history (module docstring)."""
    major, minor = version.split("/")[-1].split(".")[:2]
    bad = []
    for m in MENTION.finditer(sentence):
        n, sub = m.group(1), m.group(2)
        if n == major and (sub is None or sub == minor):
            continue
        if RECORD_NAME.match(sentence[m.end():]):
            continue
        h = HISTORY.match(sentence[m.end():])
        if h and int(n) < int(major) and (h.group(1) is None or h.group(1) == major):
            continue
        if FUTURE.search(sentence[:m.start()]) and int(n) == int(major) + 1:
            continue
        bad.append(sentence[max(0, m.start() - 50):m.end() + 40])
    return bad


def _numbers(doc: object) -> Iterable[float]:
    if isinstance(doc, dict):
        for v in doc.values():
            yield from _numbers(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _numbers(v)
    elif isinstance(doc, (int, float)) and not isinstance(doc, bool):
        yield float(doc)


def skill_figures_wrong(sentence: str, known: set[tuple[int, float]], alpha: list[float]) -> list[str]:
    """Decimal figures of a skill sentence that no release document holds, and a stated α choice that is not
    the published one."""
    bad = []
    if "skill" in sentence.lower():
        for m in DECIMAL.finditer(sentence):
            before, after = sentence[:m.start()], sentence[m.end():]
            if AIM.search(sentence[:m.end()]) or RANGE_PART.search(before) or RANGE_PART.match(after) \
                    or before.count("{") > before.count("}"):
                continue
            x = m.group(0).replace("−", "-")
            places = len(x.split(".")[1])
            if (places, round(float(x), places)) not in known:
                bad.append(f"{x} in: {sentence[:160]}")
    listed = ALPHA_LIST.search(sentence)
    if listed or (CHOICE.search(sentence) and "again" in sentence):
        stated = [float(x) for x in DECIMAL.findall(listed.group(1) if listed else sentence)]
        if stated and stated != alpha:
            bad.append(f"α stated {stated}, published {alpha}: {sentence[:160]}")
    return bad


def _known(docs: Iterable[object]) -> set[tuple[int, float]]:
    return {(p, round(v, p)) for d in docs for v in _numbers(d) for p in range(0, 5)}


def test_the_rules_catch_what_the_pages_said() -> None:
    """The three sentences of issue 41 fail on a model-5 release; their corrected forms pass."""
    assert model_mentions("Targets of model 4: 8 of 10 met", "survey-season/5.0.0")
    assert model_mentions("In model 5.0 it has two parts", "rain-season/6.0.0")
    assert model_mentions("Model 4 (a method model 5 compares)", "rain-season/6.0.0")
    assert not model_mentions("Model 4 (a method model 5 compares)", "survey-season/5.0.0")
    assert not model_mentions("model 3 (a method compared; same folds) against this release", "survey-season/5.0.0")
    assert model_mentions("model 7 (an earlier model)", "survey-season/5.0.0")  # not earlier: not history
    assert not model_mentions("Model 5 protocol", "rain-season/6.0.0")  # a record's name
    assert not model_mentions("and the rule registered for model 7", "survey-season/6.0.0")  # the next model's
    assert model_mentions("the rule registered for model 8", "survey-season/6.0.0")  # not the next one
    assert model_mentions("the rule for model 7", "survey-season/6.0.0")  # not a registration
    assert VERSION_NUMBER.findall("says so here and in model_version (4.1).") == [("4", "1")]
    assert VERSION_NUMBER.findall("and model_version is 4.0.x; a term says 4.1.x") == [("4", "0")]
    known = _known([{"skill": 0.12}])
    assert skill_figures_wrong("forecasts beat climatology (skill 0.261)", known, [1.5])
    assert not skill_figures_wrong("skill 0.12 at 1 month; aim ≥ 0.25; grid {0.50, 0.75}", known, [1.5])
    assert skill_figures_wrong("The choice then lies inside the grid (1.25 again).", known, [1.5, 1.5, 1.25, 1.25])
    assert not skill_figures_wrong("The choice then lies inside the grid (published α by horizon 1–4: 1.5, 1.5, "
                                   "1.25, 1.25).", known, [1.5, 1.5, 1.25, 1.25])
    assert skill_figures_wrong("Protocol 1's published α by horizon: 1.25, 1.25, 1.25, 1.25.", known, [1.5, 1.5, 1.25, 1.25])
    # figures of another measure in a sentence that also names the published α are not an α choice
    assert not skill_figures_wrong("α = 1 beat the published α there (vs persistence +0.06 / +0.11).", known, [1.5])


@pytest.mark.slow
@needs_data()
def test_every_page_names_the_release_model_and_its_figures(real_build: Path) -> None:
    root = (real_build / "current").resolve()
    version = json.loads((root / "manifest.json").read_text())["model_version"]
    docs = root / "docs"
    skill = json.loads((docs / "skill.json").read_text()) if (docs / "skill.json").exists() else {}
    validation = json.loads((docs / "validation.json").read_text())
    known = _known([skill, validation])
    # the α the pages state by horizon is protocol 1's (protocol 2 publishes α by season class)
    alpha = [float(a) for a in (skill.get("protocol_1") or skill).get("published_alpha") or []]
    pages = {str(p.relative_to(docs)): p.read_text(encoding="utf-8") for p in sorted(docs.rglob("*.html"))}
    assert len(pages) > 10 and "model.html" in pages and "validation.html" in pages
    wrong: dict[str, list[str]] = {}
    for name, page in pages.items():
        text = " ".join(htmllib.unescape(re.sub(r"<[^>]+>", " ", page)).split())  # code spans kept
        found = [f"version {v}" for v in VERSION_STRING.findall(text) if v != version]
        found += [f"model_version {a}.{b}" for a, b in VERSION_NUMBER.findall(text)
                  if f"{a}.{b}" != ".".join(version.split("/")[-1].split(".")[:2]) and not EXEMPT.match(Path(name).name)]
        for s in sentences(page):
            if not EXEMPT.match(Path(name).name):
                found += model_mentions(s, version)
            found += skill_figures_wrong(s, known, alpha)
        if found:
            wrong[name] = found
    assert wrong == {}, f"release model {version}: " + json.dumps(wrong, indent=1, ensure_ascii=False)
